package kuraotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/proctest"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/slot"
	"github.com/kuracache/kura/kuraotel"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/redisstore"
)

func redisStore(t *testing.T, addrs ...string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(context.Background(), redisstore.Options{Addrs: addrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newCache[V any](t *testing.T, s store.Store, r *recorder, opts kura.Options) *kura.Cache[V] {
	t.Helper()
	opts.Tracer = kuraotel.NewTracer(kuraotel.Options{TracerProvider: r.tp})
	c, err := kura.New[V](kuraotel.WrapStore(s, kuraotel.StoreOptions{TracerProvider: r.tp}), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestColdFetchWithLease: the span tree of a cold Fetch on Redis with a
// lease, the loader's database span nested under kura.load, and the
// attributes of the outcome and the backend.
func TestColdFetchWithLease(t *testing.T) {
	rs := servertest.Redis(t, servers.RedisConfig{})
	r := newRecorder(t)
	c := newCache[string](t, redisStore(t, rs.Addr), r, kura.Options{})
	ctx, req := r.request(context.Background())
	v, err := c.Fetch(ctx, "user:1", time.Minute, func(ctx context.Context, key string) (string, error) {
		_, db := r.tp.Tracer("db").Start(ctx, "SELECT users")
		db.End()
		return "ada", nil
	})
	req.End()
	if err != nil || v != "ada" {
		t.Fatalf("Fetch = %q, %v", v, err)
	}
	got := tree(r.spans(), "request")
	want := `request
  kura.Fetch
    kura.lease.acquire
      GET
      kura.store.LeaseGet
        SET
    kura.load
      SELECT users
    kura.fill
      kura.store.Fill
        EVALSHA
`
	// The lease read is one LeaseGet: a GET, then SET NX for a miss.
	want = strings.Replace(want, "      GET\n      kura.store.LeaseGet\n        SET\n", "      kura.store.LeaseGet\n        SET\n", 1)
	if got != want {
		t.Fatalf("span tree:\n%s\nwant:\n%s", got, want)
	}
	f := r.named("kura.Fetch")[0]
	if v := mustAttr(t, f, "kura.outcome").AsString(); v != "miss" {
		t.Errorf("kura.outcome = %q, want miss", v)
	}
	if v := mustAttr(t, f, "kura.lease.won").AsInt64(); v != 1 {
		t.Errorf("kura.lease.won = %d", v)
	}
	if _, ok := attr(f, "kura.key"); ok {
		t.Error("the key is recorded without Options.Keys")
	}
	set := r.named("SET")[0]
	if v := mustAttr(t, set, "db.system.name").AsString(); v != "redis" {
		t.Errorf("db.system.name = %q", v)
	}
	if p := mustAttr(t, set, "server.port").AsInt64(); fmt.Sprint(p) != rs.Addr[strings.LastIndexByte(rs.Addr, ':')+1:] {
		t.Errorf("server.port = %d, server %s", p, rs.Addr)
	}
	// A hit: kura.Fetch with outcome hit, one GET under the lease read.
	ctx, req = r.request(context.Background())
	if _, err := c.Fetch(ctx, "user:1", time.Minute, nil2[string]); err != nil {
		t.Fatal(err)
	}
	req.End()
	last := r.named("kura.Fetch")[1]
	if v := mustAttr(t, last, "kura.outcome").AsString(); v != "hit" {
		t.Errorf("hit: kura.outcome = %q", v)
	}
	for _, s := range r.spans() {
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.String(), "ada") {
				t.Errorf("span %s holds the cached value in %s", s.Name, a.Key)
			}
		}
	}
}

func nil2[V any](context.Context, string) (V, error) {
	var zero V
	return zero, errors.New("loader called on a hit")
}

// holdArgs are the holder process's arguments.
type holdArgs struct {
	Addr, Key string
	Hold      time.Duration
}

// holdWorker takes the lease on Key in its own process, reports, and
// fills after Hold.
func holdWorker(ctx context.Context, c *proctest.Child) error {
	var a holdArgs
	if err := c.Args(&a); err != nil {
		return err
	}
	s, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{a.Addr}})
	if err != nil {
		return err
	}
	defer s.Close()
	cache, err := kura.New[string](s, kura.Options{LeaseWait: time.Minute})
	if err != nil {
		return err
	}
	if err := c.Ready(ctx); err != nil {
		return err
	}
	_, err = cache.Fetch(ctx, a.Key, time.Minute, func(ctx context.Context, _ string) (string, error) {
		if err := c.Report("loading"); err != nil {
			return "", err
		}
		time.Sleep(a.Hold)
		return "from the holder", nil
	})
	return err
}

// TestWaiterInAnotherProcess: another process holds the lease; this
// process's Fetch waits for its fill: a kura.lease.wait span with the
// time waited, and no load here. The holder's trace is not linked.
func TestWaiterInAnotherProcess(t *testing.T) {
	rs := servertest.Redis(t, servers.RedisConfig{})
	a := holdArgs{Addr: rs.Addr, Key: "held:1", Hold: 300 * time.Millisecond}
	g := proctest.Start(t, "hold", 1, a, proctest.Options{Timeout: time.Minute})
	if err := g.Go(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := g.WaitReport(wctx, func(proctest.Report) bool { return true }); err != nil {
		t.Fatal(err)
	}
	r := newRecorder(t)
	c := newCache[string](t, redisStore(t, rs.Addr), r, kura.Options{LeaseWait: 20 * time.Second})
	ctx, req := r.request(context.Background())
	v, err := c.Fetch(ctx, a.Key, time.Minute, nil2[string])
	req.End()
	g.WaitOK(t)
	if err != nil || v != "from the holder" {
		t.Fatalf("Fetch = %q, %v", v, err)
	}
	got := tree(r.spans(), "request")
	if !strings.Contains(got, "    kura.lease.wait\n") || strings.Contains(got, "kura.load") {
		t.Fatalf("span tree:\n%s\nwant a kura.lease.wait under kura.Fetch and no kura.load", got)
	}
	w := r.named("kura.lease.wait")[0]
	if d := mustAttr(t, w, "kura.lease.wait").AsFloat64(); d <= 0 || d > 20 {
		t.Errorf("kura.lease.wait = %v s", d)
	}
	f := r.named("kura.Fetch")[0]
	if v := mustAttr(t, f, "kura.lease.held").AsInt64(); v != 1 {
		t.Errorf("kura.lease.held = %d", v)
	}
	if len(f.Links) != 0 {
		t.Errorf("the waiter's span is linked to %v: another process's holder is not linked", f.Links)
	}
}

// TestFetchManyCluster: a FetchMany over a 3-master Cluster reads with
// one client span per master, whose kura.commands count one MGET per
// hash slot.
func TestFetchManyCluster(t *testing.T) {
	t.Parallel() // server-bound: runs beside the other server tests
	cl := servertest.RedisCluster(t)
	r := newRecorder(t)
	c := newCache[int](t, redisStore(t, cl.Addrs()...), r, kura.Options{})
	keys := make([]string, 24)
	slots := map[uint16]bool{}
	for i := range keys {
		keys[i] = fmt.Sprintf("item:%d", i)
		slots[slot.Of(keys[i])] = true
	}
	load := func(ctx context.Context, missing []string) (map[string]int, error) {
		out := map[string]int{}
		for i, k := range missing {
			out[k] = i
		}
		return out, nil
	}
	// Warm the slot map, then read cold keys and hits.
	if _, err := c.FetchMany(context.Background(), keys, time.Minute, load); err != nil {
		t.Fatal(err)
	}
	ctx, req := r.request(context.Background())
	if _, err := c.FetchMany(ctx, keys, time.Minute, load); err != nil {
		t.Fatal(err)
	}
	req.End()
	spans := r.spans()
	fm := r.named("kura.FetchMany")[0]
	if n := mustAttr(t, fm, "kura.keys").AsInt64(); n != int64(len(keys)) {
		t.Errorf("kura.keys = %d", n)
	}
	if n := mustAttr(t, fm, "kura.hits").AsInt64(); n != int64(len(keys)) {
		t.Errorf("kura.hits = %d, want %d", n, len(keys))
	}
	lg := r.named("kura.store.LeaseGet")[0]
	mgets := childrenOf(spans, lg)
	masters := map[string]bool{}
	cmds := int64(0)
	for _, m := range mgets {
		if m.Name != "MGET" {
			t.Errorf("child %s of the lease read", m.Name)
			continue
		}
		masters[fmt.Sprint(mustAttr(t, m, "server.port").AsInt64())] = true
		cmds += mustAttr(t, m, "kura.commands").AsInt64()
	}
	t.Logf("%d keys in %d slots: %d MGET spans on %d masters", len(keys), len(slots), len(mgets), len(masters))
	if len(mgets) != 3 || len(masters) != 3 {
		t.Errorf("%d MGET spans on %d masters, want one per master (3):\n%s", len(mgets), len(masters), tree(spans, "request"))
	}
	if cmds != int64(len(slots)) {
		t.Errorf("the MGET spans count %d commands, want one per slot (%d)", cmds, len(slots))
	}
}

// TestIndexRead: an Index read is a kura.Index.Fetch span over the id
// list's kura.Fetch and the records' kura.FetchMany.
func TestIndexRead(t *testing.T) {
	r := newRecorder(t)
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newCache[string](t, ms, r, kura.Options{})
	recs, err := kura.NewKeyed[int](c, kura.KeyedOptions[int]{Prefix: "user:"})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := kura.NewIndex(recs, kura.IndexOptions[string, int, string]{Prefix: "by-team:",
		LoadIDs: func(ctx context.Context, team string) ([]int, error) { return []int{1, 2}, nil },
		LoadRecords: func(ctx context.Context, ids []int) (map[int]string, error) {
			return map[int]string{1: "ada", 2: "grace"}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, req := r.request(context.Background())
	got, err := idx.Fetch(ctx, "blue")
	req.End()
	if err != nil || len(got) != 2 {
		t.Fatalf("Index.Fetch = %v, %v", got, err)
	}
	want := `request
  kura.Index.Fetch
    kura.Fetch
      kura.lookup
        Get
      kura.load
      kura.fill
        Set
    kura.FetchMany
      kura.lookup
        kura.store.GetMany
      kura.load
      kura.fill
        kura.store.SetMany
`
	if s := tree(r.spans(), "request"); s != want {
		t.Fatalf("span tree:\n%s\nwant:\n%s", s, want)
	}
}

// TestNodeDown: with the breaker's circuit open, the absorbed failure is
// on the lookup span (error.type node_down, the node), and the Fetch is
// served by the loader.
func TestNodeDown(t *testing.T) {
	rs := servertest.Redis(t, servers.RedisConfig{})
	hs, err := health.New(redisStore(t, rs.Addr), health.Options{ProbeInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hs.Close() })
	r := newRecorder(t)
	c := newCache[string](t, hs, r, kura.Options{})
	rs.Stop()
	servertest.Eventually(t, "the node is down", func() error {
		if st, _ := hs.State(rs.Addr); st != health.Down {
			return fmt.Errorf("state %v", st)
		}
		return nil
	})
	ctx, req := r.request(context.Background())
	v, err := c.Fetch(ctx, "k", time.Minute, func(context.Context, string) (string, error) { return "loaded", nil })
	req.End()
	if err != nil || v != "loaded" {
		t.Fatalf("Fetch = %q, %v", v, err)
	}
	var found bool
	for _, s := range r.spans() {
		for _, e := range s.Events {
			if e.Name != "kura.store.error" {
				continue
			}
			for _, a := range e.Attributes {
				if a.Key == "error.type" && a.Value.AsString() == "node_down" {
					found = true
					if _, ok := attr(s, "kura.node.down"); !ok {
						t.Errorf("span %s: node_down event without kura.node.down", s.Name)
					}
				}
			}
		}
	}
	if !found {
		t.Fatalf("no kura.store.error event with error.type node_down:\n%s", tree(r.spans(), "request"))
	}
	ls := r.named("kura.store.LeaseGet")
	if len(ls) == 0 {
		t.Fatal("no store span")
	}
	if v := mustAttr(t, ls[0], "error.type").AsString(); v != "node_down" {
		t.Errorf("store span error.type = %q", v)
	}
}

// TestPanickingLoader: a loader's panic is recorded as an error on
// kura.load and kura.Fetch, then re-raised to the caller.
func TestPanickingLoader(t *testing.T) {
	r := newRecorder(t)
	ms, _ := memstore.New(memstore.Options{})
	c := newCache[string](t, ms, r, kura.Options{})
	ctx, req := r.request(context.Background())
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		_, _ = c.Fetch(ctx, "boom", time.Minute, func(context.Context, string) (string, error) { panic("secret 4111") })
	}()
	req.End()
	for _, name := range []string{"kura.load", "kura.Fetch"} {
		s := r.named(name)
		if len(s) != 1 {
			t.Fatalf("%d %s spans", len(s), name)
		}
		if s[0].Status.Code.String() != "Error" || mustAttr(t, s[0], "error.type").AsString() != "panic" {
			t.Errorf("%s: status %v, attributes %v", name, s[0].Status, s[0].Attributes)
		}
		if strings.Contains(fmt.Sprint(s[0]), "4111") {
			t.Errorf("%s records the panic's value", name)
		}
	}
}

// TestBackgroundRefresh: an early refresh on memcached is a new root
// span linked to the Fetch that started it.
func TestBackgroundRefresh(t *testing.T) {
	mc := servertest.Memcached(t, servers.MemcachedConfig{})
	s, err := memcache.New(context.Background(), memcache.Options{Servers: []string{mc.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r := newRecorder(t)
	c := newCache[string](t, s, r, kura.Options{EarlyRefresh: time.Hour})
	load := func(context.Context, string) (string, error) { return "v", nil }
	if _, err := c.Fetch(context.Background(), "hot", time.Minute, load); err != nil {
		t.Fatal(err)
	}
	ctx, req := r.request(context.Background())
	if _, err := c.Fetch(ctx, "hot", time.Minute, load); err != nil {
		t.Fatal(err)
	}
	req.End()
	ref := r.waitFor(t, "kura.refresh")
	f := r.named("kura.Fetch")[0]
	if ref.Parent.IsValid() {
		t.Errorf("kura.refresh has a parent %v: it must be a root", ref.Parent.SpanID())
	}
	if len(ref.Links) != 1 || ref.Links[0].SpanContext.SpanID() != f.SpanContext.SpanID() {
		t.Errorf("kura.refresh links %v, want the kura.Fetch span %v", ref.Links, f.SpanContext.SpanID())
	}
	if v := mustAttr(t, f, "kura.refreshed").AsInt64(); v != 1 {
		t.Errorf("kura.refreshed = %d", v)
	}
	if !strings.Contains(tree(r.spans(), "kura.refresh"), "  kura.load\n") {
		t.Errorf("refresh tree:\n%s", tree(r.spans(), "kura.refresh"))
	}
}

// TestGetOutcome: a kura.Get span says what the read found, as a
// kura.Fetch does: miss (nothing cached: ErrNotFound, not an error),
// hit, negative_hit (cached as absent), l1_hit.
func TestGetOutcome(t *testing.T) {
	for _, l1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("L1 %v", l1), func(t *testing.T) {
			r := newRecorder(t)
			ms, _ := memstore.New(memstore.Options{})
			opts := kura.Options{}
			if l1 {
				opts.L1 = kura.L1Options{MaxBytes: 1 << 20, MaxStaleness: time.Minute}
			}
			c := newCache[string](t, ms, r, opts)
			bg := context.Background()
			if err := c.Set(bg, "present", "v", time.Minute); err != nil {
				t.Fatal(err)
			}
			absent := func(context.Context, string) (string, error) { return "", kura.ErrNotFound }
			if _, err := c.Fetch(bg, "absent", time.Minute, absent); !errors.Is(err, kura.ErrNotFound) {
				t.Fatalf("Fetch of an absent key = %v", err)
			}
			get := func(key string) tracetest.SpanStub {
				t.Helper()
				r.exp.Reset()
				ctx, req := r.request(bg)
				_, _ = c.Get(ctx, key)
				req.End()
				s := r.named("kura.Get")
				if len(s) != 1 {
					t.Fatalf("%d kura.Get spans", len(s))
				}
				return s[0]
			}
			want := map[string]string{"nothing": "miss", "present": "hit", "absent": "negative_hit"}
			if l1 {
				// The first Get fills the L1; the second is served by it.
				get("present")
				get("absent")
				want["present"], want["absent"] = "l1_hit", "l1_hit"
			}
			for key, outcome := range want {
				s := get(key)
				if got := mustAttr(t, s, "kura.outcome").AsString(); got != outcome {
					t.Errorf("Get(%s): kura.outcome = %q, want %q", key, got, outcome)
				}
				if s.Status.Code.String() == "Error" {
					t.Errorf("Get(%s): status %v: an answer is not an error", key, s.Status)
				}
			}
		})
	}
}
