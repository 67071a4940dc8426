package kura

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/flight"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
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
type Cache[V any] struct {
	store store.Store
	opts  Options
	stats *counters
	group flight.Group[V]
	// leaser is the store's lease capability when the Cache uses it
	// (Options.Leases), nil otherwise.
	leaser store.Leaser
	// holders runs the loads of lease holders, apart from group (where
	// waiters share their polling), so a caller that wins a lease never
	// joins a wait and has to give the lease up.
	holders flight.Group[V]
	// hub polls, for FetchMany, the keys other callers hold leases on.
	hub waitHub
	// schema is the fingerprint of V as the Codec encodes it (schema.go).
	schema uint32
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
	c := &Cache[V]{store: s, opts: o, stats: newCounters(), leaser: leaserOf(s, o),
		schema: o.Codec.Fingerprint(reflect.TypeFor[V]())}
	c.stats.coordination = CoordinationProcess
	if c.leaser != nil {
		c.stats.coordination = CoordinationLeases
	}
	return c, nil
}

// Store returns the underlying Store.
func (c *Cache[V]) Store() store.Store { return c.store }

// Stats returns a snapshot of the counters.
func (c *Cache[V]) Stats() Stats {
	s := c.stats.snapshot(c.opts.Name)
	if h, ok := store.Find[*health.Store](c.store); ok {
		s.Nodes = h.Stats().Nodes
	}
	return s
}

// Name returns Options.Name.
func (c *Cache[V]) Name() string { return c.opts.Name }

// entry is a decoded cached value.
type entry[V any] struct {
	v        V
	negative bool
	// fields are the envelope's header fields (write time, TTL, load
	// cost), for early refresh.
	fields codec.Fields
	// keep marks an entry written for another type, too recently to
	// overwrite (Options.SchemaGrace): a read-through does not fill it.
	keep bool
}

// encode serialises v and enforces the size guards. It never logs or
// returns the value itself. The envelope carries V's schema fingerprint
// and the write time, so a reader of another type knows the value is not
// its own and how recent it is (schema.go).
func (c *Cache[V]) encode(key string, v V) ([]byte, error) {
	return c.encodeWith(key, v, codec.Fields{})
}

// encodeWith is encode with envelope header fields (early refresh's TTL
// and load cost); the schema fingerprint and the write time are always
// set.
func (c *Cache[V]) encodeWith(key string, v V, f codec.Fields) ([]byte, error) {
	f.Schema, f.HasSchema = c.schema, true
	if f.Written.IsZero() {
		f.Written = time.Now()
	}
	b, h, err := c.opts.Codec.EncodeWith(nil, v, f)
	if err != nil {
		if errors.Is(err, codec.ErrValueTooLarge) {
			// One sentinel for callers, whichever limit refused it.
			c.stats.rejected.Add(1)
			return nil, fmt.Errorf("%w: key %q: %w", ErrValueTooLarge, key, err)
		}
		return nil, fmt.Errorf("kura: encode %q: %w", key, err)
	}
	if err := c.checkSize(key, len(b)); err != nil {
		return nil, err
	}
	c.stats.bytesW.Add(uint64(len(b)))
	c.stats.bytesWRaw.Add(uint64(h.RawLen))
	c.stats.dictBytes.add(h.Dict, len(b))
	return b, nil
}

func (c *Cache[V]) checkSize(key string, n int) error {
	if c.opts.MaxValueSize > 0 && n > c.opts.MaxValueSize {
		c.stats.rejected.Add(1)
		return fmt.Errorf("%w: key %q encodes to %d bytes, over the limit of %d (Options.MaxValueSize or the server's item size limit); split the value or raise the limit",
			ErrValueTooLarge, key, n, c.opts.MaxValueSize)
	}
	if c.opts.WarnValueSize > 0 && n > c.opts.WarnValueSize {
		c.stats.large.Add(1)
		if c.opts.OnLargeValue != nil {
			c.opts.OnLargeValue(key, n)
		}
	}
	return nil
}

func (c *Cache[V]) encodeNegative() []byte {
	b := c.opts.Codec.EncodeNegative(nil)
	c.stats.bytesW.Add(uint64(len(b)))
	return b
}

