package kura

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"reflect"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/l1"
	"github.com/kuracache/kura/internal/readthrough"
	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// Loader loads the value for one key from the source of truth (usually a
// database) on a cache miss. It returns ErrNotFound (possibly wrapped) when
// the key does not exist, which the Cache remembers for
// Options.NegativeTTL.
type Loader[V any] func(ctx context.Context, key string) (V, error)

// ManyLoader loads the values for many keys in one call (one SQL query with
// IN (...), say). Keys it leaves out of the returned map do not exist and
// are cached negatively; keys it adds that were not asked for are ignored.
type ManyLoader[V any] func(ctx context.Context, keys []string) (map[string]V, error)

// Cache is a typed read-through cache over a Store. It is safe for
// concurrent use. Several Caches of different value types may share one
// Store (give them distinct key prefixes and Options.Name).
//
// The Cache is the API face: its reads run the one read-through pipeline
// of internal/readthrough (lookup, classify, acquire, load, fill).
type Cache[V any] struct {
	store        store.Store
	opts         Options
	p            *readthrough.Pipeline[V]
	l1           *l1.Tier[V] // nil without Options.L1
	unsub        func()      // the L1's subscription to the store's reports
	coordination string
}

// New returns a Cache of values of type V over s.
func New[V any](s store.Store, opts Options) (*Cache[V], error) {
	if s == nil {
		return nil, errors.New("kura: New needs a store (for example memstore.New)")
	}
	o, err := opts.withDefaults(s)
	if err != nil {
		return nil, err
	}
	tier, tracker, err := newL1[V](s, o.L1)
	if err != nil {
		return nil, err
	}
	c := &Cache[V]{store: s, opts: o, l1: tier, coordination: CoordinationProcess}
	cfg := readthrough.Config{
		Codec: o.Codec, Schema: o.Codec.Fingerprint(reflect.TypeFor[V]()),
		NegativeTTL: o.NegativeTTL, StoreTimeout: o.StoreTimeout, LoadTimeout: o.LoadTimeout,
		SchemaGrace: o.SchemaGrace, LeaseTTL: o.LeaseTTL, LeaseWait: o.LeaseWait,
		StaleWhileRevalidate: o.StaleWhileRevalidate, EarlyRefresh: o.EarlyRefresh,
		MaxValueSize: o.MaxValueSize, WarnValueSize: o.WarnValueSize, OnLargeValue: o.OnLargeValue,
		Jitter: c.opts.jitter, Leaser: leaserOf(s, o), Tracker: tracker, Tracer: o.Tracer,
	}
	if o.OnError != nil {
		cfg.OnError = func(op readthrough.Op, key string, err error) { o.OnError(allOps[op], key, err) }
	}
	if tier != nil {
		if tracker != nil {
			c.unsub = tracker.Subscribe(tier.OnReport)
		}
	}
	if cfg.Leaser != nil {
		c.coordination = CoordinationLeases
	}
	c.p = readthrough.New[V](s, cfg, tier)
	return c, nil
}

// leaserOf returns the store's lease capability when the Cache uses it.
func leaserOf(s store.Store, o Options) store.Leaser {
	if o.Leases == LeasesOff {
		return nil
	}
	l, _ := store.FindLeaser(s)
	return l
}

// newL1 builds the L1 tier of o (defaults filled in) over s, or nil without one; tracker is
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
	ttl := o.MaxTTL // filled in by withDefaults
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
	t, err := l1.New[V](o.MaxBytes, ttl, maxAge, cloneFunc[V]())
	if err != nil {
		return nil, nil, fmt.Errorf("kura: L1: %w", err)
	}
	return t, tracker, nil
}

// Store returns the underlying Store.
func (c *Cache[V]) Store() store.Store { return c.store }

// Name returns Options.Name.
func (c *Cache[V]) Name() string { return c.opts.Name }

// Codec returns the codec the Cache encodes and decodes its entries with
// (Options.Codec, or the one New made for Options.Envelope), so a tool
// that reads the store directly (the staleness inspector, cdc/staleness)
// reads entries exactly as the Cache does.
func (c *Cache[V]) Codec() *codec.Codec { return c.opts.Codec }

