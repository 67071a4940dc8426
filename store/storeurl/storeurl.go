// Package storeurl opens a kura store from a URL, the one way the library
// and every kura command name a cache:
//
//	redis://[user:password@]host:port[/db]          one Redis server (or a Cluster node: rueidis finds the rest)
//	redis://host1:port1,host2:port2                 Redis Cluster seeds
//	rediss://...                                    the same over TLS
//	memcached://host1:port1[,host2:port2...]        a memcached pool (ketama consistent hashing)
//	redis+ring://host1:port1,host2:port2[/db][?ring=go-redis&weights=2,1&names=a,b&hashtag={}]
//	                                                standalone Redis servers sharded on the client
//	                                                (store/redisring; rediss+ring:// over TLS)
//	redis+sentinel://[user:password@]sentinel1:26379[,sentinel2:26379...]/master-set[/db][?sentinel_user=u&sentinel_password=p]
//	                                                a primary and its replicas managed by Redis Sentinel
//	                                                (the user info authenticates to the data servers,
//	                                                sentinel_user/sentinel_password to the sentinels;
//	                                                rediss+sentinel:// is TLS to both)
//	mem://                                          an in-process store (tests, demos)
//
// Errors and String never show a password.
package storeurl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/kuracache/kura/internal/redact"
	"github.com/kuracache/kura/ring"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/redisring"
	"github.com/kuracache/kura/store/redisstore"
)

// ErrBadURL is matched by the error for a URL Open cannot use.
var ErrBadURL = errors.New("kura: bad store URL")

// Kind names the backend a URL selects.
type Kind string

// The backends.
const (
	Redis     Kind = "redis"
	Memcached Kind = "memcached"
	Memory    Kind = "mem"
	// RedisRing is standalone Redis servers sharded on the client side
	// (redis+ring://), never a Cluster.
	RedisRing Kind = "redis+ring"
	// RedisSentinel is a primary/replica group managed by Redis Sentinel
	// (redis+sentinel://): the URL's hosts are the sentinels.
	RedisSentinel Kind = "redis+sentinel"
)

// Target is a parsed store URL.
type Target struct {
	Kind Kind
	// Addrs are the host:port addresses (none for Memory).
	Addrs []string
	// User and Password authenticate to Redis (AUTH [user] password).
	User, Password string
	// DB is the Redis database number (the URL path), standalone only.
	DB int
	// TLS is set for rediss://.
	TLS bool
	// Cluster is set when the URL names several Redis addresses.
	Cluster bool
	// URL is the URL as given; it may hold a password: print Redacted.
	URL string
	// Ring, Weights, Names and HashTag are a RedisRing's placement: the
	// ring= (default go-redis), weights=, names= (the node identities)
	// and hashtag= parameters.
	Ring    ring.Mode
	Weights []int
	Names   []string
	HashTag string
	// MasterSet is a RedisSentinel's master set (the URL path's first
	// segment); SentinelUser and SentinelPassword authenticate to the
	// sentinels (sentinel_user= and sentinel_password=), apart from User
	// and Password, which authenticate to the data servers.
	MasterSet                  string
	SentinelUser, SentinelPass string
	// Resolver, if set, looks up the servers' host names instead of
	// net.DefaultResolver (it is not part of the URL: the caller sets
	// it, as tests do to record every lookup).
	Resolver store.Resolver
}

// Redacted returns the URL with its password masked.
func (t Target) Redacted() string { return hide(t.URL) }

// Redact masks the password of a store URL, parsed or not, including the
// redis://password@host shorthand, for a message or a log.
func Redact(raw string) string { return hide(raw) }

// hide masks the password of a store URL, including the redis://password@host
// shorthand that a generic URL redaction reads as a user name: whatever
// precedes the last "@" of the authority is masked unless it is a plain
// user:password pair already masked.
func hide(raw string) string { return redact.URL(raw) }

