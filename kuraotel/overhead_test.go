package kuraotel_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/kuraotel"
	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/redisstore"
)

// tracing is one way of running a Cache for the overhead measurements.
type tracing struct {
	name string
	tp   func() trace.TracerProvider // nil: no provider at all
	// untraced: kura has no tracer (tp only makes the request span).
	untraced bool
	// sampled runs the calls inside a sampled request span; parent
	// inside the provider's request span whether or not it is sampled
	// (a request that middleware traced, and the sampler dropped).
	sampled, parent bool
}

// unsampledProvider samples ParentBased(NeverSample): nothing is sampled.
func unsampledProvider() trace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())),
		sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
}

var tracings = []tracing{
	{name: "off"},
	// No span in the caller's context.
	{name: "unsampled", tp: unsampledProvider},
	{name: "sampled", sampled: true, tp: func() trace.TracerProvider {
		// A batcher over a discarding exporter: the cost of making and
		// ending spans, not of keeping them.
		return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(discard{}))
	}},
	// The caller's context holds the request's span, which the sampler
	// did not sample (a valid span context, not recording), without and
	// with kuraotel. A context that is not context.Background costs the
	// read path's budget an allocation either way, hence the own baseline.
	{name: "off_parent", parent: true, untraced: true, tp: unsampledProvider},
	{name: "unsampled_parent", parent: true, tp: unsampledProvider},
}

// baselines pairs each unsampled variant with its tracer-less baseline
// (indexes into tracings).
var baselines = [][2]int{{0, 1}, {3, 4}}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// open returns the Cache over s with tr's tracing, and the context its
// calls run in.
func (tr tracing) open(tb testing.TB, s store.Store, opts kura.Options) (*kura.Cache[string], context.Context) {
	tb.Helper()
	return tr.openCounted(tb, s, opts, nil)
}

