// Package observe is the seam between kura's read path and a tracing
// system: the steps a Cache call goes through and the outcomes it notes on
// them, and the small interface a tracer implements (kuraotel implements
// it over OpenTelemetry). It has no dependencies: a Cache without a Tracer
// (Options.Tracer nil) pays one nil check per step.
//
// The contract a Tracer keeps, so that the read path stays as cheap with
// a tracer as without one when nothing is recorded:
//
//   - Start returns its ctx unchanged and a nil Span when it does not
//     record the call (no sampled span in ctx, say), without allocating;
//   - the read path calls the methods of a Span only when it is not nil,
//     and calls End exactly once;
//   - a Tracer records a step, a note or an absorbed failure only inside
//     a call it records: when Start returns a nil Span for a Fetch or
//     FetchMany, the read path may skip every other Tracer call of that
//     call. It skips all of a hit's (an unrecorded hit costs one Start);
//     the steps of a miss still call Start, which returns nil;
//   - nothing here ever carries a cached value; keys are passed to Start
//     for a Tracer that records them on request (kuraotel redacts by
//     default).
//
// This package is not a tracing API: it names what the read path does,
// and the Tracer decides what a span is.
package observe

import (
	"context"
	"time"
)

// Step is one kind of span: a Cache call, or one step of the read-through
// pipeline inside it.
type Step uint8

// The steps. The first group are Cache calls (a span's root within kura);
// the second the pipeline's steps under a Fetch or FetchMany.
const (
	Fetch Step = iota
	FetchMany
	Get
	GetMany
	Set
	SetMany
	Delete
	DeleteMany
	Invalidate
	// IndexFetch is an Index or UniqueIndex read: its ids (a Fetch), then
	// its records (a FetchMany), nest under it.
	IndexFetch

	// Lookup is the plain read of the keys (the L1, then the store).
	Lookup
	// LeaseAcquire is the lease read: it reads the keys and takes a lease
	// on each one that holds nothing.
	LeaseAcquire
	// LeaseWait is the wait for another caller's fill (in this process
	// or another).
	LeaseWait
	// Load is the loader's call; the loader runs with the span in its
	// context, so a database driver's span nests under it.
	Load
	// Fill is the write-back (conditional on the lease when there is one).
	Fill
	// Refresh is a background reload (early refresh, stale-while-
	// revalidate): a new root, linked to the span of the call that
	// started it (in ctx), since it outlives that call.
	Refresh

	// NumSteps is the number of steps.
	NumSteps
)

var stepNames = [NumSteps]string{
	"kura.Fetch", "kura.FetchMany", "kura.Get", "kura.GetMany", "kura.Set", "kura.SetMany",
	"kura.Delete", "kura.DeleteMany", "kura.Invalidate", "kura.Index.Fetch",
	"kura.lookup", "kura.lease.acquire", "kura.lease.wait", "kura.load", "kura.fill", "kura.refresh",
}

// String returns the step's span name (docs/telemetry.md), such as
// "kura.Fetch" or "kura.lease.wait".
func (s Step) String() string {
	if s < NumSteps {
		return stepNames[s]
	}
	return "kura.unknown"
}

// Note is an outcome the read path notes on a span, with a number
// (Span.Note's n) where one applies.
type Note uint8

// The notes.
const (
	// L1Hit: served from the in-process L1.
	L1Hit Note = iota
	// Hit: served from the store.
	Hit
	// NegativeHit: the key is cached as absent.
	NegativeHit
	// Miss: the value was loaded (by this caller or one it shared with).
	Miss
	// StaleServed: a stale value was served (stale-while-revalidate).
	StaleServed
	// Refreshed: a background refresh of the key was started (early
	// refresh or a stale value); it is its own trace, linked.
	Refreshed
	// Shared: the caller took the result of a load another caller of
	// this process ran.
	Shared
	// LeaseWon: this caller holds the lease and loads.
	LeaseWon
	// LeaseHeld: another caller (of any process) holds the lease.
	LeaseHeld
	// LeaseWaited: n is how long the caller waited for another caller's
	// fill, in nanoseconds.
	LeaseWaited
	// FailOpen: the lease wait ran out (Options.LeaseWait) or failed; the
	// caller loaded without writing back.
	FailOpen
	// FillRefused: the store refused the fill because the lease was lost
	// (an Invalidate overtook the load); n is the number of keys.
	FillRefused
	// FillKept: the write-back was skipped to keep an entry another writer
	// owns (a newer format, another type during a rolling deploy); n keys.
	FillKept
	// BudgetSkip: store work was skipped because the call's store time
	// (Options.StoreTimeout) was spent; n keys.
	BudgetSkip
	// Hits: n keys of a batch were served from the cache (L1 or store).
	Hits
	// Misses: n keys of a batch were loaded.
	Misses

	// NumNotes is the number of notes.
	NumNotes
)

var noteNames = [NumNotes]string{
	"l1_hit", "hit", "negative_hit", "miss", "stale_served", "refreshed", "shared",
	"lease_won", "lease_held", "lease_waited", "fail_open", "fill_refused", "fill_kept", "budget_skip",
	"hits", "misses",
}

// String returns the note's name, as kuraotel writes it (kura.outcome's
// values, or the suffix of a count attribute).
func (n Note) String() string {
	if n < NumNotes {
		return noteNames[n]
	}
	return "unknown"
}

// Tracer starts spans for the read path. See the package doc for the
// contract.
type Tracer interface {
	// Start begins the span of step under ctx and returns the context
	// that carries it (the loader's, the store calls') and the span, or
	// ctx and nil when it does not record. key is the call's key (the
	// first key of a batch, "" when none), keys the number of keys.
	Start(ctx context.Context, step Step, key string, keys int) (context.Context, Span)
	// Note records an outcome on the span ctx carries (the call's span,
	// or the step's), if it records; n is its number or 0.
	Note(ctx context.Context, note Note, n int64)
	// Absorbed reports a cache failure the read path absorbed (a store
	// error, a key of a node whose circuit is open): the caller is served
	// from the loader instead. ctx is the one Start returned for the step
	// that met it.
	Absorbed(ctx context.Context, key string, err error)
}

// Span is one recorded span.
type Span interface {
	// Note records an outcome; n is its number (a count, a duration in
	// nanoseconds) or 0.
	Note(note Note, n int64)
	// End ends the span; err is the call's error (nil: success). A
	// loader's panic ends its span with a *Panic.
	End(err error)
}

// Panic is the error a Load span ends with when the loader panics; the
// panic goes on to the caller. It does not hold the panic's value, which
// may carry data.
type Panic struct{}

func (*Panic) Error() string { return "kura: loader panicked" }

// Finish, deferred, ends sp (nil: not recorded) with the error *errp,
// or with a *Panic when the function it is deferred in panics; the panic
// goes on:
//
//	ctx, sp := tracer.Start(ctx, observe.Load, key, 1)
//	defer observe.Finish(sp, &err)
func Finish(sp Span, errp *error) {
	if sp == nil {
		return
	}
	if r := recover(); r != nil {
		sp.End(&Panic{})
		panic(r)
	}
	sp.End(*errp)
}

// Since is a helper for LeaseWaited: the nanoseconds since start.
func Since(start time.Time) int64 { return int64(time.Since(start)) }
