package memcache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memcache/meta"
	"github.com/kuracache/kura/store/storetest"
)

func pool(t *testing.T, cfg servers.MemcachedConfig) []*servers.Memcached {
	t.Helper()
	if testing.Short() {
		t.Skip("real-server test")
	}
	return servertest.MemcachedPool(t, 3, cfg)
}

func addrs(ms []*servers.Memcached) []string {
	a := make([]string, len(ms))
	for i, m := range ms {
		a[i] = m.Addr
	}
	return a
}

func open(t testing.TB, opts memcache.Options) *memcache.Store {
	t.Helper()
	s, err := memcache.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// checkNoLeaks fails the test if goroutines started during it outlive it.
func checkNoLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

// TestConformance runs the shared store suite against three memcached
// servers (2 MiB items, so the suite's 1 MiB value fits).
func TestConformance(t *testing.T) {
	ms := pool(t, servers.MemcachedConfig{MaxItemSize: 2 << 20})
	storetest.RunWithOptions(t, func(t *testing.T) store.Store {
		s, err := memcache.New(context.Background(), memcache.Options{Servers: addrs(ms)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.Options{LargeValue: 1 << 20})
}

func TestOptionsErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		opts memcache.Options
		want string
	}{
		{memcache.Options{}, "Options.Servers"},
		{memcache.Options{Servers: []string{"nohost"}}, "Options.Servers[0]"},
		{memcache.Options{Servers: []string{"a:1", "a:1"}}, "twice"},
		{memcache.Options{Servers: []string{"a:1", "b:1"}, Weights: []int{1}}, "Options.Weights"},
		{memcache.Options{Servers: []string{"a:1"}, Weights: []int{0}}, "Options.Weights[0]"},
		{memcache.Options{Servers: []string{"a:1"}, ReadTimeout: -1}, "Options.ReadTimeout"},
	} {
		if _, err := memcache.New(ctx, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.opts, err, tc.want)
		}
	}
}

// TestKillMidSetMany kills one of three servers while a large SetMany is
// streaming to it: every failure names that server and one of its keys,
// none is lost, and the other servers' keys are all stored.
func TestKillMidSetMany(t *testing.T) {
	checkNoLeaks(t)
	ms := pool(t, servers.MemcachedConfig{MemoryMB: 256})
	victim := ms[1]
	var written atomic.Int64
	killed := make(chan struct{})
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil || addr != victim.Addr {
			return c, err
		}
		return &killConn{Conn: c, written: &written, at: 4 << 20, kill: func() {
			victim.Kill()
			close(killed)
		}}, nil
	}
	s := open(t, memcache.Options{Servers: addrs(ms), Dial: dial})
	const n = 60000
	val := bytes.Repeat([]byte("x"), 512)
	items := make([]store.Item, n)
	owner := map[string]string{}
	for i := range items {
		items[i] = store.Item{Key: fmt.Sprintf("kill:%d", i), Value: val}
		owner[items[i].Key] = s.Ring().Server(items[i].Key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := s.SetMany(ctx, items)
	select {
	case <-killed:
	default:
		t.Fatalf("the victim was not killed mid-batch (%d bytes written to it)", written.Load())
	}
	var be *store.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("SetMany = %v, want a *store.BatchError", err)
	}
	failed := be.Failed()
	for _, ke := range be.Errors {
		if ke.Addr != victim.Addr || owner[ke.Key] != victim.Addr {
			t.Fatalf("failure for %q on %q; only %s's keys may fail", ke.Key, ke.Addr, victim.Addr)
		}
		if ne := store.AsNodeError(ke.Err); ne == nil || ne.Addr != victim.Addr {
			t.Fatalf("failure for %q is not a *store.NodeError for %s: %v", ke.Key, victim.Addr, ke.Err)
		}
	}
	victimKeys := 0
	for k, a := range owner {
		if a == victim.Addr {
			victimKeys++
		}
		_ = k
	}
	if len(failed) == 0 || len(failed) > victimKeys {
		t.Fatalf("%d failures for %d keys on the victim", len(failed), victimKeys)
	}
	// Keys of the victim that did not fail were confirmed by an MN before
	// it died; the rest of the servers hold every one of theirs.
	var others []string
	for _, it := range items {
		if owner[it.Key] != victim.Addr {
			others = append(others, it.Key)
		}
	}
	vals, err := s.GetMany(ctx, others)
	if err != nil {
		t.Fatalf("GetMany of the live servers' keys: %v", err)
	}
	for i, v := range vals {
		if !bytes.Equal(v, val) {
			t.Fatalf("%s (on %s) not stored", others[i], owner[others[i]])
		}
	}
	t.Logf("victim %s: %d of its %d keys reported failed: %v", victim.Addr, len(failed), victimKeys, be.Errors[0].Err)
	// A Get for a victim key fails fast with an error naming the server.
	for k, a := range owner {
		if a == victim.Addr {
			if _, err := s.Get(ctx, k); err == nil || !strings.Contains(err.Error(), victim.Addr) {
				t.Fatalf("Get on the dead server = %v", err)
			} else if ne := store.AsNodeError(err); ne == nil || ne.Addr != victim.Addr {
				t.Fatalf("Get on the dead server = %v, want a *store.NodeError for %s", err, victim.Addr)
			}
			if err := s.Delete(ctx, k); store.AsNodeError(err) == nil {
				t.Fatalf("Delete on the dead server = %v, want a *store.NodeError", err)
			}
			break
		}
	}
}

// killConn kills the server once at bytes have been written to it.
type killConn struct {
	net.Conn
	written *atomic.Int64
	at      int64
	kill    func()
	done    atomic.Bool
}

func (c *killConn) Write(p []byte) (int, error) {
	if c.written.Add(int64(len(p))) >= c.at && !c.done.Swap(true) {
		c.kill()
	}
	return c.Conn.Write(p)
}

// TestOversized checks values over the limit fail before they are sent,
// naming the key and the size, alone and in a batch.
func TestOversized(t *testing.T) {
	ms := pool(t, servers.MemcachedConfig{})
	s := open(t, memcache.Options{Servers: addrs(ms)})
	ctx := context.Background()
	max := s.MaxValueSize()
	if max != 1<<20-memcache.ItemOverhead {
		t.Fatalf("MaxValueSize = %d", max)
	}
	if err := s.Set(ctx, "fits", make([]byte, max), 0); err != nil {
		t.Fatalf("a value of MaxValueSize: %v", err)
	}
	err := s.Set(ctx, "big", make([]byte, max+1), 0)
	if !errors.Is(err, store.ErrValueTooLarge) || !strings.Contains(err.Error(), `"big"`) ||
		!strings.Contains(err.Error(), fmt.Sprint(max+1)) {
		t.Fatalf("Set too large = %v", err)
	}
	items := []store.Item{{Key: "ok1", Value: []byte("a")}, {Key: "big2", Value: make([]byte, 3<<20)}, {Key: "ok2", Value: []byte("b")}}
	err = s.SetMany(ctx, items)
	var be *store.BatchError
	if !errors.As(err, &be) || len(be.Errors) != 1 || be.Errors[0].Key != "big2" ||
		!errors.Is(be.Errors[0].Err, store.ErrValueTooLarge) || be.Errors[0].Addr != s.Ring().Server("big2") {
		t.Fatalf("SetMany = %v", err)
	}
	vals, err := s.GetMany(ctx, []string{"ok1", "big2", "ok2"})
	if err != nil || string(vals[0]) != "a" || vals[1] != nil || string(vals[2]) != "b" {
		t.Fatalf("GetMany = %q, %v", vals, err)
	}
}

// TestRefusedKeys checks keys memcached cannot take as they are: the empty
// key is refused; keys with spaces, control characters or over 250 bytes
// round-trip (base64 or hashed) without colliding.
func TestRefusedKeys(t *testing.T) {
	ms := pool(t, servers.MemcachedConfig{})
	s := open(t, memcache.Options{Servers: addrs(ms)})
	ctx := context.Background()
	if err := s.Set(ctx, "", []byte("v"), 0); !errors.Is(err, store.ErrInvalidKey) || !strings.Contains(err.Error(), "empty key") {
		t.Fatalf("empty key: %v", err)
	}
	keys := []string{"a b", "a\tb", "a\r\nmd a", strings.Repeat("z", 251), strings.Repeat("z", 252), "\x00z", "a_b"}
	var items []store.Item
	for i, k := range keys {
		items = append(items, store.Item{Key: k, Value: []byte(fmt.Sprint(i))})
	}
	if err := s.SetMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	vals, err := s.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if string(v) != fmt.Sprint(i) {
			t.Errorf("key %q = %q, want %d", keys[i], v, i)
		}
	}
	vals, err = s.GetMany(ctx, []string{"ok", "", "ok2"})
	var be *store.BatchError
	if !errors.As(err, &be) || len(be.Errors) != 1 || be.Errors[0].Key != "" || vals[0] != nil {
		t.Fatalf("GetMany with an empty key = %v", err)
	}
}

