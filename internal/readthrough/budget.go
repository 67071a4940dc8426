package readthrough

import (
	"context"
	"time"
)

// budget is the time one Fetch or FetchMany may spend on its own store
// work (every read, lease call and write-back together), so a stalled
// server costs a caller at most Config.StoreTimeout however many store
// calls the path makes. The loader's time is not counted. A budget lives
// on its caller's stack.
type budget struct {
	left      time.Duration
	unlimited bool
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

// exhausted reports whether no time is left for another store call.
func (b *budget) exhausted() bool { return !b.unlimited && b.left <= 0 }

// ctx returns ctx bounded by what is left; done charges the time used. A
// caller's deadline that comes first needs no timer of ours.
func (b *budget) ctx(ctx context.Context) (context.Context, func()) {
	if b.unlimited {
		return ctx, noop
	}
	start := time.Now()
	if dl, ok := ctx.Deadline(); ok && dl.Sub(start) <= b.left {
		return ctx, func() { b.left -= time.Since(start) }
	}
	ctx, cancel := context.WithTimeout(ctx, b.left)
	return ctx, func() {
		cancel()
		b.left -= time.Since(start)
	}
}

func noop() {}
