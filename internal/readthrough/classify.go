package readthrough

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// classify turns one plain read into the slot's class; ctx (the read's
// bounded context) bounds a dictionary lookup of the decode.
// A whole batch's failure is reported once by the caller, not per key
// (reportFail false). owned: see decode.
func (p classifyStep[V]) classify(ctx context.Context, b *budget, s *slot[V], data []byte, err error, op Op, reportFail, owned bool) {
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			p.st.Misses.Add(1)
			return
		}
		p.st.StoreErrs.Add(1)
		p.st.Misses.Add(1)
		s.failed = true
		p.tr.absorbed(ctx, s.key, err)
		if reportFail {
			p.report(op, s.key, err)
		}
		return
	}
	e, derr := p.ent.found(ctx, s.key, data, owned, nil)
	switch {
	case derr == nil:
		s.e, s.class = e, hit
	case errors.Is(derr, store.ErrNotFound):
	case errors.Is(derr, codec.ErrNotUnderstood), lookupEnded(derr):
		// A newer writer's entry, or one whose dictionary lookup the
		// budget ended: a miss here, but its writer reads it back, so
		// this call must not replace it.
		b.keepEntry(s.key, false)
		s.class = noFill
		p.report(op, s.key, derr)
	case e.keep:
		// A recent entry of another type (rolling deploy).
		b.keepEntry(s.key, true)
		s.class = noFill
		p.report(op, s.key, derr)
	default:
		p.report(op, s.key, derr)
	}
}

// lookupEnded reports a decode that failed because its context ended
// during a dictionary lookup (the store budget or the caller's deadline):
// the bytes may be sound, so they are neither served nor replaced.
func lookupEnded(err error) bool {
	return errors.Is(err, codec.ErrUnknownDictionary) &&
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

// classifyLease is classify for a lease read, decoding the value when
// there is one to serve.
func (p classifyStep[V]) classifyLease(ctx context.Context, b *budget, s *slot[V], r store.LeaseResult, early bool, t *tally) {
	s.lease, s.won, s.stale = r.Lease, r.Won, r.Stale
	placeholder := r.Value != nil && codec.IsPlaceholder(r.Value)
	if r.Value != nil && !placeholder && (!r.Stale || p.cfg.StaleWhileRevalidate > 0) {
		e, err := p.ent.found(ctx, s.key, r.Value, true, t)
		switch {
		case err == nil:
			if r.Stale {
				p.st.StaleServed.Add(1)
			}
			s.e, s.class = e, hit
			// Early refresh (memcached's R flag) or a stale value under
			// stale-while-revalidate: serve it, reload behind. A store
			// without the R flag (Redis) hands out the value's own bytes
			// as its version: refresh (XFetch) on condition that the
			// value did not change meanwhile.
			s.refresh = r.Won || (early && p.cfg.EarlyRefresh > 0 && r.Lease.Token != nil &&
				xfetch(e.due, e.cost, time.Now(), p.cfg.EarlyRefresh))
			if s.refresh {
				// A []byte value may be a slice of the token (decode):
				// the caller may change it while the refresh runs.
				s.lease.Token = bytes.Clone(s.lease.Token)
			}
			return
		case errors.Is(err, codec.ErrNotUnderstood), lookupEnded(err):
			// A newer writer's entry, or one whose dictionary lookup the
			// budget ended (not corrupt: readable once the dictionary
			// is found): never overwrite it.
			p.report(OpGet, s.key, err)
			b.keepEntry(s.key, false)
			s.class = noFill
			return
		case e.keep:
			// A recent value of another type (a rolling deploy).
			p.st.SchemaKept.Add(1)
			p.report(OpGet, s.key, err)
			s.class = noFill
			return
		default:
			p.report(OpGet, s.key, err)
			s.class = corrupt
			if r.Won {
				s.class = won
			}
			return
		}
	}
	p.st.Misses.Add(1)
	switch {
	case placeholder, r.Held:
		s.class = wait
	case r.Won:
		s.class = won
	default:
		s.class = noFill
	}
}

// xfetch decides probabilistic early expiration (Vattani, Chierichetti,
// Lowenstein, "Optimal Probabilistic Cache Stampede Prevention", VLDB
// 2015) with beta 1: refresh when now - cost * ln(rand) >= expiry, where
// cost is how long the last load took, so the chance grows as expiry
// nears and a slow load starts earlier. Only entries in their last window
// before expiry are considered; entries without the fields never are.
func xfetch(due int64, cost time.Duration, now time.Time, window time.Duration) bool {
	if due == 0 {
		return false
	}
	left := time.Duration(due - now.UnixNano())
	switch {
	case left > window:
		return false
	case left <= 0:
		return true
	}
	cost = max(cost, time.Millisecond)
	return float64(cost)*-math.Log(rand.Float64()) >= float64(left)
}

// classifyStep is the classify step: methods over the pipeline's state.
type classifyStep[V any] struct{ *Pipeline[V] }