// Stats returns a snapshot of the counters.
func (c *Cache[V]) Stats() Stats {
	s := snapshot(c.p.Counters(), c.opts.Name, c.coordination)
	if c.l1 != nil {
		t := c.l1.Stats()
		s.L1 = L1Stats{Hits: t.Hits + t.NegativeHits, Misses: t.Misses, Entries: t.Entries, Bytes: t.Bytes,
			Evictions: t.Evictions, Invalidations: t.Invalidations, Flushes: t.Flushes}
		s.Hits += t.Hits
		s.NegativeHits += t.NegativeHits
	}
	if h, ok := store.Find[store.HealthReporter](c.store); ok {
		s.Nodes = h.NodeHealth()
	}
	if r, ok := store.Find[store.ConnReporter](c.store); ok {
		cs := r.ConnStats()
		s.Conn = &cs
	}
	return s
}

// Close releases the L1 tier (its clean-up goroutine and its subscription
// to the store's invalidations). It does not close the Store, which may be
// shared. A Cache without an L1 has nothing to release.
func (c *Cache[V]) Close() error {
	if c.l1 != nil {
		if c.unsub != nil {
			c.unsub()
		}
		c.l1.Close()
	}
	return nil
}

// Fetch returns the value for key from the cache, or calls loader on a miss
// and caches what it returns for ttl (0 = Options.TTL, NoExpiry = never).
//
// Concurrent Fetches of one key in this process share one loader call; if
// a load ended since the first look, the shared load checks the cache once
// more before loading, so a value filled by a load that just ended is not
// loaded again (and a plain cold miss costs one read, not two). The shared load runs on a
// context that keeps the values of the first caller's ctx but not its
// cancellation, bounded by Options.LoadTimeout: a caller whose ctx ends
// gets ctx's error at once, and the load goes on for the others.
//
// If loader returns an error matching ErrNotFound, Fetch returns it and
// caches the absence for Options.NegativeTTL; other loader errors are
// returned and not cached. If loader panics, the Fetch that started the
// load panics with a *flight.PanicError in its own goroutine (so the
// caller's recover, such as net/http's, works), and Fetches that shared
// the load get an error matching ErrLoaderPanicked; nothing is cached.
//
// Cache failures never reach the caller: a store that errs or stalls (the
// store work of one Fetch is bounded by Options.StoreTimeout), or bytes
// that do not decode, count as a miss, and a failed write-back is counted
// and reported to Options.OnError.
//
// On a store with leases (Options.Leases, Stats.Coordination "leases"),
// a miss takes a lease: only its holder, in any process, calls the loader,
// and its write-back is dropped if an Invalidate came in between; the
// other callers wait for the holder's value (at most Options.LeaseWait,
// then they load without writing back). See docs/leases.md.
func (c *Cache[V]) Fetch(ctx context.Context, key string, ttl time.Duration, loader Loader[V]) (V, error) {
	var zero V
	if err := store.CheckKey(key); err != nil {
		return zero, err
	}
	ttl, err := c.opts.resolveTTL(ttl)
	if err != nil {
		return zero, err
	}
	if loader == nil {
		return zero, errors.New("kura: Fetch needs a loader")
	}
	return c.p.Fetch(ctx, key, ttl, readthrough.Loader[V](loader)) // its kura.Fetch span too
}

