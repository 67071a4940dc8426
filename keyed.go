package kura

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// KeyedOptions configures a Keyed view of a Cache. The zero value works
// for integer and string ids: keys are the id in decimal (or the string
// itself) with no prefix, and values live for the Cache's Options.TTL.
type KeyedOptions[K comparable] struct {
	// Prefix is prepended to every key, e.g. "article:". Give each kind of
	// record its own prefix when Caches share a store.
	Prefix string

	// Key turns an id into the part of the key after Prefix. It must be
	// deterministic and injective (two ids never share a key). If nil:
	// signed and unsigned integers in decimal, strings as they are, a
	// fmt.Stringer by its String method, anything else by fmt.Sprint
	// (fine for a struct of ids: "{7 42}").
	Key func(K) string

	// TTL is how long values written through this view live. If zero,
	// the Cache's Options.TTL (no expiry when that is zero too); NoExpiry
	// for values that never expire. Other negative values are invalid.
	TTL time.Duration
}

// Keyed is a view of a Cache addressed by the application's own id type
// (an int64, a UUID, a struct of two ids) instead of hand-made strings. It
// adds no state of its own beyond the key function and the TTL, so any
// number of Keyed views may share one Cache.
type Keyed[K comparable, V any] struct {
	c      *Cache[V]
	prefix string
	keyFn  func(K) string
	ttl    time.Duration
}

// NewKeyed returns a view of c addressed by ids of type K.
func NewKeyed[K comparable, V any](c *Cache[V], opts KeyedOptions[K]) (*Keyed[K, V], error) {
	if c == nil {
		return nil, errors.New("kura: NewKeyed needs a Cache")
	}
	if opts.TTL < 0 && opts.TTL != NoExpiry {
		return nil, fmt.Errorf("kura: KeyedOptions.TTL must not be negative, got %v", opts.TTL)
	}
	k := &Keyed[K, V]{c: c, prefix: opts.Prefix, keyFn: opts.Key, ttl: opts.TTL}
	if k.keyFn == nil {
		k.keyFn = defaultKeyFunc[K]()
	}
	return k, nil
}

// defaultKeyFunc picks the key function for ids of type K once, so the hot
// path does no type switch on interfaces.
func defaultKeyFunc[K comparable]() func(K) string {
	var zero K
	switch any(zero).(type) {
	case string:
		return func(id K) string { return any(id).(string) }
	case int64:
		return func(id K) string { return strconv.FormatInt(any(id).(int64), 10) }
	case int:
		return func(id K) string { return strconv.Itoa(any(id).(int)) }
	case int32:
		return func(id K) string { return strconv.FormatInt(int64(any(id).(int32)), 10) }
	case uint64:
		return func(id K) string { return strconv.FormatUint(any(id).(uint64), 10) }
	case uint32:
		return func(id K) string { return strconv.FormatUint(uint64(any(id).(uint32)), 10) }
	}
	if _, ok := any(zero).(fmt.Stringer); ok {
		return func(id K) string { return any(id).(fmt.Stringer).String() }
	}
	switch reflect.TypeFor[K]().Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(id K) string { return strconv.FormatInt(reflect.ValueOf(id).Int(), 10) }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return func(id K) string { return strconv.FormatUint(reflect.ValueOf(id).Uint(), 10) }
	case reflect.String:
		return func(id K) string { return reflect.ValueOf(id).String() }
	}
	return func(id K) string { return fmt.Sprint(id) }
}

// Cache returns the Cache this view reads and writes.
func (k *Keyed[K, V]) Cache() *Cache[V] { return k.c }

// TTL returns the TTL values are written with (0: no expiry).
func (k *Keyed[K, V]) TTL() time.Duration { return k.ttl }

// keyPrefix is KeyedOptions.Prefix (an index checks its own differs).
func (k *Keyed[K, V]) keyPrefix() string { return k.prefix }

// Key returns the cache key of id.
func (k *Keyed[K, V]) Key(id K) string { return k.prefix + k.keyFn(id) }

// keys returns the key of every id, and a map back from key to id.
func (k *Keyed[K, V]) keys(ids []K) ([]string, map[string]K) {
	keys := make([]string, len(ids))
	back := make(map[string]K, len(ids))
	for i, id := range ids {
		keys[i] = k.Key(id)
		back[keys[i]] = id
	}
	return keys, back
}

// Get returns the cached value of id (see Cache.Get).
func (k *Keyed[K, V]) Get(ctx context.Context, id K) (V, error) { return k.c.Get(ctx, k.Key(id)) }

// Set stores v for id with the view's TTL.
func (k *Keyed[K, V]) Set(ctx context.Context, id K, v V) error {
	return k.c.Set(ctx, k.Key(id), v, k.ttl)
}

// Delete removes the entries of ids in one round trip per server.
func (k *Keyed[K, V]) Delete(ctx context.Context, ids ...K) error {
	keys, _ := k.keys(ids)
	if len(keys) == 1 {
		return k.c.Delete(ctx, keys[0])
	}
	return k.c.DeleteMany(ctx, keys)
}

// Invalidate removes the entries of ids and voids the leases on them, so
// that no load that started before it caches its value (see
// Cache.Invalidate).
func (k *Keyed[K, V]) Invalidate(ctx context.Context, ids ...K) error {
	keys, _ := k.keys(ids)
	return k.c.Invalidate(ctx, keys...)
}

// Fetch returns the value of id from the cache, or calls loader on a miss
// and caches what it returns (see Cache.Fetch).
func (k *Keyed[K, V]) Fetch(ctx context.Context, id K, loader func(ctx context.Context, id K) (V, error)) (V, error) {
	if loader == nil {
		var zero V
		return zero, errors.New("kura: Keyed.Fetch needs a loader")
	}
	return k.c.Fetch(ctx, k.Key(id), k.ttl, func(ctx context.Context, _ string) (V, error) {
		return loader(ctx, id)
	})
}

// GetMany returns the cached values of ids; missing ids are left out (see
// Cache.GetMany).
func (k *Keyed[K, V]) GetMany(ctx context.Context, ids []K) (map[K]V, error) {
	keys, back := k.keys(ids)
	got, err := k.c.GetMany(ctx, keys)
	return rekey(got, back), err
}

// FetchMany returns the values of ids: one batched cache read, one loader
// call with the ids that missed, one batched write-back (see
// Cache.FetchMany). Ids the loader leaves out do not exist: they are left
// out of the result and cached negatively.
func (k *Keyed[K, V]) FetchMany(ctx context.Context, ids []K, loader func(ctx context.Context, ids []K) (map[K]V, error)) (map[K]V, error) {
	if loader == nil {
		return nil, errors.New("kura: Keyed.FetchMany needs a loader")
	}
	keys, back := k.keys(ids)
	got, err := k.c.FetchMany(ctx, keys, k.ttl, func(ctx context.Context, missing []string) (map[string]V, error) {
		mids := make([]K, len(missing))
		for i, key := range missing {
			mids[i] = back[key]
		}
		loaded, err := loader(ctx, mids)
		if err != nil {
			return nil, err
		}
		out := make(map[string]V, len(loaded))
		for id, v := range loaded {
			out[k.Key(id)] = v
		}
		return out, nil
	})
	return rekey(got, back), err
}

func rekey[K comparable, V any](got map[string]V, back map[string]K) map[K]V {
	if got == nil {
		return nil
	}
	out := make(map[K]V, len(got))
	for key, v := range got {
		out[back[key]] = v
	}
	return out
}
