package store

import "context"

// Tracker is implemented by stores whose server tells the client when a
// key it read changes: Redis client-side caching (CLIENT TRACKING), which
// redisstore turns on with its Options.Tracking. kura's in-process L1 tier
// reads through a Tracker and drops a key from every process's L1 when the
// server reports it changed.
//
// The order of events on one connection is what makes this safe: the
// server sends the reply of a tracked read before any report of a later
// change of that key, and handlers run in that order. A reader that
// registers its interest before GetTracked and checks for a report after
// it (a placeholder, as Redis's client-side caching documentation
// describes) never keeps a value the server has already reported changed.
type Tracker interface {
	// Tracking reports whether the server reports changes: false when
	// tracking is off (the store then behaves as if it had no Tracker).
	Tracking() bool
	// GetTracked is Get, and asks the server to report the next change of
	// key (a write or delete by any client, expiry, eviction) to the
	// handlers given to Subscribe.
	GetTracked(ctx context.Context, key string) ([]byte, error)
	// GetManyTracked is BatchGetter.GetMany with tracking, with the same
	// result contract.
	GetManyTracked(ctx context.Context, keys []string) ([][]byte, error)
	// Tracks reports whether changes of key are reported at all (false for
	// keys outside the prefixes of broadcast tracking): a key it does not
	// track must not be kept in a tier that relies on reports.
	Tracks(key string) bool
	// Subscribe registers fn, called with the keys the server reported
	// changed, or with nil when everything must be dropped: the connection
	// that carried the reports broke (reports may have been lost), or the
	// server was flushed. fn runs on the connection's reader, in order with
	// replies: it must be fast and must not block. The returned function
	// unregisters fn.
	Subscribe(fn func(keys []string)) (cancel func())
}
