package health

import (
	"context"

	"github.com/kuracache/kura/store"
)

var _ store.Tracker = (*Store)(nil)

// The breaker implements the tracking capability itself (Tracking, Tracks
// and Subscribe come with store.Forward) so that tracked reads (an L1's)
// go through it: found around it, they would reach a Down node.

// GetTracked is a tracked read through the breaker: a key of a Down node
// fails at once with ErrNodeDown. The gutter is not used: its reads are
// not tracked, and an L1 must not keep what nobody reports changes of.
func (s *Store) GetTracked(ctx context.Context, key string) ([]byte, error) {
	t, err := s.WrappedTracker()
	if err != nil {
		return nil, err
	}
	n, open := s.route(key)
	if open {
		return nil, downErr(n)
	}
	b, err := t.GetTracked(ctx, key)
	release(n)
	s.observe(n, err)
	return b, err
}

// GetManyTracked is GetTracked for a batch: the keys of healthy nodes in
// one tracked batch, the keys of Down nodes failed at once.
func (s *Store) GetManyTracked(ctx context.Context, keys []string) ([][]byte, error) {
	t, err := s.WrappedTracker()
	if err != nil {
		return nil, err
	}
	vals := make([][]byte, len(keys))
	err = s.leaseOp("get", len(keys), func(i int) string { return keys[i] }, func(idx []int) error {
		v, err := t.GetManyTracked(ctx, pick(keys, idx))
		if len(v) == len(idx) {
			for j, i := range idx {
				vals[i] = v[j]
			}
		}
		return err
	})
	return vals, err
}
