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
	// URL is the URL as given; it may hold a password: print Redacted.
	URL string
}

// Redacted returns the URL with its password masked.
func (t Target) Redacted() string { return redact.URL(t.URL) }

// Parse reads a store URL without connecting.
func Parse(raw string) (Target, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return Target{}, fmt.Errorf("%w %q: want redis://, rediss://, memcached:// or mem://", ErrBadURL, redact.URL(raw))
	}
	t := Target{URL: raw}
	switch strings.ToLower(scheme) {
	case "redis", "rediss":
		t.Kind = Redis
	case "memcached", "memcache":
		t.Kind = Memcached
	case "mem", "memory":
		t.Kind = Memory
		return t, nil
	default:
		return Target{}, fmt.Errorf("%w %q: unknown scheme %q; want redis://, rediss://, memcached:// or mem://", ErrBadURL, redact.URL(raw), scheme)
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	hosts := rest[:end]
	if i := strings.LastIndexByte(hosts, '@'); i >= 0 {
		if t.Kind == Memcached {
			return Target{}, fmt.Errorf("%w %q: memcached has no passwords in this client (use SASL-free servers on a private network)", ErrBadURL, redact.URL(raw))
		}
		hosts = hosts[i+1:]
	}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(h); err != nil || port == "" {
			def := map[Kind]string{Redis: "6379", Memcached: "11211"}[t.Kind]
			if _, _, err2 := net.SplitHostPort(h + ":" + def); err2 != nil {
				return Target{}, fmt.Errorf("%w %q: address %q: %v", ErrBadURL, redact.URL(raw), h, err)
			}
			h += ":" + def
		}
		t.Addrs = append(t.Addrs, h)
	}
	if len(t.Addrs) == 0 {
		return Target{}, fmt.Errorf("%w %q: no host", ErrBadURL, redact.URL(raw))
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
