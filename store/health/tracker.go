package health

import (
	"context"
	"errors"
	"fmt"

	"github.com/kuracache/kura/store"
)

var _ store.Tracker = (*Store)(nil)

// errNoTracking is the error of the tracked reads when the wrapped store
// has no tracking capability (Tracking reports false then, so a Cache
// never calls them).
var errNoTracking = errors.New("health: the wrapped store has no tracking capability (store.Tracker)")

// tracker returns the wrapped store's tracking capability.
func (s *Store) tracker() (store.Tracker, bool) {
	t, ok := store.Find[store.Tracker](s.inner)
	return t, ok && t.Tracking()
}

// Tracking reports whether the wrapped store's server reports changes.
// The breaker implements the capability itself so that tracked reads (an
// L1's) go through it: found around it, they would reach a Down node.
func (s *Store) Tracking() bool {
	_, ok := s.tracker()
	return ok
}

// Tracks reports whether the wrapped store reports changes of key.
func (s *Store) Tracks(key string) bool {
	t, ok := s.tracker()
	return ok && t.Tracks(key)
}

// Subscribe registers fn with the wrapped store's reports.
func (s *Store) Subscribe(fn func(keys []string)) (cancel func()) {
	if t, ok := s.tracker(); ok {
		return t.Subscribe(fn)
	}
	return func() {}
}

// GetTracked is a tracked read through the breaker: a key of a Down node
// fails at once with ErrNodeDown. The gutter is not used: its reads are
// not tracked, and an L1 must not keep what nobody reports changes of.
func (s *Store) GetTracked(ctx context.Context, key string) ([]byte, error) {
	t, ok := s.tracker()
	if !ok {
		return nil, fmt.Errorf("%w: %T", errNoTracking, s.inner)
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
	t, ok := s.tracker()
	if !ok {
		return nil, fmt.Errorf("%w: %T", errNoTracking, s.inner)
	}
	vals := make([][]byte, len(keys))
	err := s.leaseOp("get", len(keys), func(i int) string { return keys[i] }, func(idx []int) error {
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
