package redisstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/harness/startdown"
	"github.com/kuracache/kura/kuraprom"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// TestStartDown starts a Store while its server is refused, stopped
// (SIGSTOP: accepts, never answers) or has a name that does not resolve,
// and brings the server up afterwards at the same address: the Store is
// created, Fetch and FetchMany are answered by the loader (a stopped
// server costs them at most their StoreTimeout), and hits resume without
// a restart.
func TestStartDown(t *testing.T) {
	for _, scenario := range startdown.Scenarios {
		for _, withHealth := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/health=%v", scenario, withHealth), func(t *testing.T) {
				r := servertest.Redis(t, servers.RedisConfig{})
				addr, res, up := startdown.Down(t, scenario, r.Proc)
				s := open(t, "redis://"+addr, redisstore.Options{Resolver: res})
				if scenario != "stalled" {
					_, err := s.Get(context.Background(), "k")
					if !errors.Is(err, store.ErrNotConnected) {
						t.Fatalf("Get with the server down = %v, want ErrNotConnected", err)
					}
					if ne := store.AsNodeError(err); ne == nil || ne.Addr != addr {
						t.Fatalf("Get's error %v does not name the server %s", err, addr)
					}
				}
				l := &startdown.Loader{}
				hs := startdown.Health(t, s, withHealth)
				c := startdown.Cache(t, hs)
				startdown.ServesFromLoader(t, c, l)
				st := s.ConnStats()
				if st.Connected || len(st.Nodes) != 1 || st.Nodes[0].Addr != addr {
					t.Fatalf("ConnStats with the server down = %+v, want not connected, %s", st, addr)
				}
				if scenario == "unresolvable" && st.Nodes[0].ResolveFailures == 0 {
					t.Fatalf("ConnStats = %+v, want a failed lookup", st)
				}
				connected := promConnected(t, hs)
				if v := connected(); v != 0 {
					t.Fatalf("kura_store_connected = %v with the server down", v)
				}
				if err := up(); err != nil {
					t.Fatal(err)
				}
				startdown.WaitHits(t, c, l)
				st = s.ConnStats()
				if !st.Connected || st.Nodes[0].Resolved != r.Addr {
					t.Fatalf("ConnStats after the server came up = %+v, want connected to %s", st, r.Addr)
				}
				if scenario == "refused" && st.Nodes[0].Reconnects == 0 {
					t.Fatalf("ConnStats = %+v, want a reconnect", st)
				}
				if v := connected(); v != 1 {
					t.Fatalf("kura_store_connected = %v once connected", v)
				}
			})
		}
	}
}

// promConnected returns kura_store_connected as kuraprom's ConnCollector
// exports it for the store s, found through its wrappers.
func promConnected(t *testing.T, s store.Store) func() float64 {
	cr, ok := store.Find[store.ConnReporter](s)
	if !ok {
		t.Fatal("ConnReporter not found through the wrappers")
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(kuraprom.NewConnCollector("sessions", cr))
	return func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "kura_store_connected" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no kura_store_connected")
		return 0
	}
}

