package storeurl_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
	"github.com/kuracache/kura/store/storeurl"
)

func TestParse(t *testing.T) {
	ring, err := storeurl.Parse("redis+ring://h1:1,h2:2")
	if err != nil || ring.Kind != storeurl.RedisRing || ring.Cluster {
		t.Errorf("redis+ring:// parsed as %+v, %v: want a ring, never a Cluster", ring, err)
	}
	if r, err := ring.Placement(); err != nil || len(r.Nodes()) != 2 || r.Nodes()[1].ID != "h2:2" {
		t.Errorf("Placement of %s = %v, %v: want go-redis's ring over h1:1, h2:2", ring.Redacted(), r, err)
	}
	cl, _ := storeurl.Parse("redis://h1:1,h2:2")
	if _, err := cl.Placement(); err == nil {
		t.Error("a Cluster URL has a ring placement")
	}
	for in, want := range map[string][]string{
		"redis://127.0.0.1:6379":                                   {"127.0.0.1:6379"},
		"redis://:pw@h1:1,h2:2/0":                                  {"h1:1", "h2:2"},
		"rediss://u:pw@h1.internal":                                {"h1.internal:6379"},
		"memcached://a:11211,b:11212, c":                           {"a:11211", "b:11212", "c:11211"},
		"memcached://[::1]:11211":                                  {"[::1]:11211"},
		"redis+ring://h1:1,h2:2,h3":                                {"h1:1", "h2:2", "h3:6379"},
		"rediss+ring://:pw@h1:1,h2:2/3?ring=redis-rb":              {"h1:1", "h2:2"},
		"redis+ring://h1:1,h2:2?ring=ketama&weights=2,1&names=a,b": {"h1:1", "h2:2"},
	} {
		got, err := storeurl.Parse(in)
		if err != nil || !slices.Equal(got.Addrs, want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got.Addrs, err, want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:6379", "http://x", "redis://", "redis://:s3cret@", "memcached://u:s3cret@h",
		"redis+ring://:s3cret@h1,h2?ring=modulo", "redis+ring://h1,h2?weights=1", "redis+ring://h1,h2?weights=2,1",
		"redis+ring://h1,h2?ring=ketama&weights=0,1", "redis+ring://h1,h2?names=a", "redis+ring://h1,h1", "redis+ring://h1,h2?addr=h3",
		"redis+ring://h1,h2?ring=twemproxy&hashtag={"} {
		_, err := storeurl.Parse(bad)
		if !errors.Is(err, storeurl.ErrBadURL) {
			t.Errorf("Parse(%q) = %v, want ErrBadURL", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q): error shows the password: %v", bad, err)
		}
	}
}

// TestOpen opens every kind of store from its URL on real servers, the
// Cluster from a comma-separated seed list.
func TestOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	cl := servertest.RedisCluster(t)
	mc := servertest.MemcachedPool(t, 2, servers.MemcachedConfig{})
	urls := []string{
		r.URL(),
		"redis://" + cl.Nodes[0].Addr + "," + cl.Nodes[1].Addr + "," + cl.Nodes[2].Addr,
		"memcached://" + mc[0].Addr + "," + mc[1].Addr,
		"mem://",
		"redis+ring://" + r.Addr + "," + servertest.Redis(t, servers.RedisConfig{}).Addr + "?ring=redis-rb",
	}
	ctx := context.Background()
	for _, u := range urls {
		s, err := storeurl.Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		for _, k := range []string{"a", "b", "{x}c", "user:1"} {
			if err := s.Set(ctx, k, []byte("v-"+k), time.Minute); err != nil {
				t.Fatalf("%s: Set %q: %v", u, k, err)
			}
			if v, err := s.Get(ctx, k); err != nil || string(v) != "v-"+k {
				t.Fatalf("%s: Get %q = %q, %v", u, k, v, err)
			}
		}
		s.Close()
	}
	// An unreachable server: Open does not wait for it (a service starts
	// while its cache is down); requests get a clear error, no password.
	s, err := storeurl.Open(ctx, "redis://:s3cret@127.0.0.1:1")
	if err != nil {
		t.Fatalf("Open of a closed port = %v, want a store that connects later", err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, "k"); !errors.Is(err, store.ErrNotConnected) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Get on a closed port = %v, want ErrNotConnected without the password", err)
	}
}

