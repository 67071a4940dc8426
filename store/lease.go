package store

import (
	"context"
	"time"
)

// Leaser is the optional capability behind cross-process read-through
// without stampedes or stale fills (Facebook's memcache leases, NSDI '13).
//
// A reader that misses takes a lease: a short-lived placeholder under the
// key that only one caller, in any process, can hold. The holder loads the
// value and fills the key on condition that it still holds the lease; an
// invalidation (or the lease's expiry) voids the lease, so a fill that
// raced an invalidation is dropped instead of caching what the loader read
// before the change. Everyone else waits for the fill and reads again.
//
// The store moves bytes only: placeholders are bytes the caller supplies
// (LeaseOptions.Placeholder), and the caller (the kura Cache) tells its own
// placeholders from values when it decodes.
type Leaser interface {
	// LeaseGet reads keys and takes a lease on each one that holds
	// nothing: on memcached in the same round trip (mg with N), on Redis
	// with a GET first and a SET NX placeholder only for the misses, so a
	// hit is a plain read. Results are aligned with keys. Per-key
	// failures come in a *BatchError (their results are zero); another
	// error failed the whole call.
	LeaseGet(ctx context.Context, keys []string, opts LeaseOptions) ([]LeaseResult, error)
	// Fill writes each value on condition that its lease is still held.
	// A fill whose lease was lost (invalidated, expired, taken over) is
	// not stored and is reported in the *BatchError with an error matching
	// ErrNotStored.
	Fill(ctx context.Context, fills []Fill) error
	// Release gives up leases whose holder will not fill (its loader
	// failed), so that waiters need not wait out the lease TTL. A lease
	// already lost is no failure.
	Release(ctx context.Context, leases []Lease) error
	// Invalidate voids every lease on keys and removes their values, so
	// that no fill started before it is stored. With stale > 0, a store
	// that can (memcached) keeps the old value for up to stale, marked
	// stale, and hands exactly one reader a lease to refill it
	// (stale-while-revalidate); other stores ignore stale.
	Invalidate(ctx context.Context, keys []string, stale time.Duration) error
}

// LeaseOptions configure a LeaseGet.
type LeaseOptions struct {
	// TTL is how long a lease lives if its holder neither fills nor
	// releases it (it died): then another reader takes over. memcached
	// rounds it up to whole seconds. It must be positive.
	TTL time.Duration
	// Placeholder is what a store that writes placeholders (Redis) stores
	// under a key while the lease is held; Fill compares it to tell its
	// own lease from a later one, so it must be unique per lease taken. A
	// store writes it only under keys that held nothing, so a caller may
	// offer it again to a later call when every result of this one has a
	// Value and none is Won.
	Placeholder []byte
	// Recache, when positive, asks for early refresh: a hit whose
	// remaining TTL is below Recache hands exactly one reader a lease
	// (Won) besides the value (memcached's R flag). Stores that cannot
	// tell remaining TTLs in the same round trip ignore it.
	Recache time.Duration
}

// LeaseResult is what LeaseGet found for one key.
type LeaseResult struct {
	// Value is the bytes under the key, nil when there are none. On a
	// store that writes placeholders it may be another caller's
	// placeholder. They belong to the caller, as Get's do.
	Value []byte
	// Stale reports a value an invalidation marked stale (see
	// Leaser.Invalidate).
	Stale bool
	// Won reports that this caller holds the lease: it should load the
	// key and Fill it (or Release the lease). Won may come with a Value:
	// a stale one, or a fresh one due for early refresh.
	Won bool
	// Held reports that another caller holds the lease: wait for its fill
	// and read again.
	Held bool
	// Lease is the claim to fill with when Won. With a Value and not
	// Won, a store may set it to the value's own version (memcached's
	// CAS, or on Redis the bytes themselves as Token) so that a caller
	// can replace the value on condition that it did not change
	// (probabilistic early refresh); Fill then refuses if it did.
	Lease Lease
}

// Lease is a claim to fill one key. Its fields are the store's business.
type Lease struct {
	Key string
	// CAS is the compare-and-set token of the lease (memcached).
	CAS uint64
	// Token is the placeholder the lease wrote (Redis).
	Token []byte
}

// Fill is one conditional write of a leased key.
type Fill struct {
	Lease Lease
	Value []byte
	// TTL is the value's time to live; zero means no expiry.
	TTL time.Duration
}

// LeaseCapable is implemented by wrappers (a circuit breaker, say) that
// implement Leaser by routing the calls to the store they wrap, which may
// or may not have leases: CanLease says whether it does. A Leaser that
// does not implement LeaseCapable can always lease.
type LeaseCapable interface {
	CanLease() bool
}

// FindLeaser returns the lease capability of s: the first Leaser in the
// chain s, s.Unwrap(), ... (see Find), unless it reports through
// LeaseCapable that it cannot lease.
func FindLeaser(s Store) (Leaser, bool) {
	l, ok := Find[Leaser](s)
	if !ok {
		return nil, false
	}
	if c, ok := l.(LeaseCapable); ok && !c.CanLease() {
		return nil, false
	}
	return l, true
}
