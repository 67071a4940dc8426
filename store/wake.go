package store

import "context"

// LeaseWaker is an optional capability of a Leaser whose server reports
// changes of the keys a waiter read, so that callers waiting for another
// caller's lease wake when its fill (or an invalidation, or the lease's
// release) lands, instead of polling for it: redisstore does it with
// client tracking on a connection of the lease path's own. A Leaser
// without it is polled (memcached).
//
// The order on one connection is what makes it safe, as for Tracker: the
// reply of a watched read comes before any report of a later change of
// its keys, so a waiter that reads, finds another caller's lease and
// waits for the report cannot miss the fill. A report the server never
// sends (a push lost on a connection that stays up) is not detectable;
// a caller therefore keeps a slow poll as well.
//
// A wrapper that implements Leaser implements LeaseWaker too and routes
// the watched reads through itself (a breaker fails the keys of a Down
// node); with nothing to route to it reports watched == false.
type LeaseWaker interface {
	// WatchedLeaseGet is Leaser.LeaseGet, and asks the server to report
	// the next change of each key it read to the functions given to
	// WatchLeases. watched is false when it could not ask (the push
	// connection is not up, or the store has none): the results are
	// then plain LeaseGet's, and the caller polls.
	WatchedLeaseGet(ctx context.Context, keys []string, opts LeaseOptions) (res []LeaseResult, watched bool, err error)
	// WatchLeases registers fn, called with the keys whose change the
	// server reported after a WatchedLeaseGet read them, or with nil when
	// reports may have been lost (the push connection broke, the server
	// was flushed): whoever waits should read again. fn runs on the
	// connection's reader: it must be fast and must not block. The
	// returned function unregisters fn.
	WatchLeases(fn func(keys []string)) (cancel func())
}
