package readthrough

import (
	"context"
	"time"

	"github.com/kuracache/kura/internal/readthrough/clock"
)

// budget is the time one Fetch or FetchMany may spend on its own store
// work (every read, lease call and write-back together), so a stalled
// server costs a caller at most Config.StoreTimeout however many store
// calls the path makes. The loader's time is not counted. A budget lives
// on its caller's stack.
type budget struct {
	left      time.Duration
	unlimited bool
	used      bool // a store call was bounded already
	// quiet: the call is not recorded (its span was not started), so
	// none of its steps is either (observe's contract), and they start
	// no span: they do not ask the Tracer (Pipeline.start).
	quiet bool
	// keep holds keys whose entry must not be overwritten by this call's
	// fill: entries from a newer writer (ErrNotUnderstood), and recent
	// entries of another type (the value is true for those, counted in
	// SchemaKept when a write is skipped).
	keep map[string]bool
}

func (p *Pipeline[V]) newBudget() budget {
	return budget{left: p.cfg.StoreTimeout, unlimited: p.cfg.StoreTimeout < 0}
}

// keepEntry marks key's entry as one this call must not overwrite;
// schema tells a recent entry of another type.
func (b *budget) keepEntry(key string, schema bool) {
	if b.keep == nil {
		b.keep = make(map[string]bool, 1)
	}
	b.keep[key] = schema
}

// kept reports whether key's entry must not be overwritten, and counts a
// write skipped for a recent entry of another type.
func (b *budget) kept(key string, st *Counters) bool {
	schema, ok := b.keep[key]
	if schema {
		st.SchemaKept.Add(1)
	}
	return ok
}

// isKept reports whether key's entry must not be overwritten.
func (b *budget) isKept(key string) bool {
	_, ok := b.keep[key]
	return ok
}

// exhausted reports whether no time is left for another store call.
func (b *budget) exhausted() bool { return !b.unlimited && b.left <= 0 }

// stop is what charge needs of a bounded store call.
type stop struct {
	start  time.Time
	cancel context.CancelFunc
	clk    *clock.Clock
	call   clock.Call // clk's: released in charge
}

// bound returns ctx bounded by what is left of the budget, for one store
// call that starts at now (the caller's own clock read: a hit reads the
// clock no more often than without a budget); pass the stop to charge
// when the call returns, and do not use the context after that (it may
// be reused). It creates no timer, no context and no goroutine, and
// allocates nothing, when ctx's own deadline comes first, and for the
// first store call of a read (all a hit makes), whatever ctx is: a shared
// tick of clk bounds it, and a caller's context that can end early is
// watched by clk (package clock). Other calls get a context.WithTimeout.
func (b *budget) bound(ctx context.Context, clk *clock.Clock, now time.Time) (context.Context, stop) {
	if b.unlimited {
		return ctx, stop{}
	}
	s := stop{start: now}
	first := !b.used
	b.used = true
	if dl, ok := ctx.Deadline(); ok && dl.Sub(s.start) <= b.left {
		return ctx, s
	}
	if first && clk != nil && b.left > 0 {
		s.clk = clk
		ctx, s.call = clk.Bind(ctx, s.start, b.left)
		return ctx, s
	}
	ctx, s.cancel = context.WithTimeout(ctx, b.left)
	return ctx, s
}

// charge ends a bounded store call and takes its time from the budget.
func (b *budget) charge(s stop) {
	if s.cancel != nil {
		s.cancel()
	}
	if s.clk != nil {
		s.clk.Release(s.call)
	}
	if !b.unlimited {
		b.left -= time.Since(s.start)
	}
}