// shown is what an error shows of a URL that did not parse: the URL
// redacted (hide) when its host list reads as servers, else only its
// scheme and masks. In a URL that lost its "@host" ("redis://PASSWORD",
// "redis://:a/b@c%d", whose host part is the end of a password), the
// host part, path and query may be a secret.
func shown(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || rest == "" {
		return hide(raw)
	}
	userinfo, hosts, hasUser := redact.SplitUserinfo(rest)
	list, _, _ := strings.Cut(hosts, "?")
	list, _, _ = strings.Cut(list, "/")
	safe := strings.Trim(list, ", ") != "" && !lostHost(hosts)
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, err := hostPort(a, "1"); err != nil && !ipv6Attempt(a) {
			safe = false
		}
	}
	if safe {
		return hide(raw)
	}
	if hasUser && userinfo != "" {
		return scheme + "://" + redact.Mask + "@" + redact.Mask
	}
	return scheme + "://" + redact.Mask
}

// ipv6Attempt reports a host that reads as a mistyped IPv6 address
// ("[::1", "[::1]x"): brackets, hex digits, colons and dots only, nothing
// a password would be hidden in beyond what HostList masks.
func ipv6Attempt(a string) bool {
	return strings.HasPrefix(a, "[") && redact.HostList(a) == a && strings.IndexFunc(a, func(r rune) bool {
		return !strings.ContainsRune("[]:.0123456789abcdefABCDEF", r)
	}) < 0
}

// lostHost reports a URL's hosts part (after "://" and any user info)
// that may be a password that lost its "@host", or the end of one that
// holds an unescaped "@": one server written as a bare name that could be
// a password (mayBeSecret).
func lostHost(hosts string) bool {
	list, _, _ := strings.Cut(hosts, "?")
	list, _, _ = strings.Cut(list, "/")
	return !strings.Contains(list, ",") && mayBeSecret(strings.TrimSpace(list))
}

// mayBeSecret reports a server written as a bare name that could be a
// password: no port, not an IP address, not localhost, and no dot or a
// capital letter (host names are written in lower case; a random
// password has capitals and no dot).
func mayBeSecret(a string) bool {
	if a == "" || strings.HasPrefix(a, "[") || strings.Contains(a, ":") {
		return false
	}
	if net.ParseIP(a) != nil || strings.EqualFold(a, "localhost") {
		return false
	}
	return !strings.Contains(a, ".") || strings.ToLower(a) != a
}

// describeChar names a character for an error message without showing
// the secret around it.
func describeChar(r rune) string {
	switch {
	case r == ' ':
		return "a space"
	case r < ' ' || r == 0x7f:
		return "a control character"
	}
	return fmt.Sprintf("%q", string(r))
}

// Parse reads a store URL without connecting. It is the one parser of
// store URLs: kura bench targets (loadgen.ParseTarget) go through it too.
//
//	redis://[user:password@]host[:port][/db]   (redis://password@host is requirepass shorthand)
//	rediss://...                               (TLS)
//	redis://host:port,host:port                (Redis Cluster seeds)
//	redis://host:port?addr=host:port           (the same, rueidis style)
//	memcached://host[:port][,host[:port]...]   (a memcached pool)
//	mem://                                     (in-process)
//
// The default ports are 6379 and 11211. Errors never show a password.
func Parse(raw string) (Target, error) { return parse(raw, true) }

// ParseServer is Parse for tools that read or load a server that already
// exists (every kura command): mem://, an in-process store that starts
// empty, is refused, and the messages list only the server schemes.
func ParseServer(raw string) (Target, error) { return parse(raw, false) }

func parse(raw string, allowMem bool) (Target, error) {
	p := &urlParser{raw: raw}
	t, rest, defPort, err := p.scheme(allowMem)
	if err != nil || t.Kind == Memory {
		return t, err
	}
	if rest, err = p.userinfo(&t, rest); err != nil {
		return Target{}, err
	}
	hosts, query, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(hosts, "/")
	if err := p.hosts(hosts, defPort); err != nil {
		return Target{}, err
	}
	// The servers read as servers: from here on, a message may quote
	// the path and the query unless redaction would change the URL.
	p.hideTail = shown(raw) != hide(raw)
	if err := p.path(&t, path); err != nil {
		return Target{}, err
	}
	seeds, err := p.query(&t, query)
	if err != nil {
		return Target{}, err
	}
	if err := p.servers(&t, append(strings.Split(hosts, ","), seeds...), defPort); err != nil {
		return Target{}, err
	}
	if err := p.topology(&t); err != nil {
		return Target{}, err
	}
	return t, nil
}

