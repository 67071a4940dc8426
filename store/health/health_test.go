package health_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/memstore"
)

// twoNodes is an in-process store with two pretend nodes: keys starting
// with "a" live on node "a", the others on "b". A node can be made to
// fail its requests and its probes, and every request is counted per node.
type twoNodes struct {
	store.Store
	broken   [2]atomic.Bool
	requests [2]atomic.Int64
	probes   [2]atomic.Int64
	inFlight [2]atomic.Int32 // probes in flight
	overlap  atomic.Bool     // two probes of one node at once
}

var errBroken = errors.New("connection refused")

func newTwoNodes(t *testing.T) *twoNodes {
	m, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return &twoNodes{Store: m}
}

func idx(addr string) int {
	if addr == "a" {
		return 0
	}
	return 1
}

func (s *twoNodes) NodeOf(key string) string {
	if strings.HasPrefix(key, "a") {
		return "a"
	}
	return "b"
}

func (s *twoNodes) Nodes() []string { return []string{"a", "b"} }

func (s *twoNodes) ProbeNode(ctx context.Context, addr string) error {
	i := idx(addr)
	if s.inFlight[i].Add(1) > 1 {
		s.overlap.Store(true)
	}
	defer s.inFlight[i].Add(-1)
	s.probes[i].Add(1)
	if s.broken[i].Load() {
		return &store.NodeError{Addr: addr, Err: errBroken}
	}
	return nil
}

func (s *twoNodes) check(key string) error {
	i := idx(s.NodeOf(key))
	s.requests[i].Add(1)
	if s.broken[i].Load() {
		return &store.NodeError{Addr: s.NodeOf(key), Err: errBroken}
	}
	return nil
}

func (s *twoNodes) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.check(key); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key)
}

func (s *twoNodes) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	if err := s.check(key); err != nil {
		return err
	}
	return s.Store.Set(ctx, key, v, ttl)
}

func fastOpts() health.Options {
	return health.Options{ProbeInterval: 5 * time.Millisecond, ProbeTimeout: time.Second,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond, NodeRefresh: 10 * time.Millisecond}
}