// FuzzParse: any string is a Target with valid addresses or an ErrBadURL
// that never shows the password.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"redis://u:s3cret@h:1/2", "rediss://:s3cret@h1,h2", "memcached://a,b:5", "mem://", "redis://h:1?addr=h2:2",
		"redis://s3cret@", "redis://u:s3cret%zz@h", "memcached://u:s3cret@h", "redis://[::1]:6379/0", "redis://] 0",
		"redis+ring://:s3cret@h1,h2?ring=ketama&weights=2,1", "redis+ring://h1,h2?names=a,b&hashtag={}&ring=twemproxy",
		"mem://x", "redis://s3cret@h?dial_timeout=1s", "127.0.0.1:6379", "redis://s3cret@h:1?addr=h2:2&addr=h3",
		"redis://u:s3cret", "redis://:s3cret/0", "redis://h:1,:s3cret?addr=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := storeurl.Parse(s)
		if err != nil {
			if !errors.Is(err, storeurl.ErrBadURL) {
				t.Fatalf("Parse(%q): %v is not ErrBadURL", s, err)
			}
			// A secret in the user info (before the last "@" after "://")
			// never shows: the part after ":", or all of it without one
			// (redis://password@host). A user name may show.
			_, rest, ok := strings.Cut(s, "://")
			if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
				pw := rest[:at]
				if _, p, hasPass := strings.Cut(pw, ":"); hasPass {
					pw = p
				}
				if strings.Contains(pw, "s3cret") && !strings.Contains(rest[at:], "s3cret") && strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("Parse(%q): error shows the password: %v", s, err)
				}
			}
			// Without "@", a URL that lost its host ("redis://u:s3cret")
			// holds its password where a host's port goes: never shown.
			if ok && !strings.Contains(rest, "@") {
				auth := rest
				if end := strings.IndexAny(rest, "/?#"); end >= 0 {
					auth = rest[:end]
				}
				n := 0
				for _, h := range strings.Split(auth, ",") {
					if b := strings.IndexByte(h, ']'); strings.HasPrefix(h, "[") && b >= 0 {
						h = h[b+1:] // [IPv6]:port
					}
					if _, p, ok := strings.Cut(h, ":"); ok {
						n += strings.Count(p, "s3cret")
					}
				}
				if n > 0 && n == strings.Count(s, "s3cret") && strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("Parse(%q): error shows what stands where the port goes: %v", s, err)
				}
			}
			return
		}
		if tg.Kind != storeurl.Memory && len(tg.Addrs) == 0 {
			t.Fatalf("Parse(%q) = %+v", s, tg)
		}
		// Every address is one a dialer reads as the URL's writer meant
		// it, and reads back unchanged: an accepted URL never dials a
		// server its text does not name.
		for _, a := range tg.Addrs {
			host, port, err := net.SplitHostPort(a)
			p, perr := strconv.Atoi(port)
			if err != nil || perr != nil || p < 1 || p > 65535 || host == "" || strings.ContainsAny(port, "+- ") {
				t.Fatalf("Parse(%q): address %q is not host:port", s, a)
			}
			if strings.Contains(host, ":") != strings.HasPrefix(a, "[") {
				t.Fatalf("Parse(%q): address %q: brackets and IPv6 disagree", s, a)
			}
			if !strings.Contains(s, host) {
				t.Fatalf("Parse(%q): host %q is not in the URL", s, host)
			}
		}
		if tg.Kind == storeurl.Redis && !strings.ContainsAny(s, "?@") {
			scheme, _, _ := strings.Cut(s, "://")
			again, err := storeurl.Parse(scheme + "://" + strings.Join(tg.Addrs, ","))
			if err != nil || !slices.Equal(again.Addrs, tg.Addrs) {
				t.Fatalf("Parse(%q) = %v, but its addresses read back as %v, %v", s, tg.Addrs, again.Addrs, err)
			}
		}
	})
}