// urlParser reads one store URL, part by part (scheme, user info, hosts,
// path, query, then the topology they name), in that order: each part's
// errors come before the next part's.
type urlParser struct {
	raw string
	// hideTail: the URL's servers did not read as servers, so its path
	// and query may be the rest of a password; messages do not quote them.
	hideTail bool
}

// bad returns ErrBadURL, wrapped with the URL as shown (never a
// password) and what is wrong with it.
func (p *urlParser) bad(format string, a ...any) error {
	if p.hideTail {
		return fmt.Errorf("%w %q: no server before the path or query (they are not shown: in a URL that lost its @host, they are the end of the password); write redis://[user:password@]host:port", ErrBadURL, shown(p.raw))
	}
	return fmt.Errorf("%w %q: %s", ErrBadURL, shown(p.raw), fmt.Sprintf(format, a...))
}

// scheme reads the scheme: the Target's kind and TLS, the default port,
// and the rest of the URL. mem:// is whole by itself (Kind Memory).
func (p *urlParser) scheme(allowMem bool) (t Target, rest, defPort string, err error) {
	schemes := "redis://, rediss://, redis+ring://, redis+sentinel:// or memcached://"
	if allowMem {
		schemes = "redis://, rediss://, redis+ring://, redis+sentinel://, memcached:// or mem://"
	}
	scheme, rest, ok := strings.Cut(p.raw, "://")
	if !ok {
		if looksLikeAddr(p.raw) {
			return Target{}, "", "", p.bad("write the address as a URL: redis://%s or memcached://%s", p.raw, p.raw)
		}
		return Target{}, "", "", p.bad("want %s", schemes)
	}
	t = Target{URL: p.raw}
	defPort = "6379"
	switch strings.ToLower(scheme) {
	case "redis":
		t.Kind = Redis
	case "rediss":
		t.Kind, t.TLS = Redis, true
	case "redis+ring":
		t.Kind = RedisRing
	case "rediss+ring":
		t.Kind, t.TLS = RedisRing, true
	case "redis+sentinel":
		t.Kind, defPort = RedisSentinel, "26379"
	case "rediss+sentinel":
		t.Kind, t.TLS, defPort = RedisSentinel, true, "26379"
	case "memcached", "memcache":
		t.Kind, defPort = Memcached, "11211"
	case "mem", "memory":
		if !allowMem {
			return Target{}, "", "", p.bad("mem:// is an in-process store that starts empty, so there is nothing here to read or load; want %s", schemes)
		}
		if rest != "" {
			return Target{}, "", "", p.bad("mem:// takes nothing after the scheme")
		}
		t.Kind = Memory
		return t, "", "", nil
	default:
		return Target{}, "", "", p.bad("unknown scheme %q; want %s", scheme, schemes)
	}
	return t, rest, defPort, nil
}

// userinfo reads the user and password, if rest has any, into t, and
// returns what follows them.
func (p *urlParser) userinfo(t *Target, rest string) (string, error) {
	// Split the host list off by hand: url.Parse rejects "h1:1,h2:2".
	// The user info ends at the last "@" (redact.SplitUserinfo, the rule
	// redaction uses too): a password may hold "/", "#", "?" or spaces.
	userinfo, hosts, ok := redact.SplitUserinfo(rest)
	if !ok {
		return rest, nil
	}
	if t.Kind == Memcached {
		return "", p.bad("memcached has no passwords in the protocols kura speaks; drop user:password@")
	}
	// Characters a URL cannot hold as is: accepted here they would
	// mean one thing to kura and another to redis-cli and every other
	// client, and a mistyped URL would echo them in errors.
	if i := strings.IndexFunc(userinfo, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune("/?#@[]", r) }); i >= 0 {
		what := "password"
		if c := strings.IndexByte(userinfo, ':'); c > i {
			what = "user"
		}
		return "", p.bad("the %s holds %s, which a URL cannot hold as is; URL-escape it: / as %%2F, # as %%23, ? as %%3F, @ as %%40, : as %%3A, space as %%20, %% as %%25 (in a shell: python3 -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1], safe=\"\"))' 'PASSWORD')",
			what, describeChar(rune(userinfo[i])))
	}
	u, pw, hasPass := strings.Cut(userinfo, ":")
	var err error
	if t.User, err = url.PathUnescape(u); err != nil {
		return "", p.bad("the user is not URL-escaped correctly: write %% as %%25 (a %% must start %%XX, two hex digits)")
	}
	if hasPass {
		if t.Password, err = url.PathUnescape(pw); err != nil {
			return "", p.bad("the password is not URL-escaped correctly: write %% as %%25 (a %% must start %%XX, two hex digits)")
		}
	} else {
		// redis://password@host is a common shorthand for requirepass.
		t.Password, t.User = t.User, ""
	}
	return hosts, nil
}

