package move

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// Stats is a snapshot of a move's counters. Counters only grow.
type Stats struct {
	// Phase is the phase now.
	Phase Phase
	// WarmHits counts keys the new owner did not hold that the old owner
	// served (PhaseWarm): each one a load the database did not see.
	WarmHits uint64
	// Copies counts the values of WarmHits written to the new owner.
	Copies uint64
	// CopiesRefused counts copies the new owner refused because an
	// Invalidate or a write reached it after the copy's lease or guard:
	// the copy would have brought back what they removed.
	CopiesRefused uint64
	// Fallbacks counts keys missed on both owners, or whose old owner
	// failed (PhaseWarm): they go to the loader.
	Fallbacks uint64
	// OldErrors counts warm-up reads of the old owner that failed.
	OldErrors uint64
	// DualWrites counts moved keys whose write, delete or invalidation
	// reached both owners.
	DualWrites uint64
}

type counters struct {
	warmHits, copies, refused, fallbacks, oldErrs, dualWrites atomic.Uint64
}

// Stats returns the move's counters.
func (s *Store) Stats() Stats {
	return Stats{Phase: s.Phase(), WarmHits: s.st.warmHits.Load(), Copies: s.st.copies.Load(),
		CopiesRefused: s.st.refused.Load(), Fallbacks: s.st.fallbacks.Load(), OldErrors: s.st.oldErrs.Load(),
		DualWrites: s.st.dualWrites.Load()}
}

// warmUp reads the keys at idx, on whose new owner res holds a won lease
// over an empty key, from the old owner in one batch and copies each
// value it finds to the new owner under that lease, in one batch. It
// returns the values copied, aligned with idx (nil: nothing to serve;
// the lease is still the caller's).
func (s *Store) warmUp(ctx context.Context, keys []string, res []store.LeaseResult, idx []int) [][]byte {
	out := make([][]byte, len(idx))
	ks := pick(keys, idx)
	vals, err := store.GetMany(ctx, s.old, ks)
	var failed map[string]error
	if err != nil {
		var be *store.BatchError
		if !errors.As(err, &be) || len(vals) != len(ks) {
			s.st.oldErrs.Add(uint64(len(idx)))
			s.st.fallbacks.Add(uint64(len(idx)))
			return out
		}
		failed = be.Failed()
		s.st.oldErrs.Add(uint64(len(failed)))
	}
	fills := make([]store.Fill, 0, len(idx))
	at := make([]int, 0, len(idx)) // fills[k] is for idx[at[k]]
	for j, i := range idx {
		ttl, ok := s.ttlOf(vals[j])
		if _, bad := failed[ks[j]]; bad || !ok {
			s.st.fallbacks.Add(1)
			continue
		}
		fills = append(fills, store.Fill{Lease: res[i].Lease, Value: vals[j], TTL: ttl})
		at = append(at, j)
	}
	if len(fills) == 0 {
		return out
	}
	err = s.newL.Fill(ctx, fills)
	var refused map[string]error
	if err != nil {
		var be *store.BatchError
		if !errors.As(err, &be) {
			s.st.fallbacks.Add(uint64(len(fills)))
			return out
		}
		refused = be.Failed()
	}
	for k, f := range fills {
		if ferr, bad := refused[f.Lease.Key]; bad {
			if errors.Is(ferr, store.ErrNotStored) {
				s.st.refused.Add(1)
			}
			s.st.fallbacks.Add(1)
			continue
		}
		out[at[k]] = f.Value
		s.st.warmHits.Add(1)
		s.st.copies.Add(1)
	}
	return out
}

// warmPlain is the warm-up of plain reads (a Cache without leases, Get,
// GetMany) of keys the new owner missed: a guard, a lease of the Store's
// own, is taken on the new owner first, so that a copy an invalidation
// overtook is refused as a lease-holder's fill would be. Keys whose
// guard someone else holds (a reader with leases is loading or copying
// them) are served from the old owner without a copy. Without leases on
// the new owner nothing is copied: the old owner's values are served.
// The result is aligned with keys, nil for a miss.
func (s *Store) warmPlain(ctx context.Context, keys []string) ([][]byte, error) {
	if s.newL == nil {
		vals, err := store.GetMany(ctx, s.old, keys)
		s.countServed(vals, len(keys))
		return vals, err
	}
	// The guard is a kura lease entry, which every kura reader counts as
	// a miss.
	res, err := s.newL.LeaseGet(ctx, keys, store.LeaseOptions{TTL: s.guardTTL, Placeholder: codec.NewLeaseEntry()})
	if err != nil && (!isBatch(err) || len(res) != len(keys)) {
		s.st.fallbacks.Add(uint64(len(keys)))
		return make([][]byte, len(keys)), nil // a miss, as on the new owner
	}
	out := make([][]byte, len(keys))
	var won, held []int
	for i, r := range res {
		switch {
		case r.Won && r.Value == nil && !r.Stale:
			won = append(won, i)
		case r.Won:
			// A stale value (memcached handed this read the refill):
			// served, and the lease dropped, not released, since
			// releasing a lease that came with a value removes the value.
			out[i] = r.Value
		case r.Value != nil && !codec.IsPlaceholder(r.Value) && !r.Held:
			out[i] = r.Value // written since the first read
		default:
			held = append(held, i)
		}
	}
	if len(won) > 0 {
		got := s.warmUp(ctx, keys, res, won)
		var release []store.Lease
		for j, i := range won {
			if got[j] == nil {
				release = append(release, res[i].Lease)
			}
			out[i] = got[j]
		}
		if len(release) > 0 {
			_ = s.newL.Release(ctx, release)
		}
	}
	if len(held) > 0 {
		vals, gerr := store.GetMany(ctx, s.old, pick(keys, held))
		if gerr != nil && !isBatch(gerr) {
			s.st.oldErrs.Add(uint64(len(held)))
			s.st.fallbacks.Add(uint64(len(held)))
			return out, nil
		}
		for j, i := range held {
			if j < len(vals) && vals[j] != nil && !codec.IsPlaceholder(vals[j]) {
				out[i] = vals[j]
				s.st.warmHits.Add(1)
			} else {
				s.st.fallbacks.Add(1)
			}
		}
	}
	return out, nil
}

// countServed counts a warm-up read served without copies, and turns
// the placeholders in vals into misses.
func (s *Store) countServed(vals [][]byte, n int) {
	hits := 0
	for i, v := range vals {
		if v != nil && codec.IsPlaceholder(v) {
			vals[i] = nil
		} else if v != nil {
			hits++
		}
	}
	s.st.warmHits.Add(uint64(hits))
	s.st.fallbacks.Add(uint64(n - hits))
}
