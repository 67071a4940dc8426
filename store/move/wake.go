package move

import (
	"context"

	"github.com/kuracache/kura/store"
)

var _ store.LeaseWaker = (*Store)(nil)

// WatchedLeaseGet is LeaseGet with watched reads (see store.LeaseWaker):
// each key is read, and its lease taken, on the side LeaseGet would use
// in the current phase, through that side's own WatchedLeaseGet, so the
// side that holds the key reports its next change. watched is true only
// when every side read was watched (a side without the capability, or
// whose push connection is not up, is read plainly: its waiters poll).
func (s *Store) WatchedLeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, bool, error) {
	return s.leaseGet(ctx, keys, opts, true)
}

// WatchLeases registers fn with the lease reports of both sides that
// have them: a key waited for may be leased on either, depending on the
// phase. The returned function unregisters fn from both.
func (s *Store) WatchLeases(fn func(keys []string)) (cancel func()) {
	var cancels []func()
	for _, l := range []store.Leaser{s.oldL, s.newL} {
		if w, ok := l.(store.LeaseWaker); ok {
			cancels = append(cancels, w.WatchLeases(fn))
		}
	}
	return func() {
		for _, c := range cancels {
			c()
		}
	}
}

// sideLeaseGet is one side's lease read: watched through the side's
// LeaseWaker when watch is set and it has one.
func sideLeaseGet(ctx context.Context, l store.Leaser, keys []string, opts store.LeaseOptions, watch bool) ([]store.LeaseResult, bool, error) {
	if w, ok := l.(store.LeaseWaker); ok && watch {
		return w.WatchedLeaseGet(ctx, keys, opts)
	}
	res, err := l.LeaseGet(ctx, keys, opts)
	return res, false, err
}