func (c *Cache[V]) decode(key string, data []byte) (entry[V], error) {
	var e entry[V]
	h, err := c.opts.Codec.DecodeSchema(data, &e.v, c.schema)
	if err != nil {
		if errors.Is(err, codec.ErrSchemaMismatch) {
			c.stats.schemaMismatches.Add(1)
			e.keep = c.tooYoungToOverwrite(h)
		} else {
			c.stats.decodeErrs.Add(1)
		}
		return e, fmt.Errorf("kura: decode %q (%d bytes): %w", key, len(data), err)
	}
	c.stats.bytesR.Add(uint64(len(data)))
	c.stats.bytesRRaw.Add(uint64(h.RawLen))
	e.fields = h.Fields
	switch h.Kind {
	case codec.KindValue:
	case codec.KindNegative:
		e.negative = true
	default:
		// A lease placeholder or a tombstone holds no value: a miss.
		return e, fmt.Errorf("kura: %q holds a %s entry: %w", key, h.Kind, errNoValue)
	}
	return e, nil
}

func (c *Cache[V]) reportErr(op Op, key string, err error) {
	if c.opts.OnError != nil {
		c.opts.OnError(op, key, err)
	}
}

// absent is the error for a key cached as "not found".
func absent(key string) error {
	return fmt.Errorf("kura: %q is cached as absent: %w", key, ErrNotFound)
}

// found decodes bytes the store returned for key and counts the result: a
// hit, a negative hit, or (bytes that do not decode) a miss.
func (c *Cache[V]) found(key string, data []byte) (entry[V], error) {
	if isPlaceholder(data) {
		// Another caller's lease (or a tombstone): no value, a miss.
		c.stats.misses.Add(1)
		return entry[V]{}, errMiss
	}
	e, err := c.decode(key, data)
	switch {
	case err != nil:
		c.stats.misses.Add(1)
	case e.negative:
		c.stats.negHits.Add(1)
	default:
		c.stats.hits.Add(1)
	}
	return e, err
}

// read is one timed store Get with the counting every reader shares. A
// store error is counted as such, not as a miss; the read-through path,
// which falls back to the loader, counts the miss itself.
func (c *Cache[V]) read(ctx context.Context, key string) (entry[V], error) {
	start := time.Now()
	data, err := c.store.Get(ctx, key)
	c.stats.since(OpGet, start)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			c.stats.misses.Add(1)
		} else {
			c.stats.storeErrs.Add(1)
		}
		return entry[V]{}, err
	}
	return c.found(key, data)
}

// countBatchErr counts the keys a batch call failed: those named in a
// *store.BatchError, or all n when the whole call failed.
func (c *Cache[V]) countBatchErr(err error, n int) {
	if err == nil {
		return
	}
	var be *store.BatchError
	if errors.As(err, &be) {
		n = len(be.Errors)
	}
	c.stats.storeErrs.Add(uint64(n))
}

// Get returns the cached value for key. It returns an error matching
// ErrNotFound on a miss or when the key is cached as absent, ErrMalformed
// when the cached bytes do not decode, and the store's error otherwise.
func (c *Cache[V]) Get(ctx context.Context, key string) (V, error) {
	var zero V
	if err := store.CheckKey(key); err != nil {
		return zero, err
	}
	e, err := c.read(ctx, key)
	if err != nil {
		return zero, err
	}
	if e.negative {
		return zero, absent(key)
	}
	return e.v, nil
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
	b, err := c.encode(key, v)
	if err != nil {
		return err
	}
	start := time.Now()
	err = c.store.Set(ctx, key, b, c.opts.jitter(ttl))
	c.stats.since(OpSet, start)
	if err != nil {
		c.stats.storeErrs.Add(1)
	}
	return err
}

// Delete removes key. Deleting a missing key is not an error.
func (c *Cache[V]) Delete(ctx context.Context, key string) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	start := time.Now()
	err := c.store.Delete(ctx, key)
	c.stats.since(OpDelete, start)
	if err != nil {
		c.stats.storeErrs.Add(1)
	}
	return err
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
	out := make(map[string]V, len(keys))
	be := store.BatchError{Op: "get"}
	err = c.getMany(ctx, keys, func(key string, e entry[V], err error) {
		switch {
		case err == errMiss:
		case err != nil:
			be.Errors = append(be.Errors, store.KeyError{Key: key, Err: err})
		case !e.negative:
			out[key] = e.v
		}
	})
	if err != nil {
		return out, err
	}
	return out, be.Err()
}

