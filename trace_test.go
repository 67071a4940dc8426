package kura_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/redisstore"
)

// countingTracer is an observe.Tracer that counts every call the read
// path makes of it; it records (returns a Span) only when record is set.
type countingTracer struct {
	record   bool
	starts   [observe.NumSteps]atomic.Int64
	notes    atomic.Int64 // Tracer.Note and Span.Note
	absorbed atomic.Int64
}

func (t *countingTracer) Start(ctx context.Context, step observe.Step, _ string, _ int) (context.Context, observe.Span) {
	t.starts[step].Add(1)
	if !t.record {
		return ctx, nil
	}
	return ctx, countingSpan{t}
}

func (t *countingTracer) Note(context.Context, observe.Note, int64) { t.notes.Add(1) }

func (t *countingTracer) Absorbed(context.Context, string, error) { t.absorbed.Add(1) }

// calls returns the calls counted since the last reset: the starts per
// step and, in others, every other call (notes, absorbed failures).
func (t *countingTracer) calls() (starts map[observe.Step]int64, others int64) {
	starts = map[observe.Step]int64{}
	for s := range t.starts {
		if n := t.starts[s].Load(); n > 0 {
			starts[observe.Step(s)] = n
		}
	}
	return starts, t.notes.Load() + t.absorbed.Load()
}

func (t *countingTracer) reset() {
	for s := range t.starts {
		t.starts[s].Store(0)
	}
	t.notes.Store(0)
	t.absorbed.Store(0)
}

type countingSpan struct{ t *countingTracer }

func (s countingSpan) Note(observe.Note, int64) { s.t.notes.Add(1) }
func (s countingSpan) End(error)                {}