// FetchMany returns the values for keys: one batched cache read, one loader
// call with every key that missed, and one batched write-back of what the
// loader returned, so N keys cost at most three round trips per cache
// server whatever N is.
//
// Keys that do not exist (cached as absent, or left out by the loader) are
// left out of the map; the loader's omissions are cached negatively. A
// loader error is returned together with the hits read from the cache.
// Duplicate keys are read once. Cache failures are absorbed as in Fetch.
//
// FetchMany runs the same steps as Fetch (Fetch is its one-key case): a
// missing key that a concurrent Fetch or FetchMany of this process is
// loading already is not loaded again, but shared; the loader is called
// once with the keys no other caller loads. That call runs on a context
// that keeps ctx's values but not its cancellation, bounded by
// Options.LoadTimeout: a caller whose ctx ends gets ctx's error at once
// (with the hits read so far) and the load goes on for the others. If the
// loader panics, FetchMany panics with a *flight.PanicError in the
// caller's goroutine, and callers that shared the load get an error
// matching ErrLoaderPanicked.
//
// One FetchMany may call its loader more than once, and those calls may
// run at the same time: with leases, the keys it holds a lease on and the
// keys it loads without a lease (after a lease wait ran out, or a lease
// lost to an Invalidate) are separate loads. A loader must be safe for
// concurrent use, as it already must be when several callers share it.
//
// With leases it takes a lease on every missing key in the same batched
// read, calls the loader once with the keys it holds, fills them in one
// batched conditional write, and waits for the keys other callers (in any
// process) hold; with Options.EarlyRefresh it also serves keys due for
// refresh from the cache and reloads them in the background, with one
// loader call for all of them; see docs/leases.md.
func (c *Cache[V]) FetchMany(ctx context.Context, keys []string, ttl time.Duration, loader ManyLoader[V]) (map[string]V, error) {
	keys, err := uniqueKeys(keys)
	if err != nil {
		return nil, err
	}
	if ttl, err = c.opts.resolveTTL(ttl); err != nil {
		return nil, err
	}
	if loader == nil {
		return nil, errors.New("kura: FetchMany needs a loader")
	}
	return c.p.FetchMany(ctx, keys, ttl, readthrough.ManyLoader[V](loader)) // its kura.FetchMany span too
}

// Invalidate removes keys so that the next read loads them again, and
// voids every lease on them: a load that started before Invalidate (and
// may have read the old row) cannot write its value back after it.
//
// What a reader may see once Invalidate has returned:
//   - with leases (Stats.Coordination "leases") and StaleWhileRevalidate
//     off: never the old value; the first reader loads, others wait for
//     its fill (at most Options.LeaseWait, then they load for themselves);
//   - with StaleWhileRevalidate on memcached: the old value, for at most
//     StaleWhileRevalidate, while exactly one reader reloads it;
//   - without leases: Invalidate is DeleteMany, and a load that was in
//     flight may still write the old value back after it.
func (c *Cache[V]) Invalidate(ctx context.Context, keys ...string) error {
	keys, err := uniqueKeys(keys)
	if err != nil || len(keys) == 0 {
		return err
	}
	return traced0(ctx, c.opts.Tracer, observe.Invalidate, keys[0], len(keys), func(ctx context.Context) error {
		return c.p.Invalidate(ctx, keys)
	})
}

// Get returns the cached value for key. It returns an error matching
// ErrNotFound on a miss or when the key is cached as absent, ErrMalformed
// when the cached bytes do not decode, and the store's error otherwise.
func (c *Cache[V]) Get(ctx context.Context, key string) (V, error) {
	if err := store.CheckKey(key); err != nil {
		var zero V
		return zero, err
	}
	return traced(ctx, c.opts.Tracer, observe.Get, key, 1, func(ctx context.Context) (V, error) {
		return c.p.Get(ctx, key)
	})
}

// Set stores v under key for ttl (0 = Options.TTL, NoExpiry = never;
// Options.TTLJitter applies).
func (c *Cache[V]) Set(ctx context.Context, key string, v V, ttl time.Duration) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	ttl, err := c.opts.resolveTTL(ttl)
	if err != nil {
		return err
	}
	buf := readthrough.GetEncBuf() // reused once the store's Set returned
	defer readthrough.PutEncBuf(buf)
	b, err := c.p.EncodeTo(buf, key, v, codec.Fields{})
	if err != nil {
		return err
	}
	return traced0(ctx, c.opts.Tracer, observe.Set, key, 1, func(ctx context.Context) error {
		return c.p.Set(ctx, key, b, ttl)
	})
}

// Delete removes key. Deleting a missing key is not an error.
func (c *Cache[V]) Delete(ctx context.Context, key string) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	return traced0(ctx, c.opts.Tracer, observe.Delete, key, 1, func(ctx context.Context) error {
		return c.p.Delete(ctx, key)
	})
}

// GetMany returns the cached values of keys in one round trip per server.
// Keys that are missing, cached as absent or unreadable are left out of the
// map. A *store.BatchError names keys that failed (store errors, or
// ErrMalformed for bytes that did not decode); the map still holds every
// key that succeeded.
func (c *Cache[V]) GetMany(ctx context.Context, keys []string) (map[string]V, error) {
	keys, err := uniqueKeys(keys)
	if err != nil {
		return nil, err
	}
	return traced(ctx, c.opts.Tracer, observe.GetMany, first(keys), len(keys), func(ctx context.Context) (map[string]V, error) {
		return c.p.GetMany(ctx, keys)
	})
}