// TestPasswordShorthand: redis://secret@host is the password "secret" in
// storeurl.Open, in redisstore.NewFromURL and in every kura command (they
// all go through Open), and a refused password is one clear error that
// never shows it.
func TestPasswordShorthand(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{Password: "s3cret"})
	ctx := context.Background()
	s, err := storeurl.Open(ctx, "redis://s3cret@"+r.Addr)
	if err != nil {
		t.Fatalf("Open with the shorthand: %v", err)
	}
	s.Close()
	rs, err := redisstore.NewFromURL(ctx, "redis://s3cret@"+r.Addr, redisstore.Options{})
	if err != nil {
		t.Fatalf("NewFromURL with the shorthand: %v", err)
	}
	rs.Close()
	_, err = storeurl.Open(ctx, "redis://wr0ng@"+r.Addr)
	if !errors.Is(err, redisstore.ErrAuth) || !strings.Contains(err.Error(), "refused the credentials") || strings.Contains(err.Error(), "wr0ng") {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestParseServer(t *testing.T) {
	for _, bad := range []string{"mem://", "memory://", "ftp://h"} {
		_, err := storeurl.ParseServer(bad)
		if !errors.Is(err, storeurl.ErrBadURL) || strings.Contains(err.Error(), "or mem://") {
			t.Errorf("ParseServer(%q) = %v", bad, err)
		}
	}
	for _, bad := range []string{"mem://x", "redis://h:1?dial_timeout=1s", "127.0.0.1:6379"} {
		if _, err := storeurl.Parse(bad); !errors.Is(err, storeurl.ErrBadURL) {
			t.Errorf("Parse(%q) = %v, want ErrBadURL", bad, err)
		}
	}
	if _, err := storeurl.Parse("127.0.0.1:6379"); err == nil || !strings.Contains(err.Error(), "redis://127.0.0.1:6379") {
		t.Errorf("a bare address: %v", err)
	}
	tg, err := storeurl.Parse("rediss://u:p@h:7000/3")
	o := tg.RedisOptions()
	if err != nil || o.Username != "u" || o.Password != "p" || o.DB != 3 || o.TLS == nil || o.TLS.ServerName != "h" {
		t.Errorf("RedisOptions = %+v, %v", o, err)
	}
}

func TestParseSentinel(t *testing.T) {
	tg, err := storeurl.Parse("rediss+sentinel://app:data%2Fpw@s1,s2:26380/mymaster/2?sentinel_user=watch&sentinel_password=sent%20pw")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Kind != storeurl.RedisSentinel || !tg.TLS || tg.MasterSet != "mymaster" || tg.DB != 2 ||
		tg.User != "app" || tg.Password != "data/pw" || tg.SentinelUser != "watch" || tg.SentinelPass != "sent pw" ||
		len(tg.Addrs) != 2 || tg.Addrs[0] != "s1:26379" || tg.Addrs[1] != "s2:26380" || tg.Cluster {
		t.Fatalf("Parse = %+v", tg)
	}
	o := tg.RedisOptions()
	if o.Sentinel.MasterSet != "mymaster" || o.Sentinel.Password != "sent pw" || o.Password != "data/pw" || o.TLS == nil || o.Sentinel.TLS == nil {
		t.Fatalf("RedisOptions = %+v", o)
	}
	if r := tg.Redacted(); strings.Contains(r, "pw") {
		t.Fatalf("Redacted = %q shows a password", r)
	}
	for _, bad := range []string{
		"redis+sentinel://s1:26379",                                     // no master set
		"redis+sentinel://s1:26379/m?addr=x:1",                          // not a sentinel parameter
		"redis+sentinel://s1:26379/m/x",                                 // bad db
		"redis+sentinel://s1/m?sentinel_password=a&sentinel_password=b", // twice
	} {
		sep := "?"
		if strings.Contains(bad, "?") {
			sep = "&"
		}
		_, err := storeurl.Parse(bad + sep + "sentinel_password=hunter2")
		if err == nil {
			t.Errorf("storeurl.Parse(%q) accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("storeurl.Parse(%q) error shows the sentinel password: %v", bad, err)
		}
	}
}
