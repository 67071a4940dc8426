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
// (WatchLeases comes with store.Forward: reports are the server's, not a
// request's, and are not traced.)
func (s *Store) WatchedLeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, bool, error) {
	w, ok := s.WrappedWaker()
	if !ok { // no leases (LeaseGet says so) or no wake-ups
		r, err := s.LeaseGet(ctx, keys, opts)
		return r, false, err
	}
	ctx, c := s.start(ctx, "WatchedLeaseGet", first(keys), len(keys))
	r, watched, err := w.WatchedLeaseGet(ctx, keys, opts)
	c.end(err)
	return r, watched, err
}
