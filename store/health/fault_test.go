package health_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/redisstore"
)

// Bounds for waiting on something to happen. They are far above what
// the test expects (detection within ~0.5 s with testOpts), so a slow
// machine does not fail the test; no test asserts a duration.
const waitBound = 15 * time.Second

// testOpts are generous probe timeouts: the test machine is shared and
// runs with -race, and a false "down" of a healthy node would be a test
// failure, not a statement about production defaults.
func testOpts() health.Options {
	return health.Options{
		ProbeInterval: 50 * time.Millisecond,
		ProbeTimeout:  250 * time.Millisecond,
		BackoffMax:    200 * time.Millisecond,
		NodeRefresh:   200 * time.Millisecond,
	}
}

// topology is a store with one faulty node behind a counting proxy.
type topology struct {
	inner  store.Store
	target string        // the faulty node, as the store names it
	proxy  *faults.Proxy // in front of target
	app    []string      // command names of application traffic at the proxy
	probe  string        // the probe's command name
	server *servers.Proc // the target's process
}

func (tp *topology) appRequests() int64 {
	st := tp.proxy.Stats()
	var n int64
	for _, c := range tp.app {
		n += st.Commands[c]
	}
	return n
}

func redisTopology(t *testing.T) *topology {
	r := servertest.Redis(t, servers.RedisConfig{})
	p := servertest.Proxy(t, r.Addr, faults.ProxyOptions{Protocol: faults.RESP, DialTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{p.Addr()}, FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	return &topology{inner: s, target: p.Addr(), proxy: p, server: r.Proc,
		app: []string{"get", "mget", "set", "mset", "del"}, probe: "ping"}
}

func memcacheTopology(t *testing.T) *topology {
	ms := servertest.MemcachedPool(t, 3, servers.MemcachedConfig{})
	p := servertest.Proxy(t, ms[1].Addr, faults.ProxyOptions{Protocol: faults.Memcache, DialTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := memcache.New(ctx, memcache.Options{
		Servers:  []string{ms[0].Addr, p.Addr(), ms[2].Addr},
		FailFast: true, // the fault cases start from a pool that answers
		// As many idle connections as callers: with the default 8, most of
		// 64 callers dial a new connection per request, and on this shared
		// test machine some of those dials take longer than StoreTimeout.
		MaxIdleConns: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &topology{inner: s, target: p.Addr(), proxy: p, server: ms[1].Proc,
		app: []string{"mg", "ms", "md"}, probe: "mn"}
}

// fault is one way for the target to fail, and to come back.
type fault struct {
	name         string
	inject, heal func(t *testing.T, tp *topology)
}

var (
	sigstop = fault{"SIGSTOP",
		func(t *testing.T, tp *topology) { must(t, tp.server.Pause()) },
		func(t *testing.T, tp *topology) { must(t, tp.server.Resume()) }}
	sigkill = fault{"SIGKILL+restart",
		func(t *testing.T, tp *topology) { tp.server.Kill() },
		func(t *testing.T, tp *topology) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			must(t, tp.server.Restart(ctx))
		}}
	stall = fault{"network stall",
		func(t *testing.T, tp *topology) { tp.proxy.Stall() },
		func(t *testing.T, tp *topology) { tp.proxy.Unstall() }}
	refuse = fault{"connections reset and refused",
		func(t *testing.T, tp *topology) { must(t, tp.proxy.Refuse()); tp.proxy.ResetConns() },
		func(t *testing.T, tp *topology) { must(t, tp.proxy.Admit()) }}
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %v for %s", waitBound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// run is the scenario every topology and fault goes through: 64 callers
// doing Fetch and FetchMany over keys of every node; the target fails;
// once it is Down no application request reaches it (only probes), its
// keys come from the loader, the other nodes' keys keep hitting and no
// caller sees an error; it comes back and hits resume without a restart
// of the client; no goroutine is left behind.
func run(t *testing.T, tp *topology, f fault) {
	goroutines := runtime.NumGoroutine()
	var transitions sync.Map // "from>to" -> count
	opts := testOpts()
	opts.OnStateChange = func(tr health.Transition) {
		if testing.Verbose() {
			t.Logf("%s: %v -> %v (probe %v): %v", tr.Addr, tr.From, tr.To, tr.Probe, tr.Cause)
		}
		v, _ := transitions.LoadOrStore(tr.From.String()+">"+tr.To.String(), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	hs, err := health.New(tp.inner, opts)
	must(t, err)
	// A StoreTimeout of 1 s: on this shared test machine a healthy node
	// sometimes takes longer than the default 250 ms to be scheduled; the
	// breaker does not depend on it (probes find the fault).
	c, err := kura.New[string](hs, kura.Options{StoreTimeout: time.Second})
	must(t, err)

	loc, _ := store.Find[store.NodeLocator](hs)
	var keys, targetKeys []string
	onTarget := map[string]bool{}
	for i := 0; len(targetKeys) < 20 || len(keys) < 200; i++ {
		k := fmt.Sprintf("health:%s:%d", f.name, i)
		keys = append(keys, k)
		if loc.NodeOf(k) == tp.target {
			targetKeys = append(targetKeys, k)
			onTarget[k] = true
		}
	}

	var phase atomic.Int32 // 0 warm-up, 1 fault, 2 healed
	var loadsTarget, loadsOther [3]atomic.Int64
	load := func(k string) string {
		if onTarget[k] {
			loadsTarget[phase.Load()].Add(1)
		} else {
			loadsOther[phase.Load()].Add(1)
		}
		return "v:" + k
	}
	loader := func(_ context.Context, k string) (string, error) { return load(k), nil }
	many := func(_ context.Context, ks []string) (map[string]string, error) {
		m := make(map[string]string, len(ks))
		for _, k := range ks {
			m[k] = load(k)
		}
		return m, nil
	}
	ctx := context.Background()
	if _, err := c.FetchMany(ctx, keys, 0, many); err != nil {
		t.Fatal(err)
	}
	loadsTarget[0].Store(0)
	loadsOther[0].Store(0)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var callerErrs atomic.Int64
	var firstErr atomic.Value
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if w%2 == 0 {
					k := keys[rng.IntN(len(keys))]
					var v string
					if v, err = c.Fetch(ctx, k, 0, loader); err == nil && v != "v:"+k {
						err = fmt.Errorf("Fetch(%q) = %q", k, v)
					}
				} else {
					batch := make([]string, 6)
					for i := range batch {
						batch[i] = keys[rng.IntN(len(keys))]
					}
					var m map[string]string
					if m, err = c.FetchMany(ctx, batch, 0, many); err == nil {
						for _, k := range batch {
							if m[k] != "v:"+k {
								err = fmt.Errorf("FetchMany: %q = %q", k, m[k])
							}
						}
					}
				}
				if err != nil {
					callerErrs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				time.Sleep(time.Millisecond) // leave the shared CPUs some air
			}
		}()
	}
	stopWorkers := func() {
		if stop != nil {
			close(stop)
			wg.Wait()
			stop = nil
		}
	}
	defer stopWorkers()

	time.Sleep(100 * time.Millisecond)
	phase.Store(1)
	f.inject(t, tp)
	waitFor(t, "the target to be down", func() bool { s, _ := hs.State(tp.target); return s == health.Down })
	// Requests sent before the node went down may still be on their
	// way; once none is in flight, nothing more may reach it.
	waitFor(t, "requests in flight to end", func() bool { return nodeStats(hs, tp.target).InFlight == 0 })
	// The proxy counts a request when its goroutine reads it, which on a
	// busy machine can be a while after the client wrote it.
	waitFor(t, "the proxy to count what was sent", func() bool {
		n := tp.appRequests()
		time.Sleep(100 * time.Millisecond)
		return tp.appRequests() == n
	})
	before, beforeStats, beforeHits := tp.appRequests(), nodeStats(hs, tp.target), c.Stats().Hits
	loadsBefore := loadsTarget[1].Load()
	waitFor(t, "two probes, loads and hits during the fault", func() bool {
		return nodeStats(hs, tp.target).Probes >= beforeStats.Probes+2 && loadsTarget[1].Load() > loadsBefore+10 &&
			(len(hs.Stats().Nodes) == 1 || c.Stats().Hits > beforeHits+100)
	})
	if d := tp.appRequests() - before; d != 0 {
		t.Errorf("%d application requests reached the down node", d)
	}
	after := nodeStats(hs, tp.target)
	if ns := c.Stats().Nodes; len(ns) == 0 {
		t.Errorf("Cache.Stats().Nodes is empty over a health.Store")
	}
	if after.State != health.Down {
		t.Errorf("target is %v during the fault", after.State)
	}
	if after.Probes <= beforeStats.Probes {
		t.Errorf("no probe of the down node (%d before, %d after)", beforeStats.Probes, after.Probes)
	}
	if after.FailFast <= beforeStats.FailFast {
		t.Errorf("no request failed fast")
	}
	if loadsTarget[1].Load() <= loadsBefore {
		t.Errorf("the down node's keys were not served by the loader")
	}
	if len(hs.Stats().Nodes) > 1 && c.Stats().Hits <= beforeHits {
		t.Errorf("the other nodes stopped serving hits")
	}
	// A healthy node's key goes to the loader only when its own read
	// fails, which on this shared machine (under -race, with 64 callers)
	// happens now and then when a goroutine is not scheduled within
	// StoreTimeout; the down node's keys go there on every read.
	if o, d := loadsOther[1].Load(), loadsTarget[1].Load(); o*4 > d {
		t.Errorf("keys of healthy nodes were loaded %d times during the fault, the down node's %d times", o, d)
	}
	for _, ns := range hs.Stats().Nodes {
		if ns.Addr != tp.target && ns.State != health.Up {
			t.Errorf("healthy node %s is %v", ns.Addr, ns.State)
		}
	}

	f.heal(t, tp)
	waitFor(t, "the target to be up", func() bool { s, _ := hs.State(tp.target); return s == health.Up })
	phase.Store(2)
	healed := tp.appRequests()
	k := targetKeys[0]
	waitFor(t, "a hit on the target", func() bool {
		n := loadsTarget[2].Load()
		_, _ = c.Fetch(ctx, k, 0, loader)
		return loadsTarget[2].Load() == n
	})
	stopWorkers()
	if tp.appRequests() <= healed {
		t.Errorf("no application request reached the node after it came back")
	}
	if n := callerErrs.Load(); n != 0 {
		t.Errorf("%d callers saw an error; first: %v", n, firstErr.Load())
	}
	for _, tr := range []string{"up>suspect", "suspect>down"} {
		if _, ok := transitions.Load(tr); !ok {
			t.Errorf("no %s transition reported to OnStateChange", tr)
		}
	}
	must(t, hs.Close())
	must(t, tp.inner.Close())
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutines })
}

// rounds is how many times each fault of the matrix runs: once in make
// test, five times under make soak (KURA_SOAK=1).
func rounds() []struct{} {
	if os.Getenv("KURA_SOAK") == "1" {
		return make([]struct{}, 5)
	}
	return make([]struct{}, 1)
}

func nodeStats(hs *health.Store, addr string) health.NodeStats {
	for _, ns := range hs.Stats().Nodes {
		if ns.Addr == addr {
			return ns
		}
	}
	return health.NodeStats{}
}

func TestFaultsRedis(t *testing.T) {
	for range rounds() {
		for _, f := range []fault{sigstop, sigkill, stall, refuse} {
			t.Run(f.name, func(t *testing.T) { run(t, redisTopology(t), f) })
		}
	}
}

// clusterTopology is a 3-master Redis Cluster with
// cluster-require-full-coverage no (with the default yes, the healthy
// masters answer CLUSTERDOWN once the others agree a master failed; see
// docs/health.md). The first master announces the proxy's port, so the
// cluster tells clients to reach it through the proxy, where its requests
// are counted. Both settings are also given to the target's command line
// for a restart (AppendArgs), as a config file would keep them: a
// restarted master that announced its own port again would be reached
// around the proxy, and one that required full coverage would answer
// CLUSTERDOWN until it had heard from every other master.
func clusterTopology(t *testing.T) *topology {
	cl := servertest.RedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range cl.Nodes {
		if _, err := n.Do(ctx, "CONFIG", "SET", "cluster-require-full-coverage", "no"); err != nil {
			t.Fatal(err)
		}
	}
	target := cl.Nodes[0]
	p := servertest.Proxy(t, target.Addr, faults.ProxyOptions{Protocol: faults.RESP, DialTimeout: time.Second})
	_, pport, _ := net.SplitHostPort(p.Addr())
	busPort := strconv.Itoa(target.Port() + 10000)
	if _, err := target.Do(ctx, "CONFIG", "SET", "cluster-announce-port", pport,
		"cluster-announce-bus-port", busPort); err != nil {
		t.Fatal(err)
	}
	target.AppendArgs("--cluster-require-full-coverage", "no",
		"--cluster-announce-port", pport, "--cluster-announce-bus-port", busPort)
	for _, n := range cl.Nodes {
		waitFor(t, n.Addr+" to announce the proxy", func() bool {
			out, err := n.Do(ctx, "CLUSTER", "SLOTS")
			return err == nil && strings.Contains(out, pport)
		})
	}
	s, err := redisstore.New(ctx, redisstore.Options{Addrs: cl.Addrs()[1:], FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the store to see the proxy as a master", func() bool {
		return slices.Contains(s.Nodes(), p.Addr())
	})
	return &topology{inner: s, target: p.Addr(), proxy: p, server: target.Proc,
		app: []string{"get", "mget", "set", "mset", "del"}, probe: "ping"}
}

func TestFaultsRedisCluster(t *testing.T) {
	for range rounds() {
		for _, f := range []fault{sigstop, sigkill, stall} {
			t.Run(f.name, func(t *testing.T) { run(t, clusterTopology(t), f) })
		}
	}
}

func TestFaultsMemcached(t *testing.T) {
	for range rounds() {
		for _, f := range []fault{sigstop, sigkill, stall, refuse} {
			t.Run(f.name, func(t *testing.T) { run(t, memcacheTopology(t), f) })
		}
	}
}

// A memcached pool whose third server is a black hole (it accepts and
// never answers) from the start: the server is found down, no application
// request reaches it afterwards, its keys come from the loader and the
// two real servers keep serving hits.
func TestFaultsMemcachedBlackHole(t *testing.T) {
	ms := servertest.MemcachedPool(t, 2, servers.MemcachedConfig{})
	bh := servertest.BlackHole(t)
	p := servertest.Proxy(t, bh.Addr(), faults.ProxyOptions{Protocol: faults.Memcache, DialTimeout: time.Second})
	goroutines := runtime.NumGoroutine()
	ctx := context.Background()
	nctx, cancel := context.WithTimeout(ctx, time.Second)
	s, err := memcache.New(nctx, memcache.Options{Servers: []string{ms[0].Addr, ms[1].Addr, p.Addr()}, MaxIdleConns: 64})
	cancel()
	must(t, err)
	hs, err := health.New(s, testOpts())
	must(t, err)
	c, err := kura.New[string](hs, kura.Options{StoreTimeout: time.Second})
	must(t, err)
	waitFor(t, "the black hole to be down", func() bool { st, _ := hs.State(p.Addr()); return st == health.Down })
	waitFor(t, "requests in flight to end", func() bool { return nodeStats(hs, p.Addr()).InFlight == 0 })
	before := p.Stats().Commands
	var loads, loadsHole atomic.Int64
	many := func(_ context.Context, ks []string) (map[string]string, error) {
		m := map[string]string{}
		for _, k := range ks {
			loads.Add(1)
			if s.NodeOf(k) == p.Addr() {
				loadsHole.Add(1)
			}
			m[k] = "v"
		}
		return m, nil
	}
	keys := make([]string, 60)
	for i := range keys {
		keys[i] = fmt.Sprintf("bh:%d", i)
	}
	var wg sync.WaitGroup
	var errs atomic.Int64
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				k := keys[(w+i)%len(keys)]
				if _, err := c.Fetch(ctx, k, 0, func(context.Context, string) (string, error) { return "v", nil }); err != nil {
					errs.Add(1)
				}
				if _, err := c.FetchMany(ctx, keys[i:i+5], 0, many); err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	after := p.Stats().Commands
	for _, cmd := range []string{"mg", "ms"} {
		if d := after[cmd] - before[cmd]; d != 0 {
			t.Errorf("%d %s requests reached the black hole after it was down", d, cmd)
		}
	}
	if errs.Load() != 0 {
		t.Errorf("%d callers saw an error", errs.Load())
	}
	if loadsHole.Load() == 0 || c.Stats().Hits == 0 {
		t.Errorf("loads of the black hole's keys %d, hits %d", loadsHole.Load(), c.Stats().Hits)
	}
	if nodeStats(hs, p.Addr()).Probes == 0 {
		t.Errorf("the black hole was never probed")
	}
	must(t, hs.Close())
	must(t, s.Close())
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutines })
}

// Connections reset in the middle of replies: the callers whose reply was
// cut get the loader's value, nobody sees an error, and the node is not
// taken down for it (its probes keep answering).
func TestFaultsResetMidReply(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) *topology{"redis": redisTopology, "memcached": memcacheTopology} {
		t.Run(name, func(t *testing.T) {
			tp := mk(t)
			hs, err := health.New(tp.inner, testOpts())
			must(t, err)
			defer hs.Close()
			defer tp.inner.Close()
			// Plain cache-aside: each cut read is followed by a write-back
			// that succeeds. With leases a cut read falls back to the
			// loader without writing (and may leave its lease behind), so
			// the cut replies would be consecutive failures, which rightly
			// take a node down.
			c, err := kura.New[string](hs, kura.Options{StoreTimeout: time.Second, Leases: kura.LeasesOff})
			must(t, err)
			ctx := context.Background()
			loader := func(_ context.Context, k string) (string, error) { return "v:" + k, nil }
			loc, _ := store.Find[store.NodeLocator](hs)
			var k string
			for i := 0; ; i++ {
				if k = fmt.Sprintf("reset:%d", i); loc.NodeOf(k) == tp.target {
					break
				}
			}
			if _, err := c.Fetch(ctx, k, 0, loader); err != nil {
				t.Fatal(err)
			}
			resets := tp.proxy.Stats().Resets
			for range 5 {
				tp.proxy.ResetNextReply(3)
				if v, err := c.Fetch(ctx, k, 0, loader); err != nil || v != "v:"+k {
					t.Fatalf("Fetch during resets = %q, %v", v, err)
				}
			}
			if tp.proxy.Stats().Resets == resets {
				t.Fatalf("no connection was reset")
			}
			waitFor(t, "the node to be up", func() bool { s, _ := hs.State(tp.target); return s == health.Up })
			if n := nodeStats(hs, tp.target).Transitions[health.Down]; n != 0 {
				t.Errorf("resets took the node down %d times", n)
			}
			hits := c.Stats().Hits
			waitFor(t, "a hit", func() bool { _, _ = c.Fetch(ctx, k, 0, loader); return c.Stats().Hits > hits })
		})
	}
}

// With cluster-require-full-coverage yes (Redis's default), a stopped
// master makes the whole cluster refuse key commands (CLUSTERDOWN) once
// the other masters agree it failed. Callers must still get every value,
// from the loader, and never an error; after the master returns, hits
// resume. This is what docs/health.md tells users to expect.
func TestFaultsRedisClusterFullCoverage(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for cluster-node-timeout (5 s)")
	}
	cl := servertest.RedisCluster(t)
	ctx := context.Background()
	goroutines := runtime.NumGoroutine()
	s, err := redisstore.New(ctx, redisstore.Options{Addrs: cl.Addrs(), FailFast: true})
	must(t, err)
	var downMu sync.Mutex
	var downs []string
	opts := testOpts()
	opts.OnStateChange = func(tr health.Transition) {
		if tr.To == health.Down {
			downMu.Lock()
			downs = append(downs, tr.Addr)
			downMu.Unlock()
		}
	}
	hs, err := health.New(s, opts)
	must(t, err)
	c, err := kura.New[string](hs, kura.Options{StoreTimeout: time.Second})
	must(t, err)
	target := cl.Nodes[0]
	var healthyKey string
	for i := 0; ; i++ {
		if healthyKey = fmt.Sprintf("cov:%d", i); s.NodeOf(healthyKey) != target.Addr && s.NodeOf(healthyKey) != "" {
			break
		}
	}
	var loads atomic.Int64
	loader := func(_ context.Context, k string) (string, error) { loads.Add(1); return "v:" + k, nil }
	fetch := func() {
		t.Helper()
		if v, err := c.Fetch(ctx, healthyKey, 0, loader); err != nil || v != "v:"+healthyKey {
			t.Fatalf("Fetch = %q, %v", v, err)
		}
	}
	fetch()
	must(t, target.Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = target.Resume()
		}
	}()
	other := cl.Nodes[1]
	waitFor(t, "the cluster to fail", func() bool {
		out, err := other.Do(ctx, "CLUSTER", "INFO")
		return err == nil && strings.Contains(out, "cluster_state:fail")
	})
	// A healthy master's key: the master answers CLUSTERDOWN, the caller
	// gets the loader's value.
	before := loads.Load()
	for range 20 {
		fetch()
	}
	if loads.Load() == before {
		t.Errorf("a key of a healthy master was served from the cache while the cluster was down")
	}
	must(t, target.Resume())
	resumed = true
	for _, n := range cl.Nodes {
		waitFor(t, n.Addr+" to be ok", func() bool {
			out, err := n.Do(ctx, "CLUSTER", "INFO")
			return err == nil && strings.Contains(out, "cluster_state:ok")
		})
	}
	waitFor(t, "a hit after the cluster recovered", func() bool {
		n := loads.Load()
		_, _ = c.Fetch(ctx, healthyKey, 0, loader)
		return loads.Load() == n
	})
	downMu.Lock()
	t.Logf("transitions to down: %v (the stopped master is %s)", downs, target.Addr)
	downMu.Unlock()
	must(t, hs.Close())
	must(t, s.Close())
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= goroutines })
}

