package readthrough

import (
	"context"
	"errors"
	"time"

	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// The tracing hook (Config.Tracer, package observe): each helper is one
// nil check when no Tracer is set, and a Tracer that does not record a
// call returns a nil Span without allocating, so the hit path costs the
// same either way (BENCHMARKS.md, "OpenTelemetry").
//
// Fetch and FetchMany ask the Tracer once, for the call's own span
// (startCall). When it is not started (no Tracer, or one that does not
// record the call), no step under it can be recorded either (observe's
// contract), so its steps, a hit's and a miss's (lookup, lease wait,
// load, fill, lookups again), make no further Tracer call: one branch on
// the budget's quiet flag instead of an interface call and a recording
// check per step. A recorded call starts one span per step it runs.
// TestUnrecordedFetchAsksTracerOnce and TestMissStartsOneSpanPerStep count
// them. A background refresh is a new root and asks on its own.

// startCall begins the span of a Cache call that the pipeline runs
// (Fetch, FetchMany); a nil Span: the call is not recorded.
func (p traceStep[V]) startCall(ctx context.Context, step observe.Step, key string, n int) (context.Context, observe.Span) {
	if p.cfg.Tracer == nil {
		return ctx, nil
	}
	return p.cfg.Tracer.Start(ctx, step, key, n)
}

// inSpan runs fn, the body of a recorded call, and ends sp with its
// error, or with a *observe.Panic when it panics (the panic goes on).
func inSpan[T any](sp observe.Span, fn func() (T, error)) (v T, err error) {
	defer observe.Finish(sp, &err)
	return fn()
}

// firstKey is the key a batch call's span is started with: its first,
// "" when it has none.
func firstKey(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}

// start begins the span of step, a step of the call whose budget is b,
// under ctx (see observe.Tracer.Start). A step of a call that is not
// recorded (b.quiet) starts none and does not ask the Tracer.
func (p traceStep[V]) start(ctx context.Context, b *budget, step observe.Step, key string, n int) (context.Context, observe.Span) {
	if p.cfg.Tracer == nil || b.quiet {
		return ctx, nil
	}
	return p.cfg.Tracer.Start(ctx, step, key, n)
}

// end ends sp (nil: not recorded) with err.
func end(sp observe.Span, err error) {
	if sp != nil {
		sp.End(err)
	}
}

// note records an outcome on the span ctx carries.
func (p traceStep[V]) note(ctx context.Context, n observe.Note, v int64) {
	if p.cfg.Tracer != nil {
		p.cfg.Tracer.Note(ctx, n, v)
	}
}

// absorbed reports a cache failure the pipeline absorbs.
func (p traceStep[V]) absorbed(ctx context.Context, key string, err error) {
	if p.cfg.Tracer != nil {
		p.cfg.Tracer.Absorbed(ctx, key, err)
	}
}

// lookupStep is the step a lookup is: with leases, the lease read.
func (p traceStep[V]) lookupStep() observe.Step {
	if p.coord == leasesCoord {
		return observe.LeaseAcquire
	}
	return observe.Lookup
}

// tracedLookup is lookup (keys: see there) in a span of its own:
// kura.lookup, or with leases kura.lease.acquire. When the call's span was
// not started (b.quiet), the step is not recorded and the Tracer is not
// asked.
func (p traceStep[V]) tracedLookup(ctx context.Context, b *budget, slots []slot[V], keys []string, early bool) {
	if b.quiet {
		p.lk.lookup(ctx, b, slots, keys, early)
		return
	}
	lctx, sp := p.tr.start(ctx, b, p.tr.lookupStep(), slots[0].key, len(slots))
	p.lk.lookup(lctx, b, slots, keys, early)
	end(sp, nil)
}

// tracedJob is fn, the body of a background refresh's flights, ending sp
// (the kura.refresh span; nil: fn itself) when it returns: with the first
// key's failure, or a panic, which goes on to the flight.
func tracedJob[V any](sp observe.Span, fn func(context.Context) ([]vouched[V], []error)) func(context.Context) ([]vouched[V], []error) {
	if sp == nil {
		return fn
	}
	return func(ctx context.Context) (vals []vouched[V], errs []error) {
		var failed error
		defer observe.Finish(sp, &failed)
		vals, errs = fn(ctx)
		failed = firstFailure(errs)
		return vals, errs
	}
}

// firstFailure is the first of errs that is a failure: not a key found
// absent, nor a fill refused because an Invalidate voided its lease (the
// load itself succeeded; kura.fill says so).
func firstFailure(errs []error) error {
	for _, err := range errs {
		if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, errVoided) {
			return err
		}
	}
	return nil
}

// noteLookup records what the lookup found for s on the call's span.
func (p traceStep[V]) noteLookup(ctx context.Context, s *slot[V]) {
	if p.cfg.Tracer == nil {
		return
	}
	switch s.class {
	case hit:
		switch {
		case s.e.negative:
			p.tr.note(ctx, observe.NegativeHit, 0)
		case s.stale:
			p.tr.note(ctx, observe.StaleServed, 0)
		default:
			p.tr.note(ctx, observe.Hit, 0)
		}
		if s.refresh {
			p.tr.note(ctx, observe.Refreshed, 0)
		}
		return
	case won:
		p.tr.note(ctx, observe.LeaseWon, 0)
	case wait:
		p.tr.note(ctx, observe.LeaseHeld, 0)
	}
	p.tr.note(ctx, observe.Miss, 0)
}

// waitSpan begins a LeaseWait span of the call whose budget is b; its end
// notes how long the caller has waited since start.
func (p traceStep[V]) waitSpan(ctx context.Context, b *budget, key string, n int) (context.Context, observe.Span) {
	return p.tr.start(ctx, b, observe.LeaseWait, key, n)
}

// endWait ends a LeaseWait span: fail_open when the wait ran out (got
// is nil) or its read failed for a key (the caller loads it without
// writing back).
func (p traceStep[V]) endWait(sp observe.Span, start time.Time, got []slot[V], err error) {
	if sp == nil {
		return
	}
	sp.Note(observe.LeaseWaited, observe.Since(start))
	open := got == nil
	for i := range got {
		open = open || got[i].failed
	}
	if open && err == nil {
		sp.Note(observe.FailOpen, 0)
	}
	sp.End(err)
}

// noteMany records what a FetchMany's lookup found, as counts; l1 keys
// were served by the L1 before it.
func (p traceStep[V]) noteMany(ctx context.Context, slots []slot[V], l1 int) {
	if p.cfg.Tracer == nil {
		return
	}
	var n [observe.NumNotes]int64
	n[observe.Hits] = int64(l1)
	for i := range slots {
		s := &slots[i]
		switch s.class {
		case hit:
			n[observe.Hits]++
			if s.stale {
				n[observe.StaleServed]++
			}
			if s.refresh {
				n[observe.Refreshed]++
			}
			continue
		case won:
			n[observe.LeaseWon]++
		case wait:
			n[observe.LeaseHeld]++
		}
		n[observe.Misses]++
	}
	for _, k := range [...]observe.Note{observe.Hits, observe.Misses, observe.StaleServed, observe.Refreshed, observe.LeaseWon, observe.LeaseHeld} {
		if n[k] > 0 {
			p.tr.note(ctx, k, n[k])
		}
	}
}

// traceStep is the tracing hook: methods over the pipeline's state.
type traceStep[V any] struct{ *Pipeline[V] }