// openCounted is open with kuraotel's Tracer behind a counter of the
// read path's calls of it (count nil: none).
func (tr tracing) openCounted(tb testing.TB, s store.Store, opts kura.Options, count *atomic.Int64) (*kura.Cache[string], context.Context) {
	tb.Helper()
	ctx := context.Background()
	if tr.tp != nil {
		tp := tr.tp()
		if !tr.untraced {
			opts.Tracer = kuraotel.NewTracer(kuraotel.Options{TracerProvider: tp})
			if count != nil {
				opts.Tracer = countedTracer{opts.Tracer, count}
			}
			s = kuraotel.WrapStore(s, kuraotel.StoreOptions{TracerProvider: tp})
		}
		if tr.sampled || tr.parent {
			var sp trace.Span
			ctx, sp = tp.Tracer("app").Start(ctx, "request")
			tb.Cleanup(func() { sp.End() })
		}
	}
	c, err := kura.New[string](s, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c, ctx
}

func hitLoader(context.Context, string) (string, error) { return "value", nil }

// TestNoAllocsUnsampled: with an SDK provider sampling ParentBased(Never)
// and a caller context without a sampled span (none, or the request's
// unsampled one), a Fetch hit allocates exactly what it allocates without
// a tracer in the same context, from the store and from the L1.
func TestNoAllocsUnsampled(t *testing.T) {
	for _, l1 := range []bool{false, true} {
		allocs := make([]float64, len(tracings))
		for i, tr := range tracings {
			if tr.sampled {
				continue
			}
			ms, err := memstore.New(memstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			opts := kura.Options{}
			if l1 {
				opts.L1 = kura.L1Options{MaxBytes: 1 << 20, MaxStaleness: time.Minute}
			}
			c, ctx := tr.open(t, ms, opts)
			if sc := trace.SpanContextFromContext(ctx); tr.parent && (!sc.IsValid() || sc.IsSampled()) {
				t.Fatalf("%s: the request span is %v, want valid and not sampled", tr.name, sc)
			}
			if _, err := c.Fetch(ctx, "k", time.Minute, hitLoader); err != nil {
				t.Fatal(err)
			}
			allocs[i] = testing.AllocsPerRun(200, func() {
				if _, err := c.Fetch(ctx, "k", time.Minute, hitLoader); err != nil {
					t.Fatal(err)
				}
			})
		}
		for _, b := range baselines {
			off, on := tracings[b[0]].name, tracings[b[1]].name
			t.Logf("L1 %v: Fetch hit allocs: %s %v, %s %v", l1, off, allocs[b[0]], on, allocs[b[1]])
			if allocs[b[1]] != allocs[b[0]] && !raceEnabled { // make test-allocs checks without -race
				t.Errorf("L1 %v: %v allocs %s, %v %s", l1, allocs[b[1]], on, allocs[b[0]], off)
			}
		}
	}
}

// countedTracer counts every call the read path makes of the Tracer it
// wraps.
type countedTracer struct {
	observe.Tracer
	n *atomic.Int64
}

func (c countedTracer) Start(ctx context.Context, step observe.Step, key string, keys int) (context.Context, observe.Span) {
	c.n.Add(1)
	return c.Tracer.Start(ctx, step, key, keys)
}

func (c countedTracer) Note(ctx context.Context, n observe.Note, v int64) {
	c.n.Add(1)
	c.Tracer.Note(ctx, n, v)
}

func (c countedTracer) Absorbed(ctx context.Context, key string, err error) {
	c.n.Add(1)
	c.Tracer.Absorbed(ctx, key, err)
}

// TestUnsampledHitAsksTracerOnce: on Redis without an L1, a Fetch hit
// that the sampler does not record (no span in the caller's context, or
// the request's span the sampler dropped) calls kuraotel's Tracer once,
// for the kura.Fetch span it does not start, and none of the steps under
// it asks again; sampled, the same hit asks for its steps and notes. The
// calls this removed were most of the unsampled hit's remaining cost
// (BENCHMARKS.md, "OpenTelemetry").
func TestUnsampledHitAsksTracerOnce(t *testing.T) {
	rs := servertest.Redis(t, servers.RedisConfig{})
	const hits = 100
	for _, tr := range tracings {
		if tr.untraced || tr.tp == nil {
			continue
		}
		var count atomic.Int64
		c, ctx := tr.openCounted(t, redisStore(t, rs.Addr), kura.Options{}, &count)
		if _, err := c.Fetch(ctx, "k", time.Hour, hitLoader); err != nil {
			t.Fatal(err)
		}
		count.Store(0)
		for range hits {
			if _, err := c.Fetch(ctx, "k", time.Hour, hitLoader); err != nil {
				t.Fatal(err)
			}
		}
		per := float64(count.Load()) / hits
		t.Logf("%s: %.2f Tracer calls per Fetch hit", tr.name, per)
		switch {
		case !tr.sampled && per != 1:
			t.Errorf("%s: %.2f Tracer calls per unsampled Fetch hit, want 1 (the kura.Fetch span's Start)", tr.name, per)
		case tr.sampled && per < 3:
			t.Errorf("%s: %.2f Tracer calls per sampled Fetch hit, want kura.Fetch's and kura.lease.acquire's Start and the outcome's note", tr.name, per)
		}
	}
}

// BenchmarkFetchHitRedis: a Fetch hit on Redis without an L1, without a
// tracer, with an unsampled one and sampled at 100 %.
func BenchmarkFetchHitRedis(b *testing.B) {
	rs := servertest.Redis(b, servers.RedisConfig{})
	for _, tr := range tracings {
		b.Run(tr.name, func(b *testing.B) {
			c, ctx := tr.open(b, redisStoreB(b, rs.Addr), kura.Options{})
			if _, err := c.Fetch(ctx, "bench", time.Hour, hitLoader); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Fetch(ctx, "bench", time.Hour, hitLoader); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFetchHitL1: a Fetch served by the L1.
func BenchmarkFetchHitL1(b *testing.B) {
	for _, tr := range tracings {
		b.Run(tr.name, func(b *testing.B) {
			ms, _ := memstore.New(memstore.Options{})
			c, ctx := tr.open(b, ms, kura.Options{L1: kura.L1Options{MaxBytes: 1 << 20, MaxStaleness: time.Hour}})
			if _, err := c.Fetch(ctx, "bench", time.Hour, hitLoader); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Fetch(ctx, "bench", time.Hour, hitLoader); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func redisStoreB(b *testing.B, addr string) store.Store {
	b.Helper()
	s, err := redisstore.New(context.Background(), redisstore.Options{Addrs: []string{addr}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}