// SetMany stores every item for ttl in one round trip per server. Values
// that fail to encode or exceed the size limit are reported in the
// *store.BatchError together with store failures; all others are written.
func (c *Cache[V]) SetMany(ctx context.Context, items map[string]V, ttl time.Duration) error {
	ttl, err := c.opts.resolveTTL(ttl)
	if err != nil {
		return err
	}
	be := store.BatchError{Op: "set"}
	batch := make([]store.Item, 0, len(items))
	buf := readthrough.GetEncBuf() // every item's bytes: reused once SetMany returned
	defer readthrough.PutEncBuf(buf)
	for k, v := range items {
		if err := store.CheckKey(k); err != nil {
			be.Add(k, err)
			continue
		}
		b, err := c.p.EncodeTo(buf, k, v, codec.Fields{})
		if err != nil {
			be.Add(k, err)
			continue
		}
		batch = append(batch, store.Item{Key: k, Value: b, TTL: c.opts.jitter(ttl)})
	}
	if err := traced0(ctx, c.opts.Tracer, observe.SetMany, "", len(batch), func(ctx context.Context) error {
		return c.p.SetMany(ctx, batch)
	}); err != nil {
		var sbe *store.BatchError
		if !errors.As(err, &sbe) {
			return err
		}
		be.Merge(sbe, nil)
	}
	return be.Err()
}

// DeleteMany removes keys in one round trip per server.
func (c *Cache[V]) DeleteMany(ctx context.Context, keys []string) error {
	keys, err := uniqueKeys(keys)
	if err != nil || len(keys) == 0 {
		return err
	}
	return traced0(ctx, c.opts.Tracer, observe.DeleteMany, keys[0], len(keys), func(ctx context.Context) error {
		return c.p.DeleteMany(ctx, keys)
	})
}

// options returns a copy of the Cache's Options, defaults filled: what a
// Cache built beside it (an index's) starts from.
func (c *Cache[V]) options() Options { return c.opts }

// tracer is Options.Tracer: the views over a Cache trace through it.
func (c *Cache[V]) tracer() observe.Tracer { return c.opts.Tracer }

func (c *Cache[V]) reportErr(op Op, key string, err error) {
	if c.opts.OnError != nil {
		c.opts.OnError(op, key, err)
	}
}

// uniqueKeys validates keys and drops duplicates, keeping the first
// occurrence's order. Keys without duplicates (the usual batch) come back
// as they are, not copied: the read path and the stores only read them.
// Up to stackDedup keys the duplicates are looked for with a hash table on
// the stack, so that such a batch allocates nothing here (a map cost a
// warm FetchMany of 100 keys about 5 % of its CPU).
func uniqueKeys(keys []string) ([]string, error) {
	for _, k := range keys {
		if err := store.CheckKey(k); err != nil {
			return nil, err
		}
	}
	switch n := len(keys); {
	case n < 2:
		return keys, nil
	case n <= 8:
		for j := 1; j < n; j++ {
			for i := range j {
				if keys[i] == keys[j] {
					return dedupe(keys), nil
				}
			}
		}
		return keys, nil
	case n > stackDedup:
		return dedupe(keys), nil
	}
	// Open addressing over a power of two at least twice len(keys): each
	// entry is a position in keys plus one, 0 when empty.
	var table [2 * stackDedup]uint16
	mask := uint64(1)
	for mask < uint64(2*len(keys)) {
		mask <<= 1
	}
	mask--
	for j, k := range keys {
		for i := maphash.String(keySeed, k) & mask; ; i = (i + 1) & mask {
			at := table[i]
			if at == 0 {
				table[i] = uint16(j + 1)
				break
			}
			if keys[at-1] == k {
				return dedupe(keys), nil
			}
		}
	}
	return keys, nil
}

// dedupe is keys without their duplicates, first occurrences in order, in
// a new slice.
func dedupe(keys []string) []string {
	seen := make(map[string]struct{}, len(keys))
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}

// stackDedup is the most keys uniqueKeys checks without a map.
const stackDedup = 256

var keySeed = maphash.MakeSeed()
