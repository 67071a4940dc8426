package redisstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
	"github.com/kuracache/kura/store/storetest"
)

func TestMaxValueSize(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{Args: []string{"--proto-max-bulk-len", "1mb"}})
	s := open(t, r.URL(), redisstore.Options{})
	// The limit is read when the store connects, in the background: the
	// first request waits for that.
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.MaxValueSize(); got != 1<<20 {
		t.Fatalf("MaxValueSize = %d, want the server's 1 MiB", got)
	}
	ctx := context.Background()
	if err := s.Set(ctx, "big", make([]byte, 1<<20+1), 0); !errors.Is(err, store.ErrValueTooLarge) {
		t.Fatalf("Set past proto-max-bulk-len = %v, want ErrValueTooLarge", err)
	}
	err := s.SetMany(ctx, []store.Item{{Key: "ok", Value: []byte("v")}, {Key: "big", Value: make([]byte, 1<<20+1)}})
	var be *store.BatchError
	if !errors.As(err, &be) || len(be.Errors) != 1 || be.Errors[0].Key != "big" || !errors.Is(err, store.ErrValueTooLarge) {
		t.Fatalf("SetMany with one oversized value = %v", err)
	}
	if v, err := s.Get(ctx, "ok"); err != nil || string(v) != "v" {
		t.Fatalf("the valid item of the batch: %q, %v", v, err)
	}
}

func TestNewFromClient(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	storetest.Run(t, func(t *testing.T) store.Store { return redisstore.NewFromClient(c) })
	// The Store does not own the client: it still works after Close.
	if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("client closed by Store.Close: %v", err)
	}
}

func TestOptionsRejected(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func() error{
		"TLS with redis://": func() error {
			_, err := redisstore.NewFromURL(ctx, "redis://127.0.0.1:1", redisstore.Options{TLS: &tls.Config{}})
			return err
		},
		"bad scheme": func() error {
			_, err := redisstore.NewFromURL(ctx, "http://u:hunter2@127.0.0.1:1", redisstore.Options{})
			return err
		},
		"negative DB": func() error {
			_, err := redisstore.New(ctx, redisstore.Options{DB: -1})
			return err
		},
		"nobody listening": func() error {
			_, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{"127.0.0.1:1"}, DialTimeout: time.Second, FailFast: true})
			return err
		},
	}
	for name, fn := range cases {
		err := fn()
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error leaks the password: %v", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

func TestSelectDB(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	s := open(t, r.URL()+"/3", redisstore.Options{})
	if err := s.Set(ctx, "db-key", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Do(ctx, "EXISTS", "db-key"); err != nil || n != "0" {
		t.Fatalf("key written to /3 visible in db 0: %s %v", n, err)
	}
}

// TestNoGoroutinesAfterClose opens, uses and closes stores and checks that
// the goroutines rueidis started are gone.
func TestNoGoroutinesAfterClose(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	c := servertest.RedisCluster(t)
	before := runtime.NumGoroutine()
	ctx := context.Background()
	for _, url := range []string{r.URL(), c.URL()} {
		s, err := redisstore.NewFromURL(ctx, url, redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.SetMany(ctx, items([]string{"a", "b", "c", "d"}))
		_, _ = s.GetMany(ctx, []string{"a", "b", "c", "d", "e"})
		_ = s.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTLS starts redis-server with a TLS port and a self-signed
// certificate made here, and connects through rediss://.
func TestTLS(t *testing.T) {
	files, pool := servertest.SelfSigned(t)
	port, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r := servertest.Redis(t, servers.RedisConfig{Args: []string{
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", files.CertFile,
		"--tls-key-file", files.KeyFile,
		"--tls-ca-cert-file", files.CertFile,
		"--tls-auth-clients", "no",
	}})
	tlsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	url := "rediss://" + tlsAddr
	ctx := context.Background()

	// Verified against our CA.
	s := open(t, url, redisstore.Options{TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, url, redisstore.Options{TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	})
	if err := s.Set(ctx, "tls", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	// The key went to the same server as the plain port sees.
	if v, err := r.Do(ctx, "GET", "tls"); err != nil || v != "v" {
		t.Fatalf("GET over the plain port = %q, %v", v, err)
	}
	// Unknown CA: refused.
	if s, err := redisstore.NewFromURL(ctx, url, redisstore.Options{DialTimeout: 2 * time.Second, FailFast: true}); err == nil {
		s.Close()
		t.Fatal("connected to a server whose certificate nobody signed")
	} else {
		t.Logf("unknown CA: %v", err)
	}
	// skip_verify, for people who know what they do.
	s2 := open(t, url+"?skip_verify=true", redisstore.Options{})
	if v, err := s2.Get(ctx, "tls"); err != nil || string(v) != "v" {
		t.Fatalf("Get with skip_verify = %q, %v", v, err)
	}
}

func TestSplitHosts(t *testing.T) {
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379":                    "redis://127.0.0.1:6379",
		"redis://a:1,b:2,c:3":                       "redis://a:1?addr=b:2&addr=c:3",
		"redis://u:p@a:1,b:2/0?dial_timeout=1s":     "redis://u:p@a:1/0?addr=b:2&dial_timeout=1s",
		"rediss://:secret@a:1,b:2?skip_verify=true": "rediss://:secret@a:1?addr=b:2&skip_verify=true",
	} {
		if got := redisstore.SplitHosts(in); got != want {
			t.Errorf("splitHosts(%q) = %q, want %q", in, got, want)
		}
	}
}