// TestUnrecordedFetchAsksTracerOnce: a Fetch or FetchMany hit that its
// Tracer does not record (a request the sampler dropped) asks the Tracer
// exactly once, for the call's own span: none of its steps asks again
// (the unsampled overhead of issue 27, BENCHMARKS.md "OpenTelemetry").
// The same hits recorded start their steps' spans and note their
// outcome, so the count is not the tracer's silence.
func TestUnrecordedFetchAsksTracerOnce(t *testing.T) {
	rs := servertest.Redis(t, servers.RedisConfig{})
	stores := []struct {
		name     string
		open     func(t *testing.T) store.Store
		l1       bool
		wantStep observe.Step // the lookup's step of a recorded store hit
	}{
		{"memstore", openMemstore, false, observe.Lookup},
		{"memstore+L1", openMemstore, true, 0},
		{"redis", func(t *testing.T) store.Store {
			s, err := redisstore.New(context.Background(), redisstore.Options{Addrs: []string{rs.Addr}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}, false, observe.LeaseAcquire},
	}
	const n = 50
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			tr := &countingTracer{}
			opts := kura.Options{Tracer: tr}
			if st.l1 {
				opts.L1 = kura.L1Options{MaxBytes: 1 << 20, MaxStaleness: time.Minute}
			}
			c, err := kura.New[string](st.open(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			ctx := context.Background()
			keys := []string{"a", "b", "c"}
			if _, err := c.FetchMany(ctx, keys, time.Hour, manyValues); err != nil {
				t.Fatal(err)
			}
			hits := func() {
				t.Helper()
				tr.reset()
				for range n {
					if _, err := c.Fetch(ctx, "a", time.Hour, oneValue); err != nil {
						t.Fatal(err)
					}
					if _, err := c.FetchMany(ctx, keys, time.Hour, manyValues); err != nil {
						t.Fatal(err)
					}
				}
			}
			hits()
			starts, others := tr.calls()
			t.Logf("unrecorded: starts %v, other calls %d", starts, others)
			if len(starts) != 2 || starts[observe.Fetch] != n || starts[observe.FetchMany] != n || others != 0 {
				t.Errorf("%d unrecorded Fetch and FetchMany hits asked the tracer: starts %v, notes/absorbed %d; want %d kura.Fetch and %d kura.FetchMany starts and nothing else",
					n, starts, others, n, n)
			}

			tr.record = true
			hits()
			starts, others = tr.calls()
			t.Logf("recorded: starts %v, other calls %d", starts, others)
			// An L1 hit is kura.Fetch alone, with its note; a store hit
			// has its lookup's span too.
			if !st.l1 && starts[st.wantStep] != 2*n {
				t.Errorf("recorded hits started %d %s spans, want %d", starts[st.wantStep], st.wantStep, 2*n)
			}
			if starts[observe.Fetch] != n || starts[observe.FetchMany] != n || others < 2*n {
				t.Errorf("recorded hits: starts %v, notes %d; want %d of each call and at least one note per call", starts, others, n)
			}
		})
	}
}

func openMemstore(t *testing.T) store.Store {
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func oneValue(_ context.Context, key string) (string, error) { return "v:" + key, nil }

func manyValues(_ context.Context, keys []string) (map[string]string, error) {
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = "v:" + k
	}
	return m, nil
}

// TestMissStartsOneSpanPerStep: a Fetch or FetchMany miss that its Tracer
// does not record asks the Tracer once, for the call's own span, like a
// hit: its load, its fill and a wait for another caller's lease are steps
// of a call that is not recorded, and asking for them only got nil spans
// back (they were asked before). Recorded, the same misses start one span
// per step they run and no more: the call's, the lookup's (with leases,
// kura.lease.acquire), kura.load and kura.fill; a caller that waits for
// another's lease starts kura.lease.wait instead of the load and fill.
func TestMissStartsOneSpanPerStep(t *testing.T) {
	rs := servertest.Redis(t, servers.RedisConfig{})
	openRedis := func(t *testing.T) store.Store {
		s, err := redisstore.New(context.Background(), redisstore.Options{Addrs: []string{rs.Addr}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	for _, st := range []struct {
		name   string
		open   func(t *testing.T) store.Store
		lookup observe.Step
	}{
		{"memstore", openMemstore, observe.Lookup},
		{"redis", openRedis, observe.LeaseAcquire},
	} {
		for _, record := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/recorded=%v", st.name, record), func(t *testing.T) {
				tr := &countingTracer{record: record}
				c, err := kura.New[string](st.open(t), kura.Options{Tracer: tr})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				ctx := context.Background()
				const n = 20
				for i := range n {
					if _, err := c.Fetch(ctx, fmt.Sprintf("one-%v-%d", record, i), time.Hour, oneValue); err != nil {
						t.Fatal(err)
					}
					if _, err := c.FetchMany(ctx, []string{fmt.Sprintf("a-%v-%d", record, i), fmt.Sprintf("b-%v-%d", record, i)}, time.Hour, manyValues); err != nil {
						t.Fatal(err)
					}
				}
				starts, _ := tr.calls()
				t.Logf("%d Fetch and %d FetchMany misses: starts %v", n, n, starts)
				want := map[observe.Step]int64{observe.Fetch: n, observe.FetchMany: n}
				if record {
					want[st.lookup], want[observe.Load], want[observe.Fill] = 2*n, 2*n, 2*n
				}
				if !maps.Equal(starts, want) {
					t.Errorf("starts %v, want %v", starts, want)
				}
			})
		}
	}
	// A caller that waits for another process's lease (a second Cache on
	// the same Redis, whose loader holds it) starts no kura.lease.wait
	// when its call is not recorded, and one when it is.
	for _, record := range []bool{false, true} {
		t.Run(fmt.Sprintf("lease-wait/recorded=%v", record), func(t *testing.T) {
			holder, err := kura.New[string](openRedis(t), kura.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = holder.Close() })
			tr := &countingTracer{record: record}
			waiter, err := kura.New[string](openRedis(t), kura.Options{Tracer: tr, LeaseWait: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = waiter.Close() })
			ctx := context.Background()
			key := fmt.Sprintf("held-%v", record)
			loading, release := make(chan struct{}), make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := holder.Fetch(ctx, key, time.Hour, func(context.Context, string) (string, error) {
					close(loading)
					<-release
					return "held", nil
				})
				done <- err
			}()
			<-loading
			got := make(chan error, 1)
			go func() {
				v, err := waiter.Fetch(ctx, key, time.Hour, func(context.Context, string) (string, error) { return "", errors.New("the waiter loaded") })
				if err == nil && v != "held" {
					err = fmt.Errorf("waiter read %q", v)
				}
				got <- err
			}()
			servertest.Eventually(t, "the waiter waits for the lease", func() error {
				if waiter.Stats().LeaseWaits == 0 {
					return errors.New("not waiting yet")
				}
				return nil
			})
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
			starts, _ := tr.calls()
			t.Logf("a waiter's Fetch: starts %v", starts)
			want := map[observe.Step]int64{observe.Fetch: 1}
			if record {
				want[observe.LeaseAcquire], want[observe.LeaseWait] = 1, 1
			}
			if !maps.Equal(starts, want) {
				t.Errorf("starts %v, want %v", starts, want)
			}
		})
	}
}
