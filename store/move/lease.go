package move

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/store"
)

// errNoLeases is the error of the lease methods when a side cannot lease.
var errNoLeases = errors.New("move: both sides need leases (store.Leaser) for the lease methods")

// CanLease reports whether both sides have leases: the Cache uses them
// only then.
func (s *Store) CanLease() bool { return s.oldL != nil && s.newL != nil }

func (s *Store) leasers() error {
	if !s.CanLease() {
		return fmt.Errorf("%w: old %T, new %T", errNoLeases, s.old, s.new)
	}
	return nil
}

// LeaseGet implements store.Leaser. In PhaseDual a moved key's lease is
// taken on the old owner; from PhaseWarm on, on the new owner, and in
// PhaseWarm a key the new owner does not hold (this call won its lease on
// an empty key) is read from the old owner: a value found there is
// copied to the new owner under that lease and returned as a hit. A copy
// the new owner refuses (an Invalidate or a write overtook it) leaves the
// result as it was: this caller holds a lease that its own fill will find
// voided, and loads.
func (s *Store) LeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, error) {
	res, _, err := s.leaseGet(ctx, keys, opts, false)
	return res, err
}

// leaseGet is LeaseGet; with watch, each side's read is a watched one
// where that side is a store.LeaseWaker, and watched reports that every
// side read was.
func (s *Store) leaseGet(ctx context.Context, keys []string, opts store.LeaseOptions, watch bool) ([]store.LeaseResult, bool, error) {
	if err := s.leasers(); err != nil {
		return nil, false, err
	}
	p := s.Phase()
	if p == PhaseDual {
		moved, stay := s.split(len(keys), func(i int) string { return keys[i] })
		if len(moved) == 0 {
			return sideLeaseGet(ctx, s.newL, keys, opts, watch)
		}
		out := make([]store.LeaseResult, len(keys))
		var wOld, wNew bool
		part := func(l store.Leaser, idx []int, old bool, watched *bool) func() error {
			if len(idx) == 0 {
				*watched = true
				return nil
			}
			return func() error {
				res, w, err := sideLeaseGet(ctx, l, pick(keys, idx), opts, watch)
				*watched = w
				for j, i := range idx {
					if j < len(res) {
						out[i] = res[j]
						if old && (res[j].Won || res[j].Lease.Key != "") {
							out[i].Lease = tagOld(res[j].Lease)
						}
					}
				}
				return err
			}
		}
		err := both("lease", part(s.oldL, moved, true, &wOld), part(s.newL, stay, false, &wNew))
		if err != nil && !isBatch(err) {
			return nil, false, err
		}
		return out, wOld && wNew, err
	}
	res, watched, err := sideLeaseGet(ctx, s.newL, keys, opts, watch)
	if p != PhaseWarm || len(res) != len(keys) || (err != nil && !isBatch(err)) {
		return res, watched, err
	}
	var cands []int
	for i, r := range res {
		if r.Won && r.Value == nil && !r.Stale && s.moved(keys[i]) {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return res, watched, err
	}
	vals := s.warmUp(ctx, keys, res, cands)
	for j, i := range cands {
		if vals[j] != nil {
			res[i] = store.LeaseResult{Value: vals[j]}
		}
	}
	return res, watched, err
}

func isBatch(err error) bool {
	var be *store.BatchError
	return errors.As(err, &be)
}

// splitLeases splits leases into the old side's (untagged) and the new
// side's.
func splitLeases(n int, lease func(int) store.Lease) (old, cur []int, untagged []store.Lease) {
	untagged = make([]store.Lease, n)
	for i := 0; i < n; i++ {
		l, isOld := untag(lease(i))
		untagged[i] = l
		if isOld {
			old = append(old, i)
		} else {
			cur = append(cur, i)
		}
	}
	return old, cur, untagged
}

// Fill implements store.Leaser: each fill on the side its lease came
// from.
func (s *Store) Fill(ctx context.Context, fills []store.Fill) error {
	if err := s.leasers(); err != nil {
		return err
	}
	old, cur, ls := splitLeases(len(fills), func(i int) store.Lease { return fills[i].Lease })
	if len(old) == 0 {
		return s.newL.Fill(ctx, fills)
	}
	part := func(l store.Leaser, idx []int) func() error {
		if len(idx) == 0 {
			return nil
		}
		return func() error {
			fs := pick(fills, idx)
			for j, i := range idx {
				fs[j].Lease = ls[i]
			}
			return l.Fill(ctx, fs)
		}
	}
	return both("fill", part(s.oldL, old), part(s.newL, cur))
}

// Release implements store.Leaser: each lease on the side it came from.
func (s *Store) Release(ctx context.Context, leases []store.Lease) error {
	if err := s.leasers(); err != nil {
		return err
	}
	old, cur, ls := splitLeases(len(leases), func(i int) store.Lease { return leases[i] })
	if len(old) == 0 {
		return s.newL.Release(ctx, leases)
	}
	part := func(l store.Leaser, idx []int) func() error {
		if len(idx) == 0 {
			return nil
		}
		return func() error { return l.Release(ctx, pick(ls, idx)) }
	}
	return both("release", part(s.oldL, old), part(s.newL, cur))
}

// Invalidate implements store.Leaser: the old owner first, then the new
// one, never at once (the order is what makes copies safe; see the
// package doc). stale (stale-while-revalidate) applies on the owner the
// phase reads from PhaseWarm on; during PhaseDual and on the old owner
// afterwards the value is removed outright, because a copy cannot tell a
// value marked stale from a fresh one and would make it fresh on the new
// owner.
func (s *Store) Invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	if err := s.leasers(); err != nil {
		return err
	}
	p := s.Phase()
	if p == PhaseDual {
		stale = 0
	}
	moved, _ := s.split(len(keys), func(i int) string { return keys[i] })
	if len(moved) == 0 {
		return s.newL.Invalidate(ctx, keys, stale)
	}
	s.st.dualWrites.Add(uint64(len(moved)))
	if err := s.oldL.Invalidate(ctx, pick(keys, moved), 0); err != nil {
		// The old owner may still hold what the new one would lose: a
		// copy could bring it back. Report the keys as failed (the
		// caller retries); the new owner is still invalidated, so what
		// this process reads is right.
		return joinErr("invalidate", err, s.newL.Invalidate(ctx, keys, 0))
	}
	return s.newL.Invalidate(ctx, keys, stale)
}