// TestStartBlockingDialer: a dial that blocks until the test ends keeps
// neither the constructors nor Close from returning, and a Fetch is
// answered by the loader.
func TestStartBlockingDialer(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // runs after the stores' Close
	var dials atomic.Int64
	block := func(o *rueidis.ClientOption) {
		o.DialCtxFn = func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
			dials.Add(1)
			<-release // ignores its context on purpose
			return nil, errors.New("released")
		}
	}
	opts := redisstore.Options{Addrs: []string{"127.0.0.1:6379"}, Configure: block}
	s1, err := redisstore.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := redisstore.NewFromURL(context.Background(), "redis://127.0.0.1:6379", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []*redisstore.Store{s1, s2} {
		l := &startdown.Loader{}
		c := startdown.Cache(t, startdown.Health(t, s, i == 1))
		startdown.ServesFromLoader(t, c, l)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, err := s.Get(ctx, "k")
		cancel()
		if !errors.Is(err, store.ErrNotConnected) {
			t.Fatalf("Get while the dial blocks = %v, want ErrNotConnected", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if dials.Load() == 0 {
		t.Fatal("the blocking dialer was never called")
	}
}

// TestAddressMoves: the server behind a name is replaced by one at another
// address (127.0.0.1 -> 127.0.0.2, same port), as a managed service does
// on failover. The reconnect looks the name up again and writes land on
// the new server.
func TestAddressMoves(t *testing.T) {
	a := servertest.Redis(t, servers.RedisConfig{})
	_, port, _ := net.SplitHostPort(a.Addr)
	p, _ := strconv.Atoi(port)
	b := servertest.Redis(t, servers.RedisConfig{Host: "127.0.0.2", Port: p})
	res := servertest.NewResolver()
	res.Set("cache.kura.test", "127.0.0.1")
	addr := net.JoinHostPort("cache.kura.test", port)
	s := open(t, "redis://"+addr, redisstore.Options{Resolver: res})
	ctx := context.Background()
	if err := s.Set(ctx, "before", []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := a.Do(ctx, "GET", "before"); err != nil || v != "a" {
		t.Fatalf("GET before on the first server = %q, %v", v, err)
	}
	res.Set("cache.kura.test", "127.0.0.2")
	a.Kill()
	servertest.Eventually(t, "a write after the move", func() error {
		return s.Set(ctx, "after", []byte("b"), 0)
	})
	if v, err := b.Do(ctx, "GET", "after"); err != nil || v != "b" {
		t.Fatalf("GET after on the new server = %q, %v", v, err)
	}
	st := s.ConnStats()
	var n store.NodeConnStats
	for _, x := range st.Nodes {
		if x.Addr == addr {
			n = x
		}
	}
	if n.AddrChanges == 0 || n.Resolved != b.Addr {
		t.Fatalf("ConnStats after the move = %+v, want an address change to %s", st, b.Addr)
	}
}

// TestClusterStartsLaterAndMoves starts a Store on a seed name of a Redis
// Cluster whose nodes are all down; when they come up, the Store finds out
// it is a Cluster and serves every slot. Then the whole Cluster behind the
// name is replaced by one at another address (127.0.0.1 -> 127.0.0.2, same
// ports): once the old masters are gone, the slot-map refresh reaches the
// new Cluster through the seed's name, looked up again, and writes land
// there.
func TestClusterStartsLaterAndMoves(t *testing.T) {
	a := servertest.RedisCluster(t)
	ports := make([]int, len(a.Nodes))
	for i, n := range a.Nodes {
		ports[i] = n.Port()
		n.Kill()
	}
	res := servertest.NewResolver()
	res.Set("cluster.kura.test", "127.0.0.1")
	seed := net.JoinHostPort("cluster.kura.test", strconv.Itoa(ports[0]))
	s := open(t, "redis://"+seed, redisstore.Options{Resolver: res})
	l := &startdown.Loader{}
	c := startdown.Cache(t, startdown.Health(t, s, true))
	startdown.ServesFromLoader(t, c, l)
	if s.IsCluster() {
		t.Fatal("a store that never connected says it is a Cluster")
	}
	for _, n := range a.Nodes {
		if err := n.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	items := make([]store.Item, 64)
	for i := range items {
		items[i] = store.Item{Key: "k" + strconv.Itoa(i), Value: []byte("v")}
	}
	servertest.Eventually(t, "writes to every master", func() error { return s.SetMany(ctx, items) })
	if !s.IsCluster() {
		t.Fatal("Cluster not detected once its nodes answered")
	}
	startdown.WaitHits(t, c, l)

	b := servertest.RedisClusterAt(t, "127.0.0.2", ports)
	res.Set("cluster.kura.test", "127.0.0.2")
	for _, n := range a.Nodes {
		n.Kill()
	}
	servertest.Eventually(t, "writes to the moved Cluster", func() error { return s.SetMany(ctx, items) })
	total := 0
	for _, n := range b.Nodes {
		v, err := n.Do(ctx, "DBSIZE")
		if err != nil {
			t.Fatal(err)
		}
		k, _ := strconv.Atoi(v)
		total += k
	}
	if total < len(items) {
		t.Fatalf("the new Cluster holds %d keys, want at least %d", total, len(items))
	}
	for _, n := range s.ConnStats().Nodes {
		if n.Addr == seed {
			if n.AddrChanges == 0 || n.Resolved != net.JoinHostPort("127.0.0.2", strconv.Itoa(ports[0])) {
				t.Fatalf("seed %+v: want an address change to 127.0.0.2", n)
			}
			return
		}
	}
	t.Fatalf("no ConnStats for the seed %s: %+v", seed, s.ConnStats())
}