func TestBreakerDownFailFastAndRecovery(t *testing.T) {
	ns := newTwoNodes(t)
	var mu sync.Mutex
	var seen []string
	opts := fastOpts()
	opts.OnStateChange = func(tr health.Transition) {
		mu.Lock()
		seen = append(seen, tr.Addr+":"+tr.From.String()+">"+tr.To.String())
		mu.Unlock()
	}
	hs, err := health.New(ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	c, err := kura.New[string](hs, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var loads atomic.Int64
	loader := func(_ context.Context, k string) (string, error) { loads.Add(1); return "v" + k, nil }
	many := func(_ context.Context, ks []string) (map[string]string, error) {
		m := map[string]string{}
		for _, k := range ks {
			loads.Add(1)
			m[k] = "v" + k
		}
		return m, nil
	}
	if _, err := c.FetchMany(ctx, []string{"a1", "b1"}, 0, many); err != nil {
		t.Fatal(err)
	}

	ns.broken[0].Store(true)
	waitFor(t, "a to be down", func() bool { s, _ := hs.State("a"); return s == health.Down })
	before := ns.requests[0].Load()
	loads.Store(0)
	v, err := c.Fetch(ctx, "a1", 0, loader)
	if err != nil || v != "va1" {
		t.Fatalf("Fetch on a down node = %q, %v", v, err)
	}
	m, err := c.FetchMany(ctx, []string{"a1", "b1"}, 0, many)
	if err != nil || m["a1"] != "va1" || m["b1"] != "vb1" {
		t.Fatalf("FetchMany across a down node = %v, %v", m, err)
	}
	if n := ns.requests[0].Load() - before; n != 0 {
		t.Errorf("%d requests reached the down node", n)
	}
	if n := loads.Load(); n != 2 {
		t.Errorf("loader called for %d keys, want 2 (a1 twice; b1 was a hit)", n)
	}
	if _, err := hs.Get(ctx, "a1"); !errors.Is(err, health.ErrNodeDown) || store.AsNodeError(err).Addr != "a" {
		t.Errorf("Get on a down node = %v, want ErrNodeDown on a", err)
	}
	_, err = hs.GetMany(ctx, []string{"a1", "b1"})
	var be *store.BatchError
	if !errors.As(err, &be) || len(be.Errors) != 1 || be.Errors[0].Key != "a1" || be.Errors[0].Addr != "a" {
		t.Errorf("GetMany across a down node = %v, want one KeyError for a1 on a", err)
	}
	if s, _ := hs.State("b"); s != health.Up {
		t.Errorf("b is %v", s)
	}

	ns.broken[0].Store(false)
	waitFor(t, "a to be up", func() bool { s, _ := hs.State("a"); return s == health.Up })
	loads.Store(0)
	if _, err := c.Fetch(ctx, "a1", 0, loader); err != nil {
		t.Fatal(err)
	}
	if loads.Load() != 0 {
		t.Errorf("no hit after recovery")
	}
	hs.Close()
	if ns.overlap.Load() {
		t.Errorf("two probes of one node were in flight at once")
	}
	mu.Lock()
	got := strings.Join(seen, " ")
	mu.Unlock()
	if want := "a:up>suspect a:suspect>down a:down>probing a:probing>up"; got != want {
		t.Errorf("transitions %q, want %q", got, want)
	}
	st := hs.Stats()
	if len(st.Nodes) != 2 || st.Nodes[0].Transitions[health.Down] != 1 || st.Nodes[0].FailFast == 0 ||
		st.Nodes[0].ProbeFailures == 0 || st.Nodes[1].Probes == 0 {
		t.Errorf("stats %+v", st)
	}
}

// Requests alone take a node down when no probe has failed yet (probes
// here never run in time: the interval is long).
func TestBreakerRequestFailures(t *testing.T) {
	ns := newTwoNodes(t)
	opts := fastOpts()
	opts.ProbeInterval = time.Hour
	opts.FailureThreshold = 3
	hs, err := health.New(ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	ctx := context.Background()
	// The probe a Suspect node gets at once fails too: break probes
	// only after it, by failing the node's requests through a canceled
	// context first (not a node failure) and checking nothing changed.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for range 5 {
		_ = hs.Set(cctx, "a1", []byte("x"), 0)
	}
	if s, _ := hs.State("a"); s != health.Up {
		t.Fatalf("a canceled context made a %v", s)
	}
	ns.broken[0].Store(true)
	for range 3 {
		_, _ = hs.Get(ctx, "a1")
	}
	waitFor(t, "a to be down", func() bool { s, _ := hs.State("a"); return s == health.Down })
	if st := hs.Stats().Nodes[0]; st.RequestFailures < 1 {
		t.Errorf("request failures not counted: %+v", st)
	}
}

func TestGutter(t *testing.T) {
	ns := newTwoNodes(t)
	gutter, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gutter.Close()
	opts := fastOpts()
	opts.Gutter = gutter
	opts.GutterTTL = time.Minute
	hs, err := health.New(ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	ctx := context.Background()
	ns.broken[0].Store(true)
	waitFor(t, "a to be down", func() bool { s, _ := hs.State("a"); return s == health.Down })
	if err := hs.Set(ctx, "a1", []byte("g"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if b, err := gutter.Get(ctx, "a1"); err != nil || string(b) != "g" {
		t.Fatalf("gutter holds %q, %v", b, err)
	}
	if b, err := hs.Get(ctx, "a1"); err != nil || string(b) != "g" {
		t.Errorf("Get through the gutter = %q, %v", b, err)
	}
	vals, err := hs.GetMany(ctx, []string{"a1", "a2"})
	if err != nil || string(vals[0]) != "g" || vals[1] != nil {
		t.Errorf("GetMany through the gutter = %q, %v", vals, err)
	}
	if err := hs.Delete(ctx, "a1"); !errors.Is(err, health.ErrNodeDown) {
		t.Errorf("Delete on a down node with a gutter = %v, want ErrNodeDown (the node keeps its copy)", err)
	}
	if _, err := gutter.Get(ctx, "a1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("gutter copy survived Delete: %v", err)
	}
	if st := hs.Stats(); st.GutterHits != 2 || st.GutterMisses != 1 {
		t.Errorf("gutter counters %+v", st)
	}
}

func TestOptionsAndNew(t *testing.T) {
	ns := newTwoNodes(t)
	for _, o := range []health.Options{
		{ProbeTimeout: -1}, {FailureThreshold: -1}, {RecoverAfter: -2},
		{BackoffMin: time.Second, BackoffMax: time.Millisecond},
	} {
		if _, err := health.New(ns, o); err == nil || !strings.Contains(err.Error(), "Options.") {
			t.Errorf("New(%+v) = %v, want an error naming the field", o, err)
		}
	}
	m, _ := memstore.New(memstore.Options{})
	defer m.Close()
	if _, err := health.New(m, health.Options{}); err == nil {
		t.Errorf("New on a store without nodes succeeded")
	}
	if !health.DefaultIsFailure(context.DeadlineExceeded) || health.DefaultIsFailure(store.ErrNotFound) ||
		health.DefaultIsFailure(context.Canceled) || health.DefaultIsFailure(nil) {
		t.Errorf("DefaultIsFailure misclassifies")
	}
	hs, err := health.New(ns, health.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := store.Find[*twoNodes](hs); !ok || u != ns {
		t.Errorf("Find does not see through the breaker")
	}
	if err := hs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := hs.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if health.Down.String() != "down" || health.State(9).String() != "State(9)" {
		t.Errorf("State.String")
	}
}

// A node that fails and comes back again and again goes down and up each
// time, and its back-off starts from BackoffMin after every recovery.
func TestBreakerFlapping(t *testing.T) {
	ns := newTwoNodes(t)
	hs, err := health.New(ns, fastOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	const flaps = 5
	for i := range flaps {
		ns.broken[0].Store(true)
		waitFor(t, fmt.Sprintf("a to be down (flap %d)", i), func() bool { s, _ := hs.State("a"); return s == health.Down })
		ns.broken[0].Store(false)
		waitFor(t, fmt.Sprintf("a to be up (flap %d)", i), func() bool { s, _ := hs.State("a"); return s == health.Up })
	}
	st := hs.Stats().Nodes[0]
	if st.Transitions[health.Down] != flaps || st.Transitions[health.Up] != flaps {
		t.Errorf("transitions %v after %d flaps", st.Transitions, flaps)
	}
	if s, _ := hs.State("b"); s != health.Up || hs.Stats().Nodes[1].Transitions[health.Down] != 0 {
		t.Errorf("b was affected: %v %v", s, hs.Stats().Nodes[1].Transitions)
	}
}
