package kura

import (
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/internal/l1"
	"github.com/kuracache/kura/store"
)

// DefaultL1MaxTTL is L1Options.MaxTTL when left at zero.
const DefaultL1MaxTTL = 5 * time.Minute

// L1Options configures the in-process L1 tier of a Cache: decoded values
// kept in the process, so a hit costs neither a round trip nor a decode.
// The zero value (MaxBytes 0) turns it off.
//
// An L1 must not serve a value another process has changed. Over a store
// whose server reports changes (store.Tracker: redisstore with
// Options.Tracking, on Redis or Redis Cluster) a key read into the L1 is
// dropped when the server reports its change; over any other store
// (memcached, Redis without tracking) the L1 is refused unless
// MaxStaleness is set, and then a value is served from it for at most
// MaxStaleness after it was read, however it changed meanwhile.
type L1Options struct {
	// MaxBytes bounds the memory of the L1, as estimated per entry: the
	// key, the size of V itself, twice the serialized (uncompressed) size
	// of the value for what it points to (Go strings, slices and maps take
	// more room than msgpack), and 96 bytes of bookkeeping. Entries beyond
	// the bound are evicted by W-TinyLFU, which admits a new key only if it
	// is used more often than the one it would evict, so a scan of one-off
	// keys does not push out hot ones. Zero turns the L1 off; negative is
	// invalid.
	MaxBytes int64

	// MaxTTL bounds how long a value stays in the L1 without being read
	// from the server again, however long it lives there. It bounds the
	// harm of a report the server never sent (a cluster slot moved to
	// another node). If zero, DefaultL1MaxTTL (5 minutes).
	MaxTTL time.Duration

	// MaxStaleness allows an L1 over a store with no server-assisted
	// invalidation (memcached; Redis without redisstore's
	// Options.Tracking), and is the staleness bound it then has: a value
	// is served from the L1 for at most MaxStaleness after the store read
	// that filled it began, even if another process changed or deleted it in
	// the meantime (writes through this Cache drop the key at once). If
	// zero, such a store with MaxBytes set is an error. Ignored over a
	// tracking store.
	MaxStaleness time.Duration
}

// Cloner is implemented by value types whose L1 hits should return a copy.
// A Cache with an L1 returns the value it holds to every caller that hits
// it: for a struct the struct itself is copied, but the slices, maps and
// pointers in it are shared, so callers must treat them as read-only. If V
// implements Cloner, every L1 hit returns v.Clone() instead (BENCHMARKS.md,
// "L1": shared vs copied hits).
type Cloner[V any] interface {
	Clone() V
}

// L1Stats are the counters of a Cache's L1 tier (all zero without one).
type L1Stats struct {
	// Hits counts reads answered by the L1, of a value or of a negative
	// entry (included in Stats.Hits and Stats.NegativeHits); Misses reads
	// that went on to the store.
	Hits, Misses uint64
	// Entries and Bytes are the L1's current size: entries, and their
	// estimated memory (L1Options.MaxBytes).
	Entries, Bytes uint64
	// Evictions counts entries evicted to stay within MaxBytes.
	Evictions uint64
	// Invalidations counts keys the server reported changed;
	// Flushes counts "drop everything" events (a tracking connection
	// broke, FLUSHALL).
	Invalidations, Flushes uint64
}

// Coordination values of Stats.Coordination: the guarantee a Cache gives.
const (
	// CoordinationLeases: loads of a missing key are coordinated through
	// the store's leases, across every process that shares the store.
	CoordinationLeases = "leases"
	// CoordinationProcess: loads are shared within this process only
	// (singleflight); processes load independently and a fill may race an
	// invalidation.
	CoordinationProcess = "process"
)

// leaseDefaults fills in and checks the lease options against the store.
func (o *Options) leaseDefaults(s store.Store) error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"LeaseTTL", o.LeaseTTL}, {"LeaseWait", o.LeaseWait}, {"StaleWhileRevalidate", o.StaleWhileRevalidate}, {"EarlyRefresh", o.EarlyRefresh}} {
		if f.d < 0 {
			return fmt.Errorf("kura: Options.%s must not be negative, got %v", f.name, f.d)
		}
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.LeaseWait == 0 {
		o.LeaseWait = DefaultLeaseWait
	}
	_, has := store.FindLeaser(s)
	switch o.Leases {
	case LeasesAuto:
	case LeasesOff:
		if o.StaleWhileRevalidate > 0 || o.EarlyRefresh > 0 {
			return errors.New("kura: Options.StaleWhileRevalidate and Options.EarlyRefresh need leases, but Options.Leases is LeasesOff")
		}
	case LeasesRequired:
		if !has {
			return fmt.Errorf("kura: Options.Leases is LeasesRequired but the store (%T) has no lease capability (store.Leaser)", s)
		}
	default:
		return fmt.Errorf("kura: Options.Leases has an unknown value %d", o.Leases)
	}
	return nil
}

// leaserOf returns the store's lease capability when the Cache uses it.
func leaserOf(s store.Store, o Options) store.Leaser {
	if o.Leases == LeasesOff {
		return nil
	}
	l, _ := store.FindLeaser(s)
	return l
}

// newL1 builds the L1 tier of opts over s, or nil without one; tracker is
// the store's change reports it relies on (nil: bounded by MaxStaleness).
func newL1[V any](s store.Store, o L1Options) (*l1.Tier[V], store.Tracker, error) {
	if o.MaxBytes == 0 {
		return nil, nil, nil
	}
	if o.MaxBytes < 0 {
		return nil, nil, fmt.Errorf("kura: Options.L1.MaxBytes must not be negative, got %d", o.MaxBytes)
	}
	if o.MaxTTL < 0 || o.MaxStaleness < 0 {
		return nil, nil, errors.New("kura: Options.L1.MaxTTL and MaxStaleness must not be negative")
	}
	ttl := o.MaxTTL
	if ttl == 0 {
		ttl = DefaultL1MaxTTL
	}
	var tracker store.Tracker
	var maxAge time.Duration
	if t, ok := store.Find[store.Tracker](s); ok && t.Tracking() {
		tracker = t
	} else {
		maxAge = o.MaxStaleness
		if o.MaxStaleness == 0 {
			return nil, nil, errors.New("kura: Options.L1 needs a store whose server reports changes (redisstore with Options.Tracking) or, to accept stale reads, Options.L1.MaxStaleness (memcached and other stores: a value may be served that long after another process changed it)")
		}
		ttl = min(ttl, o.MaxStaleness)
	}
	t, err := l1.New[V](o.MaxBytes, ttl, maxAge)
	if err != nil {
		return nil, nil, fmt.Errorf("kura: L1: %w", err)
	}
	return t, tracker, nil
}
