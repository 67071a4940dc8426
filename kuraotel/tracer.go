package kuraotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
)

// ScopeName is the instrumentation scope of kuraotel's tracer and meter.
const ScopeName = "github.com/kuracache/kura/kuraotel"

// SemconvVersion is the version of the OpenTelemetry semantic conventions
// kuraotel follows.
const SemconvVersion = "1.43.0"

// Attribute keys of kura's own (docs/telemetry.md).
const (
	KeyOutcome       = attribute.Key("kura.outcome")         // l1_hit, hit, negative_hit, stale_served, miss
	KeyKey           = attribute.Key("kura.key")             // only with Options.Keys
	KeyKeys          = attribute.Key("kura.keys")            // keys in a batch call
	KeyHits          = attribute.Key("kura.hits")            // keys of a batch served from the cache
	KeyMisses        = attribute.Key("kura.misses")          // keys of a batch loaded
	KeyStaleServed   = attribute.Key("kura.stale_served")    // keys served stale
	KeyRefreshed     = attribute.Key("kura.refreshed")       // keys whose background refresh started
	KeyShared        = attribute.Key("kura.shared")          // took another caller's load (this process)
	KeyLeaseWon      = attribute.Key("kura.lease.won")       // keys whose lease this caller took
	KeyLeaseHeld     = attribute.Key("kura.lease.held")      // keys another caller held the lease of
	KeyLeaseWait     = attribute.Key("kura.lease.wait")      // seconds waited for another caller's fill
	KeyFailOpen      = attribute.Key("kura.lease.fail_open") // the wait ran out: loaded, not written back
	KeyFillRefused   = attribute.Key("kura.fill.refused")    // keys whose fill the store refused
	KeyRefusedReason = attribute.Key("kura.fill.refused_reason")
	KeyFillKept      = attribute.Key("kura.fill.kept")    // keys not written back to keep another writer's entry
	KeyBudgetSkip    = attribute.Key("kura.budget_skip")  // keys whose store work the StoreTimeout budget skipped
	KeyNodeDown      = attribute.Key("kura.node.down")    // a node's circuit was open (store/health)
	KeyStoreErrors   = attribute.Key("kura.store.errors") // absorbed cache failures on the span
	KeyCommands      = attribute.Key("kura.commands")     // commands in a server batch
)

// Options configures a Tracer. The zero value works.
type Options struct {
	// TracerProvider makes the tracer. If nil, the global provider
	// (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// RootSpans starts kura spans even when the caller's context holds
	// no recording span (the Cache call becomes a trace of its own, as
	// the sampler decides). If false (the default), kura records only
	// inside a recording span of the caller, and a call of a request that
	// is not sampled costs nothing.
	RootSpans bool
	// Keys, if set, records each call's key as kura.key: the value it
	// returns, or nothing when it returns "". Keys may hold personal
	// data: return a redacted form (a hash, the prefix). If nil, keys are
	// not recorded. Batch calls record key counts only.
	Keys func(key string) string
}

// Tracer is kura's observe.Tracer over OpenTelemetry: set it as
// kura.Options.Tracer. It is safe for concurrent use.
type Tracer struct {
	tr   trace.Tracer
	opts Options
}

var _ observe.Tracer = (*Tracer)(nil)

// NewTracer returns a Tracer.
func NewTracer(opts Options) *Tracer {
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Tracer{tr: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(SemconvVersion),
		trace.WithSchemaURL(semconv.SchemaURL)), opts: opts}
}

// records reports whether a span under ctx is recorded.
func (t *Tracer) records(ctx context.Context) bool {
	return t.opts.RootSpans || trace.SpanFromContext(ctx).IsRecording()
}

// Start implements observe.Tracer. A background refresh (observe.Refresh)
// is a new root linked to the span in ctx: it outlives that call.
func (t *Tracer) Start(ctx context.Context, step observe.Step, key string, keys int) (context.Context, observe.Span) {
	if !t.records(ctx) {
		return ctx, nil
	}
	opts := make([]trace.SpanStartOption, 0, 3)
	attrs := make([]attribute.KeyValue, 0, 2)
	if keys > 1 || step == observe.FetchMany || step == observe.GetMany || step == observe.SetMany || step == observe.DeleteMany {
		attrs = append(attrs, KeyKeys.Int(keys))
	} else if t.opts.Keys != nil && key != "" {
		if k := t.opts.Keys(key); k != "" {
			attrs = append(attrs, KeyKey.String(k))
		}
	}
	opts = append(opts, trace.WithAttributes(attrs...))
	if step == observe.Refresh {
		opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.LinkFromContext(ctx)))
	}
	ctx, sp := t.tr.Start(ctx, step.String(), opts...)
	return ctx, span{sp}
}