// hosts checks the comma-separated servers before the path and the query
// are read.
func (p *urlParser) hosts(hosts, defPort string) error {
	// A URL that lost its host: the rest of its password may stand in
	// the path or the query, which the later messages quote, so the
	// host's own error comes first.
	for _, a := range strings.Split(hosts, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, err := hostPort(a, defPort); err != nil {
			return p.bad("%v", err)
		}
	}
	if lostHost(hosts) {
		// redis://PASSWORD (the shorthand without "@host"), or the end
		// of a password holding an unescaped "@", would be sent to the
		// name servers, off the machine: a name that could be one is
		// refused before anything looks it up.
		s, _, _ := strings.Cut(p.raw, "://")
		s = strings.ToLower(s)
		return p.bad("a lone server named without a port and without a dot may be (part of) a password that lost its @host, so it is not looked up: write the server with its port (%s://NAME:%s), or the password URL-escaped as %s://:PASSWORD@host:port (@ as %%40)", s, defPort, s)
	}
	return nil
}

// path reads the path: a sentinel URL's master set, then the database.
func (p *urlParser) path(t *Target, path string) error {
	if t.Kind == RedisSentinel {
		name, db, _ := strings.Cut(path, "/")
		if name == "" {
			return p.bad("name the master set the sentinels monitor: redis+sentinel://host:26379/mymaster")
		}
		t.MasterSet, path = name, db
	}
	if path == "" {
		return nil
	}
	if t.Kind == Memcached {
		return p.bad("memcached has no databases; drop the /%s after the servers", path)
	}
	db, err := strconv.Atoi(path)
	if err != nil || !allDigits(path) || db > math.MaxInt32 {
		return p.bad("the path must be a database number such as /0")
	}
	t.DB = db
	return nil
}

// query reads the query's parameters into t (a ring's placement, a
// sentinel's credentials) and returns the addr= seeds it names.
func (p *urlParser) query(t *Target, query string) ([]string, error) {
	if query == "" {
		return nil, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		var esc url.EscapeError
		if errors.As(err, &esc) {
			// Its text is the three bytes at the bad "%", which may be
			// part of sentinel_password=.
			return nil, p.bad("bad query: a %% must start %%XX, two hex digits; write %% as %%25")
		}
		return nil, p.bad("bad query: %v", err)
	}
	for k := range q {
		if t.Kind == RedisRing {
			if err := t.ringParam(k, q[k]); err != nil {
				return nil, p.bad("%v", err)
			}
			continue
		}
		if t.Kind == RedisSentinel {
			if len(q[k]) != 1 {
				return nil, p.bad("parameter %q given %d times", k, len(q[k]))
			}
			switch k {
			case "sentinel_user":
				t.SentinelUser = q[k][0]
				continue
			case "sentinel_password":
				t.SentinelPass = q[k][0]
				continue
			}
			return nil, p.bad("unknown parameter %q; redis+sentinel:// takes sentinel_user= and sentinel_password=", k)
		}
		if k != "addr" {
			// Every command and the library read a URL the same way,
			// so an option one of them would ignore is refused.
			return nil, p.bad("unknown parameter %q; the only one is addr=host:port (another Cluster seed)", k)
		}
	}
	return q["addr"], nil
}

// servers sets t's addresses: each of addrs with its default port.
func (p *urlParser) servers(t *Target, addrs []string, defPort string) error {
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		addr, err := hostPort(a, defPort)
		if err != nil {
			return p.bad("%v", err)
		}
		t.Addrs = append(t.Addrs, addr)
	}
	if len(t.Addrs) == 0 {
		return p.bad("no host")
	}
	return nil
}

