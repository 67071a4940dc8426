package loadgen

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Kind is the server family a Target names.
type Kind string

// Server families.
const (
	KindRedis     Kind = "redis"
	KindMemcached Kind = "memcached"
)

// Target is a parsed Config.Target.
type Target struct {
	Kind Kind
	// Addrs are host:port seed addresses (one for a standalone server).
	Addrs []string
	// User and Password authenticate to Redis (AUTH [user] password).
	User, Password string
	// DB is the Redis database number (SELECT), standalone only.
	DB int
	// TLS is set for rediss://.
	TLS bool
	// Cluster is set when the URL names several Redis addresses; Run also
	// sets it when the server reports cluster_enabled:1.
	Cluster bool
}

// String returns the target without its password.
func (t Target) String() string {
	scheme := string(t.Kind)
	if t.TLS {
		scheme = "rediss"
	}
	s := scheme + "://"
	if t.User != "" {
		s += t.User + "@"
	}
	s += strings.Join(t.Addrs, ",")
	if t.DB != 0 {
		s += "/" + strconv.Itoa(t.DB)
	}
	return s
}

// ParseTarget reads a target URL:
//
//	redis://[user:password@]host[:port][/db]
//	rediss://...                          (TLS)
//	redis://host:port,host:port           (Redis Cluster seeds)
//	redis://host:port?addr=host:port      (the same, rueidis style)
//	memcached://host:port[,host:port...]  (a memcached pool)
//	host:port                             (redis://host:port)
//
// The default ports are 6379 and 11211; an empty target is
// redis://127.0.0.1:6379.
func ParseTarget(s string) (Target, error) {
	var t Target
	if s == "" {
		s = "redis://127.0.0.1:6379"
	}
	if !strings.Contains(s, "://") {
		s = "redis://" + s
	}
	scheme, rest, _ := strings.Cut(s, "://")
	defPort := "6379"
	switch strings.ToLower(scheme) {
	case "redis":
		t.Kind = KindRedis
	case "rediss":
		t.Kind, t.TLS = KindRedis, true
	case "memcached", "memcache":
		t.Kind, defPort = KindMemcached, "11211"
	default:
		return t, cfgErr("target %q: the scheme must be redis://, rediss:// or memcached://", s)
	}
	// Split the host list off by hand: url.Parse rejects "h1:1,h2:2".
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		ui := rest[:at]
		rest = rest[at+1:]
		u, p, hasPass := strings.Cut(ui, ":")
		var err error
		if t.User, err = url.PathUnescape(u); err != nil {
			return t, cfgErr("target user in %q is not URL-escaped correctly: %v", s, err)
		}
		if hasPass {
			if t.Password, err = url.PathUnescape(p); err != nil {
				return t, cfgErr("target password is not URL-escaped correctly: %v", err)
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
			return t, cfgErr("target %q: the path must be a database number such as /0", s)
		}
		t.DB = db
	}
	addrs := strings.Split(hosts, ",")
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return t, cfgErr("target %q: bad query: %v", s, err)
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
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || p <= 0 || p > 65535 || host == "" {
			return t, cfgErr("target %q: %q is not host:port", s, a)
		}
		t.Addrs = append(t.Addrs, a)
	}
	if len(t.Addrs) == 0 {
		return t, cfgErr("target %q names no host", s)
	}
	if t.Kind == KindRedis && len(t.Addrs) > 1 {
		t.Cluster = true
	}
	if t.Kind == KindMemcached && (t.User != "" || t.Password != "") {
		return t, cfgErr("target %q: memcached has no password in the protocols kura speaks; drop user:password@", s)
	}
	if t.Cluster && t.DB != 0 {
		return t, cfgErr("target %q: Redis Cluster has only database 0", s)
	}
	return t, nil
}