// getMany reads keys in one batch and calls fn once per key: with err nil
// for a hit (e.negative for a key cached as absent), errMiss for a plain
// miss, or the key's own failure. A non-nil result means the whole batch
// failed and fn was not called.
func (c *Cache[V]) getMany(ctx context.Context, keys []string, fn func(key string, e entry[V], err error)) error {
	if len(keys) == 0 {
		return nil
	}
	start := time.Now()
	vals, err := store.GetMany(ctx, c.store, keys)
	c.stats.since(OpGetMany, start)
	var failed map[string]error
	if err != nil {
		var be *store.BatchError
		if !errors.As(err, &be) {
			c.stats.storeErrs.Add(uint64(len(keys)))
			c.stats.misses.Add(uint64(len(keys)))
			return err
		}
		failed = be.Failed()
		c.stats.storeErrs.Add(uint64(len(failed)))
	}
	if len(vals) != len(keys) {
		return fmt.Errorf("kura: store returned %d values for %d keys", len(vals), len(keys))
	}
	for i, key := range keys {
		if ferr, ok := failed[key]; ok {
			c.stats.misses.Add(1)
			fn(key, entry[V]{}, ferr)
			continue
		}
		if vals[i] == nil {
			c.stats.misses.Add(1)
			fn(key, entry[V]{}, errMiss)
			continue
		}
		e, err := c.found(key, vals[i])
		fn(key, e, err)
	}
	return nil
}

// errMiss marks a plain miss inside getMany; it never leaves the package.
var errMiss = fmt.Errorf("miss: %w", ErrNotFound)

// errNoValue is the miss of an entry that holds no value (a lease
// placeholder or a tombstone).
var errNoValue = fmt.Errorf("no value: %w", ErrNotFound)

// SetMany stores every item for ttl in one round trip per server. Values
// that fail to encode or exceed the size limit are reported in the
// *store.BatchError together with store failures; all others are written.
func (c *Cache[V]) SetMany(ctx context.Context, items map[string]V, ttl time.Duration) error {
	ttl, err := c.opts.resolveTTL(ttl)
	if err != nil {
		return err
	}
	var be store.BatchError
	be.Op = "set"
	batch := make([]store.Item, 0, len(items))
	for k, v := range items {
		if err := store.CheckKey(k); err != nil {
			be.Add(k, err)
			continue
		}
		b, err := c.encode(k, v)
		if err != nil {
			be.Add(k, err)
			continue
		}
		batch = append(batch, store.Item{Key: k, Value: b, TTL: c.opts.jitter(ttl)})
	}
	if err := c.setMany(ctx, batch); err != nil {
		var sbe *store.BatchError
		if !errors.As(err, &sbe) {
			return err
		}
		be.Merge(sbe, nil)
	}
	return be.Err()
}

func (c *Cache[V]) setMany(ctx context.Context, batch []store.Item) error {
	if len(batch) == 0 {
		return nil
	}
	start := time.Now()
	err := store.SetMany(ctx, c.store, batch)
	c.stats.since(OpSetMany, start)
	c.countBatchErr(err, len(batch))
	return err
}

// DeleteMany removes keys in one round trip per server.
func (c *Cache[V]) DeleteMany(ctx context.Context, keys []string) error {
	keys, err := uniqueKeys(keys)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	start := time.Now()
	err = store.DeleteMany(ctx, c.store, keys)
	c.stats.since(OpDeleteMany, start)
	c.countBatchErr(err, len(keys))
	return err
}

// uniqueKeys validates keys and drops duplicates, keeping the first
// occurrence's order.
func uniqueKeys(keys []string) ([]string, error) {
	seen := make(map[string]struct{}, len(keys))
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if err := store.CheckKey(k); err != nil {
			return nil, err
		}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		out = append(out, k)
	}
	return out, nil
}