// The Redis probe connection is opened with the store's own options: on a
// server that requires a password the probes succeed (a probe without
// the credentials would fail and take a healthy node down).
func TestProbeUsesCredentials(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{Password: "s3cret-probe"})
	ctx := context.Background()
	s, err := redisstore.NewFromURL(ctx, r.URL(), redisstore.Options{})
	must(t, err)
	defer s.Close()
	hs, err := health.New(s, testOpts())
	must(t, err)
	defer hs.Close()
	waitFor(t, "three probes", func() bool { return nodeStats(hs, r.Addr).Probes >= 3 })
	if st := nodeStats(hs, r.Addr); st.ProbeFailures != 0 || st.State != health.Up {
		t.Errorf("probes on a password-protected server: %+v", st)
	}
}

// Probes use one connection of their own per node, opened once and
// reused: counted at the proxy, ten probes cost one new connection and no
// application command.
func TestProbeConnection(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) *topology{"redis": redisTopology, "memcached": memcacheTopology} {
		t.Run(name, func(t *testing.T) {
			tp := mk(t)
			defer tp.inner.Close()
			// The store connects in the background: let it, so that
			// only the probes' connection is counted.
			cr, ok := store.Find[store.ConnReporter](tp.inner)
			if !ok {
				t.Fatal("no ConnReporter")
			}
			waitFor(t, "the store to connect", func() bool { return cr.ConnStats().Connected })
			before := tp.proxy.Stats()
			hs, err := health.New(tp.inner, testOpts())
			must(t, err)
			defer hs.Close()
			waitFor(t, "ten probes", func() bool { return nodeStats(hs, tp.target).Probes >= 10 })
			d := tp.proxy.Stats().Sub(before)
			// A probe that fails (one that outlasts ProbeTimeout on a
			// loaded machine) closes its connection, as documented, and
			// the next dials again: one connection, plus one per failure.
			if fails := nodeStats(hs, tp.target).ProbeFailures; d.Conns < 1 || uint64(d.Conns) > 1+fails {
				t.Errorf("probes opened %d connections after %d failed probes, want 1 + one per failure", d.Conns, fails)
			}
			if d.Commands[tp.probe] < 10 {
				t.Errorf("%d %s at the proxy for ten probes", d.Commands[tp.probe], tp.probe)
			}
			for _, c := range tp.app {
				if d.Commands[c] != 0 {
					t.Errorf("probing sent %d %s", d.Commands[c], c)
				}
			}
		})
	}
}
