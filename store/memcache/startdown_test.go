package memcache_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/harness/startdown"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
)

func newStore(t *testing.T, opts memcache.Options) *memcache.Store {
	t.Helper()
	s, err := memcache.New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestStartDown starts a pool whose server is refused, stopped (SIGSTOP)
// or has a name that does not resolve, then brings it up: New returns,
// Fetch and FetchMany are answered by the loader, and hits resume.
func TestStartDown(t *testing.T) {
	for _, scenario := range startdown.Scenarios {
		for _, withHealth := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/health=%v", scenario, withHealth), func(t *testing.T) {
				m := servertest.Memcached(t, servers.MemcachedConfig{})
				addr, res, up := startdown.Down(t, scenario, m.Proc)
				s := newStore(t, memcache.Options{Servers: []string{addr}, Resolver: res})
				l := &startdown.Loader{}
				c := startdown.Cache(t, startdown.Health(t, s, withHealth))
				startdown.ServesFromLoader(t, c, l)
				if s.ConnStats().Connected {
					t.Fatal("ConnStats says connected while the server is down")
				}
				if err := up(); err != nil {
					t.Fatal(err)
				}
				startdown.WaitHits(t, c, l)
				st := s.ConnStats()
				if !st.Connected || len(st.Nodes) != 1 || st.Nodes[0].Resolved != m.Addr || st.Nodes[0].Dials == 0 {
					t.Fatalf("ConnStats after the server came up = %+v, want connected to %s", st, m.Addr)
				}
			})
		}
	}
}

// TestStartBlockingDialer: a dial that blocks until the test ends (or its
// context ends: requests dial in the caller's goroutine, so a dialer that
// ignored its context would hold the caller) keeps neither New nor Close
// from returning, and Fetch is answered by the loader within the Cache's
// StoreTimeout.
func TestStartBlockingDialer(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var dials atomic.Int64
	s := newStore(t, memcache.Options{
		Servers: []string{"127.0.0.1:11211"},
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			dials.Add(1)
			select {
			case <-release:
				return nil, errors.New("released")
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	})
	l := &startdown.Loader{}
	startdown.ServesFromLoader(t, startdown.Cache(t, startdown.Health(t, s, true)), l)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if dials.Load() == 0 {
		t.Fatal("the blocking dialer was never called")
	}
}

// TestFailFast keeps the old start for those who want it: New fails,
// naming the server, when it does not answer.
func TestFailFast(t *testing.T) {
	m := servertest.Memcached(t, servers.MemcachedConfig{})
	m.Kill()
	_, err := memcache.New(context.Background(), memcache.Options{Servers: []string{m.Addr}, FailFast: true})
	if ne := store.AsNodeError(err); ne == nil || ne.Addr != m.Addr {
		t.Fatalf("New with FailFast and the server down = %v, want an error naming %s", err, m.Addr)
	}
}

// TestNodeReplaced: managed memcached replaces a node under the same name
// at a new address (127.0.0.1 -> 127.0.0.2, same port). Once the old
// node's connections fail, new ones look the name up again and the keys
// land on the new node.
func TestNodeReplaced(t *testing.T) {
	a := servertest.Memcached(t, servers.MemcachedConfig{})
	_, port, _ := net.SplitHostPort(a.Addr)
	p, _ := strconv.Atoi(port)
	b := servertest.Memcached(t, servers.MemcachedConfig{Host: "127.0.0.2", Port: p})
	res := servertest.NewResolver()
	res.Set("mc.kura.test", "127.0.0.1")
	addr := net.JoinHostPort("mc.kura.test", port)
	s := newStore(t, memcache.Options{Servers: []string{addr}, Resolver: res})
	ctx := context.Background()
	if err := s.Set(ctx, "before", []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	res.Set("mc.kura.test", "127.0.0.2")
	a.Kill()
	servertest.Eventually(t, "a write after the node was replaced", func() error {
		return s.Set(ctx, "after", []byte("b"), 0)
	})
	direct := newStore(t, memcache.Options{Servers: []string{b.Addr}})
	if v, err := direct.Get(ctx, "after"); err != nil || string(v) != "b" {
		t.Fatalf("Get on the new node = %q, %v", v, err)
	}
	if _, err := direct.Get(ctx, "before"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the new node has the old node's key: %v", err)
	}
	st := s.ConnStats()
	if len(st.Nodes) != 1 || st.Nodes[0].AddrChanges == 0 || st.Nodes[0].Resolved != b.Addr {
		t.Fatalf("ConnStats after the move = %+v, want an address change to %s", st, b.Addr)
	}
}