// topology checks what the servers make together: a Cluster (several
// Redis seeds, database 0 only) or a ring whose placement builds.
func (p *urlParser) topology(t *Target) error {
	if t.Kind == RedisSentinel {
		return nil
	}
	if t.Kind == Redis && len(t.Addrs) > 1 {
		t.Cluster = true
	}
	if t.Kind == RedisRing {
		if t.Weights != nil && len(t.Weights) != len(t.Addrs) {
			return p.bad("weights= lists %d weights for %d servers", len(t.Weights), len(t.Addrs))
		}
		if t.Names != nil && len(t.Names) != len(t.Addrs) {
			return p.bad("names= lists %d names for %d servers", len(t.Names), len(t.Addrs))
		}
		if _, err := redisring.NewRing(t.RedisRingOptions()); err != nil {
			return p.bad("%v", err)
		}
	}
	if t.Cluster && t.DB != 0 {
		return p.bad("Redis Cluster has only database 0")
	}
	return nil
}

// RedisOptions returns the redisstore options a Redis Target names: its
// seeds, credentials, database and TLS. Open hands them to redisstore.New,
// so the URL is parsed once and means the same in every kura command and
// in the library (redis://secret@host is the password "secret").
func (t Target) RedisOptions() redisstore.Options {
	o := redisstore.Options{
		Addrs:    append([]string(nil), t.Addrs...),
		Username: t.User,
		Password: t.Password,
		DB:       t.DB,
		Resolver: t.Resolver,
	}
	if t.TLS && len(t.Addrs) > 0 {
		host, _, _ := net.SplitHostPort(t.Addrs[0])
		o.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if t.Kind == RedisSentinel {
		o.Sentinel = redisstore.Sentinel{MasterSet: t.MasterSet, Username: t.SentinelUser, Password: t.SentinelPass}
		if t.TLS {
			// The primary is whichever server the sentinels name: the
			// certificate is checked against the address dialled.
			o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
			o.Sentinel.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	return o
}

// ringParam reads one query parameter of a redis+ring:// URL.
func (t *Target) ringParam(k string, v []string) error {
	if len(v) != 1 {
		return fmt.Errorf("parameter %q given %d times", k, len(v))
	}
	switch k {
	case "ring":
		t.Ring = ring.Mode(v[0])
	case "weights":
		for _, w := range strings.Split(v[0], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(w))
			if err != nil || n <= 0 || n > 1<<20 {
				return fmt.Errorf("weights=%s: each weight is a positive whole number", v[0])
			}
			t.Weights = append(t.Weights, n)
		}
	case "names":
		t.Names = strings.Split(v[0], ",")
	case "hashtag":
		t.HashTag = v[0]
	default:
		return fmt.Errorf("unknown parameter %q; redis+ring:// takes ring=, weights=, names= and hashtag=", k)
	}
	return nil
}

// Placement returns the ring that places the keys of a RedisRing Target
// (the one redisring.New builds from it), without connecting: for tools
// that send keys to the shards themselves, such as kura bench.
func (t Target) Placement() (ring.Ring, error) {
	if t.Kind != RedisRing {
		return nil, fmt.Errorf("storeurl: %s is not a redis+ring:// target", t.Redacted())
	}
	return redisring.NewRing(t.RedisRingOptions())
}

// RedisRingOptions returns the redisring options a RedisRing Target names.
func (t Target) RedisRingOptions() redisring.Options {
	o := redisring.Options{
		Servers: append([]string(nil), t.Addrs...),
		Weights: t.Weights,
		Ring:    t.Ring,
		IDs:     t.Names,
		HashTag: t.HashTag,
		Redis:   t.RedisOptions(),
	}
	o.Redis.Addrs = nil
	return o
}

// MemcacheOptions returns the memcache options a memcached Target names.
func (t Target) MemcacheOptions() memcache.Options {
	return memcache.Options{Servers: append([]string(nil), t.Addrs...), Resolver: t.Resolver}
}

// Open parses raw and connects to the store it names. The caller closes
// it. Errors say what to fix (see Explain) and never show a password.
func Open(ctx context.Context, raw string) (store.Store, error) {
	t, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return OpenTarget(ctx, t)
}

// OpenTarget connects to the store a parsed URL names.
func OpenTarget(ctx context.Context, t Target) (store.Store, error) {
	var (
		s   store.Store
		err error
	)
	switch t.Kind {
	case Memory:
		return memstore.New(memstore.Options{})
	case Memcached:
		s, err = memcache.New(ctx, t.MemcacheOptions())
	case Redis, RedisSentinel:
		s, err = redisstore.New(ctx, t.RedisOptions())
	case RedisRing:
		s, err = redisring.New(ctx, t.RedisRingOptions())
	default:
		return nil, fmt.Errorf("%w: Target.Kind %q", ErrBadURL, t.Kind)
	}
	if err != nil {
		return nil, Explain(t, err)
	}
	return s, nil
}

func looksLikeAddr(s string) bool {
	host, port, ok := strings.Cut(s, ":")
	if !ok || host == "" || port == "" || strings.Contains(s, "/") {
		return false
	}
	_, err := strconv.Atoi(port)
	return err == nil
}

// hostPort reads one server of a URL's host list: host:port, a host alone
// (the scheme's default port), or an IPv6 address in brackets, [::1] or
// [::1]:6379. It returns the address as a dialer takes it, and refuses
// what a client would read differently from the person who wrote it: an
// unclosed or stray bracket, an IPv6 address without brackets (is
// ::1:6380 a port or part of the address?), a port that is not plain
// digits from 1 to 65535, a host with characters no host name has.
func hostPort(a, defPort string) (string, error) {
	// What the messages show of a: a URL that lost its host
	// ("redis://user:password") has its password where the port goes.
	shown := redact.HostList(a)
	host, port := a, defPort
	switch {
	case strings.HasPrefix(a, "["):
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", fmt.Errorf("%q opens a bracket it does not close; write an IPv6 address as [::1] or [::1]:6379", shown)
		}
		host = a[1:end]
		switch after := a[end+1:]; {
		case after == "":
		case strings.HasPrefix(after, ":"):
			port = after[1:]
		default:
			return "", fmt.Errorf("%q has %q after the bracket; write an IPv6 address as [::1] or [::1]:6379", shown, redact.HostList(after))
		}
		ip, zone, _ := strings.Cut(host, "%")
		if parsed := net.ParseIP(ip); parsed == nil || parsed.To4() != nil && !strings.Contains(ip, ":") ||
			strings.ContainsFunc(zone, func(r rune) bool { return !hostChar(r) }) {
			return "", fmt.Errorf("%q: only an IPv6 address goes in brackets, such as [::1]:6379", shown)
		}
	case strings.ContainsAny(a, "[]"):
		return "", fmt.Errorf("%q has a bracket outside an IPv6 address; write one as [::1]:6379", shown)
	case strings.Count(a, ":") > 1:
		return "", fmt.Errorf("%q: write an IPv6 address in brackets, [::1] or [::1]:6379, so that its port is not read as part of it", shown)
	default:
		if h, p, ok := strings.Cut(a, ":"); ok {
			host, port = h, p
		}
		if host == "" {
			return "", fmt.Errorf("%q has no host before the port; such as 127.0.0.1:6379", shown)
		}
		if i := strings.IndexFunc(host, func(r rune) bool { return !hostChar(r) }); i >= 0 {
			// Not quoted: a host with a character no host has may be
			// the end of a password (redis://PASSWORD, redis://:a@b%c).
			return "", fmt.Errorf("the host holds %s, which no host name holds", describeChar([]rune(host[i:])[0]))
		}
	}
	if p, err := strconv.Atoi(port); err != nil || !allDigits(port) || p < 1 || p > 65535 {
		if shown != a {
			return "", fmt.Errorf("%q is not host:port: the port must be a number from 1 to 65535 (what follows the colon is not shown: in a URL that lost its host, that is the password)", shown)
		}
		return "", fmt.Errorf("%q is not host:port: the port must be a number from 1 to 65535", shown)
	}
	return net.JoinHostPort(host, port), nil
}

// hostChar reports whether r may appear in a host name as written in a
// URL: letters, digits, "-", "." and "_" (container and service names).
func hostChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '.' || r == '_'
}

func allDigits(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}
