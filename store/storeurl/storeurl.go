// Package storeurl opens a kura store from a URL, the one way the library
// and every kura command name a cache:
//
//	redis://[user:password@]host:port[/db]          one Redis server (or a Cluster node: rueidis finds the rest)
//	redis://host1:port1,host2:port2                 Redis Cluster seeds
//	rediss://...                                    the same over TLS
//	memcached://host1:port1[,host2:port2...]        a memcached pool (ketama consistent hashing)
//	mem://                                          an in-process store (tests, demos)
//
// Errors and String never show a password.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/kuracache/kura/internal/redact"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memstore"
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
}

// Redacted returns the URL with its password masked.
func (t Target) Redacted() string { return hide(t.URL) }

// hide masks the password of a store URL, including the redis://password@host
// shorthand that a generic URL redaction reads as a user name: whatever
// precedes the last "@" of the authority is masked unless it is a plain
// user:password pair already masked.
func hide(raw string) string {
	shown := redact.URL(raw)
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return shown
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return shown
	}
	if strings.Contains(rest[:at], ":") && strings.Contains(shown, redact.Mask) && !strings.Contains(shown, rest[:at]) {
		return shown // user:xxxxx@host
	}
	return scheme + "://" + redact.Mask + rest[at:]
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
func Parse(raw string) (Target, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s", ErrBadURL, hide(raw), fmt.Sprintf(format, a...))
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return Target{}, bad("want redis://, rediss://, memcached:// or mem://")
	}
	t := Target{URL: raw}
	defPort := "6379"
	switch strings.ToLower(scheme) {
	case "redis":
		t.Kind = Redis
	case "rediss":
		t.Kind, t.TLS = Redis, true
	case "memcached", "memcache":
		t.Kind, defPort = Memcached, "11211"
	case "mem", "memory":
		t.Kind = Memory
		return t, nil
	default:
		return Target{}, bad("unknown scheme %q; want redis://, rediss://, memcached:// or mem://", scheme)
	}
	// Split the host list off by hand: url.Parse rejects "h1:1,h2:2".
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if t.Kind == Memcached {
			return Target{}, bad("memcached has no passwords in the protocols kura speaks; drop user:password@")
		}
		userinfo := rest[:at]
		rest = rest[at+1:]
		u, pw, hasPass := strings.Cut(userinfo, ":")
		var err error
		if t.User, err = url.PathUnescape(u); err != nil {
			return Target{}, bad("the user is not URL-escaped correctly")
		}
		if hasPass {
			if t.Password, err = url.PathUnescape(pw); err != nil {
				return Target{}, bad("the password is not URL-escaped correctly")
			}
		} else {
			// redis://password@host is a common shorthand for requirepass.
			t.Password, t.User = t.User, ""
		}
	}
	hosts, query, _ := strings.Cut(rest, "?")
	hosts, path, _ := strings.Cut(hosts, "/")
	if path != "" {
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return Target{}, bad("the path must be a database number such as /0")
		}
		t.DB = db
	}
	addrs := strings.Split(hosts, ",")
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return Target{}, bad("bad query: %v", err)
		}
		addrs = append(addrs, q["addr"]...)
	}
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			a = net.JoinHostPort(strings.Trim(a, "[]"), defPort)
		}
		host, port, err := net.SplitHostPort(a)
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || p <= 0 || p > 65535 || host == "" ||
			strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return Target{}, bad("%q is not host:port", a)
		}
		t.Addrs = append(t.Addrs, a)
	}
	if len(t.Addrs) == 0 {
		return Target{}, bad("no host")
	}
	if t.Kind == Redis && len(t.Addrs) > 1 {
		t.Cluster = true
	}
	if t.Cluster && t.DB != 0 {
		return Target{}, bad("Redis Cluster has only database 0")
	}
	return t, nil
}

// Open parses raw and connects to the store it names. The caller closes
// it.
func Open(ctx context.Context, raw string) (store.Store, error) {
	t, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case Memory:
		return memstore.New(memstore.Options{})
	case Memcached:
		s, err := memcache.New(ctx, memcache.Options{Servers: t.Addrs})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", t.Redacted(), err)
		}
		return s, nil
	default:
		s, err := redisstore.NewFromURL(ctx, raw, redisstore.Options{})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", t.Redacted(), err)
		}
		return s, nil
	}
}
