package redial

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kuracache/kura/store"
)

type fakeResolver struct {
	mu      sync.Mutex
	ips     []string
	calls   atomic.Int64
	release chan struct{} // when set, lookups wait for it
}

func (r *fakeResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	r.calls.Add(1)
	if r.release != nil {
		select {
		case <-r.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ips) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return r.ips, nil
}

func (r *fakeResolver) set(ips ...string) {
	r.mu.Lock()
	r.ips = ips
	r.mu.Unlock()
}

// listen opens a listener on ip at port (0: any), accepting and closing.
func listen(t *testing.T, ip, port string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

func TestDialFollowsTheName(t *testing.T) {
	a := listen(t, "127.0.0.1", "0")
	_, port, _ := net.SplitHostPort(a.Addr().String())
	b := listen(t, "127.0.0.2", port)
	res := &fakeResolver{}
	d := New(res, nil)
	addr := net.JoinHostPort("cache.test", port)
	d.Track(addr)
	ctx := context.Background()

	_, err := d.DialContext(ctx, "tcp", addr)
	var op *net.OpError
	var dns *net.DNSError
	if !errors.As(err, &op) || op.Op != "dial" || !errors.As(err, &dns) {
		t.Fatalf("dial of a name that does not resolve = %v, want a dial *net.OpError around a *net.DNSError", err)
	}
	res.set("127.0.0.1")
	for i := 0; i < 2; i++ {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	res.set("127.0.0.2")
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RemoteAddr().String(); got != b.Addr().String() {
		t.Fatalf("connected to %s, want %s", got, b.Addr())
	}
	c.Close()
	st := d.Stats()
	want := NodeStatsFor(addr, b.Addr().String(), 3, 1, 1, 4, 1, 1)
	if len(st) != 1 || st[0] != want {
		t.Fatalf("Stats = %+v, want %+v", st, want)
	}

	// An IP address is dialed as it is, without a lookup.
	calls := res.calls.Load()
	c, err = d.DialContext(ctx, "tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if res.calls.Load() != calls {
		t.Fatal("an IP address was looked up")
	}
}

func TestConcurrentLookupsShareOneQuery(t *testing.T) {
	res := &fakeResolver{release: make(chan struct{})}
	d := New(res, nil)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Go(func() { _, _ = d.DialContext(context.Background(), "tcp", "cache.test:1") })
	}
	for {
		d.mu.Lock()
		l := d.lookups["cache.test"]
		joined := l != nil && l.waiters == 15
		d.mu.Unlock()
		if joined {
			break
		}
		runtime.Gosched()
	}
	close(res.release)
	wg.Wait()
	st := d.Stats()
	if st[0].Resolves != 16 || st[0].ResolveFailures != 16 {
		t.Fatalf("Stats = %+v, want 16 failed lookups counted", st)
	}
	if n := res.calls.Load(); n != 1 {
		t.Fatalf("%d queries for 16 concurrent lookups, want 1", n)
	}
}

// NodeStatsFor builds the expected counters of one address.
func NodeStatsFor(addr, resolved string, dials, fails, reconnects, resolves, resolveFails, changes uint64) store.NodeConnStats {
	return store.NodeConnStats{Addr: addr, Resolved: resolved, Dials: dials, DialFailures: fails, Reconnects: reconnects,
		Resolves: resolves, ResolveFailures: resolveFails, AddrChanges: changes}
}
