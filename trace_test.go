package kura_test

import (
	"context"
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
