package health

import (
	"context"
	"time"

	"github.com/kuracache/kura/store"
)

// The breaker routes the lease calls through itself; CanLease and
// WatchLeases come with store.Forward.
var (
	_ store.Leaser       = (*Store)(nil)
	_ store.LeaseCapable = (*Store)(nil)
)

// leaseOp runs a lease operation on the keys of healthy nodes and fails
// the keys of Down nodes at once (ErrNodeDown): no lease can be taken,
// filled or voided on a node that cannot be reached, so callers load for
// themselves without writing back (docs/leases.md). The gutter is not
// used: it cannot coordinate processes.
func (s *Store) leaseOp(op string, n int, key func(int) string, do func(idx []int) error) error {
	sp := s.split(n, key)
	defer sp.releaseAll()
	var errs []store.KeyError
	for _, i := range sp.down {
		nd := sp.nodes[i]
		errs = append(errs, store.KeyError{Key: key(i), Addr: nd.addr, Err: downErr(nd)})
	}
	if len(sp.live) > 0 {
		err := do(sp.live)
		keys := make([]string, len(sp.live))
		for j, i := range sp.live {
			keys[j] = key(i)
		}
		s.observeBatch(sp, sp.live, keys, err)
		errs = keyErrors(errs, err, keys)
	}
	return batchError(op, errs)
}

// LeaseGet takes leases through the wrapped store for the keys of healthy
// nodes; keys of Down nodes fail at once with ErrNodeDown.
func (s *Store) LeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, error) {
	l, err := s.WrappedLeaser()
	if err != nil {
		return nil, err
	}
	out := make([]store.LeaseResult, len(keys))
	err = s.leaseOp("lease", len(keys), func(i int) string { return keys[i] }, func(idx []int) error {
		res, err := l.LeaseGet(ctx, pick(keys, idx), opts)
		if len(res) == len(idx) {
			for j, i := range idx {
				out[i] = res[j]
			}
		}
		return err
	})
	return out, err
}

// Fill fills through the wrapped store on healthy nodes.
func (s *Store) Fill(ctx context.Context, fills []store.Fill) error {
	l, err := s.WrappedLeaser()
	if err != nil {
		return err
	}
	return s.leaseOp("fill", len(fills), func(i int) string { return fills[i].Lease.Key }, func(idx []int) error {
		return l.Fill(ctx, pick(fills, idx))
	})
}

// Release gives leases up on healthy nodes.
func (s *Store) Release(ctx context.Context, leases []store.Lease) error {
	l, err := s.WrappedLeaser()
	if err != nil {
		return err
	}
	return s.leaseOp("release", len(leases), func(i int) string { return leases[i].Key }, func(idx []int) error {
		return l.Release(ctx, pick(leases, idx))
	})
}

// Invalidate invalidates through the wrapped store on healthy nodes; keys
// of Down nodes fail with ErrNodeDown (their invalidation did not happen).
func (s *Store) Invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	l, err := s.WrappedLeaser()
	if err != nil {
		return err
	}
	return s.leaseOp("invalidate", len(keys), func(i int) string { return keys[i] }, func(idx []int) error {
		return l.Invalidate(ctx, pick(keys, idx), stale)
	})
}

var _ store.LeaseWaker = (*Store)(nil)

// WatchedLeaseGet is a watched lease read through the breaker (see
// store.LeaseWaker): the keys of healthy nodes go to the wrapped store's
// watched read, the keys of Down nodes fail at once with ErrNodeDown.
// watched is false when the wrapped store cannot watch (its results are
// then plain LeaseGet's).
func (s *Store) WatchedLeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, bool, error) {
	w, ok := s.WrappedWaker()
	if !ok { // no leases (LeaseGet says so) or no wake-ups
		res, err := s.LeaseGet(ctx, keys, opts)
		return res, false, err
	}
	out := make([]store.LeaseResult, len(keys))
	watched := false
	err := s.leaseOp("lease", len(keys), func(i int) string { return keys[i] }, func(idx []int) error {
		res, wd, err := w.WatchedLeaseGet(ctx, pick(keys, idx), opts)
		watched = wd
		if len(res) == len(idx) {
			for j, i := range idx {
				out[i] = res[j]
			}
		}
		return err
	})
	return out, watched, err
}