// TestTTLOver30Days stores through the Store with TTLs beyond memcached's
// relative limit; the server must report about that much time left
// (not "already expired", not "never"). memcached's clock ticks once a
// second and lags the wall clock, so it may report a second or two more.
func TestTTLOver30Days(t *testing.T) {
	ms := pool(t, servers.MemcachedConfig{})
	s := open(t, memcache.Options{Servers: addrs(ms)})
	ctx := context.Background()
	ttl := 45 * 24 * time.Hour
	if err := s.SetMany(ctx, []store.Item{{Key: "long1", Value: []byte("v"), TTL: ttl}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "long2", []byte("v"), ttl); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"long1", "long2"} {
		var res meta.Response
		if err := s.Client(k).Do(ctx, &meta.Request{Cmd: meta.Get, Key: k, ReturnTTL: true}, &res); err != nil {
			t.Fatal(err)
		}
		if want := int64(ttl / time.Second); res.Status != meta.HD || res.TTL < want-5 || res.TTL > want+2 {
			t.Errorf("%s: %v t%d, want about %d", k, res.Status, res.TTL, want)
		}
	}
}

// TestPausedServerDeadline SIGSTOPs one server: calls for its keys end at
// the context deadline with an error naming it; the other servers' keys
// in the same batch are still answered.
func TestPausedServerDeadline(t *testing.T) {
	checkNoLeaks(t)
	ms := pool(t, servers.MemcachedConfig{})
	s := open(t, memcache.Options{Servers: addrs(ms)})
	ctx := context.Background()
	keys := make([]string, 300)
	var items []store.Item
	for i := range keys {
		keys[i] = fmt.Sprintf("p:%d", i)
		items = append(items, store.Item{Key: keys[i], Value: []byte("v")})
	}
	if err := s.SetMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	victim := ms[0]
	pause(t, victim)
	defer victim.Resume()
	var vk string
	for _, k := range keys {
		if s.Ring().Server(k) == victim.Addr {
			vk = k
			break
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Get(dctx, vk)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), victim.Addr) {
		t.Fatalf("Get on the paused server = %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("Get took %v past a 300ms deadline", el)
	}
	dctx2, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	vals, err := s.GetMany(dctx2, keys)
	var be *store.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("GetMany = %v", err)
	}
	for _, ke := range be.Errors {
		if ke.Addr != victim.Addr || !errors.Is(ke.Err, context.DeadlineExceeded) {
			t.Fatalf("failure %v", ke)
		}
	}
	for i, k := range keys {
		if s.Ring().Server(k) != victim.Addr && string(vals[i]) != "v" {
			t.Fatalf("%s on a live server: %q", k, vals[i])
		}
	}
	t.Logf("%s", be.Error())
	if err := victim.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after resume: %v", err)
	}
}