// Note implements observe.Tracer.
func (t *Tracer) Note(ctx context.Context, n observe.Note, v int64) {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	noteOn(sp, n, v)
}

func noteOn(sp trace.Span, n observe.Note, v int64) {
	switch n {
	case observe.L1Hit, observe.Hit, observe.NegativeHit, observe.Miss:
		sp.SetAttributes(KeyOutcome.String(n.String()))
	case observe.StaleServed:
		if v == 0 { // one key: its outcome
			sp.SetAttributes(KeyOutcome.String(n.String()))
			v = 1
		}
		sp.SetAttributes(KeyStaleServed.Int64(v))
	case observe.Refreshed:
		sp.SetAttributes(KeyRefreshed.Int64(max(v, 1)))
	case observe.Shared:
		sp.SetAttributes(KeyShared.Bool(true))
	case observe.LeaseWon:
		sp.SetAttributes(KeyLeaseWon.Int64(max(v, 1)))
	case observe.LeaseHeld:
		sp.SetAttributes(KeyLeaseHeld.Int64(max(v, 1)))
	case observe.LeaseWaited:
		sp.SetAttributes(KeyLeaseWait.Float64(time.Duration(v).Seconds()))
	case observe.FailOpen:
		sp.SetAttributes(KeyFailOpen.Bool(true))
	case observe.FillRefused:
		sp.SetAttributes(KeyFillRefused.Int64(max(v, 1)), KeyRefusedReason.String("lease_lost"))
	case observe.FillKept:
		sp.SetAttributes(KeyFillKept.Int64(max(v, 1)))
	case observe.BudgetSkip:
		sp.SetAttributes(KeyBudgetSkip.Int64(max(v, 1)))
	case observe.Hits:
		sp.SetAttributes(KeyHits.Int64(v))
	case observe.Misses:
		sp.SetAttributes(KeyMisses.Int64(v))
	}
}

// Absorbed implements observe.Tracer: an event kura.store.error with the
// error's type and its node, and kura.node.down on the span when the
// node's circuit was open (the breaker's decision).
func (t *Tracer) Absorbed(ctx context.Context, key string, err error) {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{semconv.ErrorTypeKey.String(ErrorType(err))}
	if ne := store.AsNodeError(err); ne != nil {
		attrs = append(attrs, semconv.ServerAddress(ne.Addr))
	}
	down := errors.Is(err, health.ErrNodeDown)
	if down {
		attrs = append(attrs, KeyNodeDown.Bool(true))
		sp.SetAttributes(KeyNodeDown.Bool(true))
	}
	if t.opts.Keys != nil && key != "" {
		if k := t.opts.Keys(key); k != "" {
			attrs = append(attrs, KeyKey.String(k))
		}
	}
	sp.AddEvent("kura.store.error", trace.WithAttributes(attrs...))
}

// span is a recording span of the read path.
type span struct{ sp trace.Span }

func (s span) Note(n observe.Note, v int64) { noteOn(s.sp, n, v) }

func (s span) End(err error) {
	endSpan(s.sp, err)
}

// endSpan ends sp with err per the conventions: error.type and an Error
// status, no message (messages name keys). A key cached as absent
// (ErrNotFound) is an answer, not an error.
func endSpan(sp trace.Span, err error) {
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		typ := ErrorType(err)
		sp.SetAttributes(semconv.ErrorTypeKey.String(typ))
		sp.SetStatus(codes.Error, typ)
	}
	sp.End()
}

// ErrorType is the low-cardinality error.type kuraotel records for err:
// panic, node_down, timeout, canceled, closed, value_too_large,
// invalid_key, not_stored, node_error, or _OTHER (the conventions'
// fallback).
func ErrorType(err error) string {
	var pe *observe.Panic
	switch {
	case errors.As(err, &pe), errors.Is(err, kura.ErrLoaderPanicked):
		return "panic"
	case errors.Is(err, health.ErrNodeDown):
		return "node_down"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, store.ErrClosed):
		return "closed"
	case errors.Is(err, store.ErrValueTooLarge):
		return "value_too_large"
	case errors.Is(err, store.ErrInvalidKey):
		return "invalid_key"
	case errors.Is(err, store.ErrNotStored):
		return "not_stored"
	case store.AsNodeError(err) != nil:
		return "node_error"
	}
	return "_OTHER"
}
