package kuraotel

import (
	"context"

	"github.com/kuracache/kura/store"
)

var _ store.LeaseWaker = (*Store)(nil)

// WatchedLeaseGet implements store.LeaseWaker: the wrapped store's
// watched lease read, traced as LeaseGet is. When the wrapped store has
// leases without server reports (memcached), it is LeaseGet and watched
// is false: the Cache's waiters poll, as they would without the wrapper.
func (s *Store) WatchedLeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, bool, error) {
	l, err := s.leaser()
	if err != nil {
		return nil, false, err
	}
	w, ok := l.(store.LeaseWaker)
	if !ok {
		r, err := s.LeaseGet(ctx, keys, opts)
		return r, false, err
	}
	ctx, c := s.start(ctx, "WatchedLeaseGet", first(keys), len(keys))
	r, watched, err := w.WatchedLeaseGet(ctx, keys, opts)
	c.end(err)
	return r, watched, err
}

// WatchLeases registers fn with the wrapped store's lease reports (not
// traced: reports are the server's, not a request's).
func (s *Store) WatchLeases(fn func(keys []string)) (cancel func()) {
	if l, err := s.leaser(); err == nil {
		if w, ok := l.(store.LeaseWaker); ok {
			return w.WatchLeases(fn)
		}
	}
	return func() {}
}
