package readthrough

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// Fetch runs the pipeline for one key: the one-key case of FetchMany. It
// is the kura.Fetch span when the Tracer records the call (startCall).
func (p *Pipeline[V]) Fetch(ctx context.Context, key string, ttl time.Duration, loader Loader[V]) (V, error) {
	if tctx, sp := p.tr.startCall(ctx, observe.Fetch, key, 1); sp != nil {
		return inSpan(sp, func() (V, error) { return p.fetch(tctx, key, ttl, loader, sp) })
	}
	return p.fetch(ctx, key, ttl, loader, nil)
}

// fetch is Fetch in the call's span, call (nil: the call is not
// recorded, and its steps make no Tracer call at all).
func (p *Pipeline[V]) fetch(ctx context.Context, key string, ttl time.Duration, loader Loader[V], call observe.Span) (V, error) {
	if p.l1 != nil { // before any budget or timer: a hit costs none
		if v, neg, ok := p.l1.Get(key); ok {
			if call != nil {
				call.Note(observe.L1Hit, 0)
			}
			return serve(key, v, neg)
		}
	}
	if err := ctx.Err(); err != nil {
		// A caller that already gave up gets its context's error, not
		// whichever of a load's result and ctx.Done a select picks.
		var zero V
		return zero, err
	}
	b := p.newBudget()
	b.quiet = call == nil
	gen := p.group.Ended()
	var one [1]slot[V]
	one[0].key = key
	p.tr.tracedLookup(ctx, &b, one[:], nil, true)
	if call != nil {
		p.tr.noteLookup(ctx, &one[0])
	}
	if s := &one[0]; s.class == hit {
		if s.refresh {
			p.refreshLater(ctx, []store.Lease{s.lease}, ttl, oneLoader(loader), OpSet)
		}
		return serve(key, s.e.v, s.e.negative)
	}
	return p.fetchMiss(ctx, b, one[0], gen, ttl, loader)
}

// fetchMiss is Fetch past a lookup that served nothing. It takes the
// budget and the slot by value, so that Fetch's own stay on its stack
// (the acquire step hands them to a flight's goroutine).
func (p *Pipeline[V]) fetchMiss(ctx context.Context, b budget, s slot[V], gen uint64, ttl time.Duration, loader Loader[V]) (V, error) {
	var v V
	var verr error
	err := p.acquire(ctx, &b, []slot[V]{s}, gen, ttl, oneLoader(loader), OpSet, func(_ string, rv V, err error) {
		v, verr = rv, err
	})
	if err != nil {
		var zero V
		return zero, err
	}
	return v, verr
}

// serve is the result of a hit.
func serve[V any](key string, v V, negative bool) (V, error) {
	if negative {
		var zero V
		return zero, Absent(key)
	}
	return v, nil
}

// Absent is the error for a key cached as "not found".
func Absent(key string) error {
	return fmt.Errorf("kura: %q is cached as absent: %w", key, store.ErrNotFound)
}

// FetchMany runs the pipeline for keys (unique, checked), in a
// kura.FetchMany span when the Tracer records the call (startCall).
func (p *Pipeline[V]) FetchMany(ctx context.Context, keys []string, ttl time.Duration, loader ManyLoader[V]) (map[string]V, error) {
	if tctx, sp := p.tr.startCall(ctx, observe.FetchMany, firstKey(keys), len(keys)); sp != nil {
		return inSpan(sp, func() (map[string]V, error) { return p.fetchMany(tctx, keys, ttl, loader, sp) })
	}
	return p.fetchMany(ctx, keys, ttl, loader, nil)
}

// fetchMany is FetchMany in the call's span, call (nil: not recorded).
func (p *Pipeline[V]) fetchMany(ctx context.Context, keys []string, ttl time.Duration, loader ManyLoader[V], call observe.Span) (map[string]V, error) {
	out := make(map[string]V, len(keys))
	bt := p.getBatch(len(keys))
	slots := p.l1f.l1Split(keys, out, bt.slots[:0])
	if len(slots) == 0 {
		p.putBatch(bt, slots)
		if call != nil {
			call.Note(observe.Hits, int64(len(keys))) // all from the L1
		}
		return out, nil
	}
	b := p.newBudget()
	b.quiet = call == nil
	gen := p.group.Ended()
	sorted := keys // the keys of slots, in order: all of them when the L1 served none
	if len(slots) != len(keys) {
		sorted = nil
	}
	p.tr.tracedLookup(ctx, &b, slots, sorted, true)
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if call != nil {
		p.tr.noteMany(ctx, slots, len(keys)-len(slots))
	}
	rest, refresh := slots[:0], []store.Lease(nil)
	for i := range slots {
		s := &slots[i]
		if s.class == hit && !s.e.negative {
			out[s.key] = s.e.v
		}
		switch {
		case s.class == hit && s.won && s.stale: // a stale value is reloaded now
			s.class = won
			rest = append(rest, *s)
		case s.class != hit:
			rest = append(rest, *s)
		case s.refresh:
			refresh = append(refresh, s.lease)
		}
	}
	if len(refresh) > 0 {
		p.refreshLater(ctx, refresh, ttl, manyLoader(loader), OpSetMany)
	}
	if len(rest) == 0 {
		p.putBatch(bt, slots)
		return out, nil
	}
	// rest is a part of bt's slots, which the acquire step hands on: bt
	// is not reused.
	return out, p.fetchManyMiss(ctx, b, rest, gen, ttl, loader, out)
}

// fetchManyMiss is FetchMany's acquire step for the keys its lookup did
// not serve. It takes the budget by value, as fetchMiss does, so that a
// FetchMany served by its lookup keeps its own on the stack.
func (p *Pipeline[V]) fetchManyMiss(ctx context.Context, b budget, rest []slot[V], gen uint64, ttl time.Duration, loader ManyLoader[V], out map[string]V) error {
	var first error
	err := p.acquire(ctx, &b, rest, gen, ttl, manyLoader(loader), OpSetMany, func(key string, v V, err error) {
		switch {
		case err == nil:
			out[key] = v
		case errors.Is(err, store.ErrNotFound):
			delete(out, key) // a stale value that no longer exists
		case first == nil:
			first = err
		}
	})
	if err == nil {
		err = first
	}
	return err
}
