package kura

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/observe"
)

// IndexOptions configures an Index. LoadIDs and LoadRecords are required;
// the zero value of every other field works.
type IndexOptions[I comparable, K comparable, V any] struct {
	// Name labels the index's own Cache (of id lists) in Stats and
	// metrics. If blank, the records Cache's name + "-index".
	Name string

	// Prefix is prepended to the index value to make the key of its id
	// list, e.g. "user_items:by_user:". It must differ from the records'
	// prefix. If blank, "idx:".
	Prefix string

	// Key turns an index value into the part of the key after Prefix. If
	// nil, the same default as KeyedOptions.Key.
	Key func(I) string

	// TTL is how long a cached id list lives. If zero, the records' TTL.
	TTL time.Duration

	// LoadIDs returns the ids of the records whose indexed column equals
	// v, in the order Fetch should return the records (for example
	// SELECT id FROM user_items WHERE user_id = $1 ORDER BY id). An empty
	// list is a valid answer and is cached like any other.
	LoadIDs func(ctx context.Context, v I) ([]K, error)

	// LoadRecords loads records by id (SELECT ... WHERE id = ANY($1)). Ids
	// it leaves out do not exist.
	LoadRecords func(ctx context.Context, ids []K) (map[K]V, error)
}

// Index caches a non-unique secondary index the way identity_cache's
// cache_index and the fetch_by_idx pattern do: the list of primary keys
// behind one index value is cached under its own key, and the records
// themselves live in the per-record cache that Keyed.Fetch also uses, so
// a changed record does not throw the whole list away and both paths
// share entries.
//
// Fetch costs one read of the id list, then one batched read of the
// records (one round trip per server), and on misses one LoadRecords call
// with only the missing ids and one batched write-back.
type Index[I comparable, K comparable, V any] struct {
	records     *Keyed[K, V]
	lists       *Keyed[I, []K]
	loadIDs     func(ctx context.Context, v I) ([]K, error)
	loadRecords func(ctx context.Context, ids []K) (map[K]V, error)

	listHits, listMisses, recordsLoaded, ghosts atomic.Uint64
}

// NewIndex returns an index over the records view. Integer ids are stored
// in the compact id-list format (codec.IDList), other id types as msgpack
// arrays.
func NewIndex[I comparable, K comparable, V any](records *Keyed[K, V], opts IndexOptions[I, K, V]) (*Index[I, K, V], error) {
	if records == nil {
		return nil, errors.New("kura: NewIndex needs the records' Keyed view")
	}
	if opts.LoadIDs == nil {
		return nil, errors.New("kura: IndexOptions.LoadIDs is required")
	}
	if opts.LoadRecords == nil {
		return nil, errors.New("kura: IndexOptions.LoadRecords is required")
	}
	lists, err := newSide[[]K](records, sideSpec[I]{
		optsType: "IndexOptions", clash: "; id lists and records need their own keys",
		name: opts.Name, nameSuffix: "-index", prefix: opts.Prefix, defaultPrefix: "idx:", key: opts.Key, ttl: opts.TTL,
		codec: func(records *codec.Codec) (*codec.Codec, error) {
			if codec.IsIDListType(reflect.TypeFor[[]K]()) {
				return codec.New(codec.Options{Serializer: codec.IDList()})
			}
			return records, nil
		},
	})
	if err != nil {
		return nil, err
	}
	return &Index[I, K, V]{records: records, lists: lists, loadIDs: opts.LoadIDs, loadRecords: opts.LoadRecords}, nil
}

// sideSpec describes the view an index keeps beside its records (an Index's
// id lists, a UniqueIndex's ids), as its options give it; newSide fills
// the defaults and checks it the same way for both.
type sideSpec[I comparable] struct {
	optsType, clash       string // for errors: the options type, what a prefix clash adds
	name, nameSuffix      string // Name; if blank, the records Cache's name + nameSuffix
	prefix, defaultPrefix string
	key                   func(I) string
	ttl                   time.Duration
	codec                 func(records *codec.Codec) (*codec.Codec, error) // the side's codec, given the records'
}

// newSide returns the Keyed view s describes: its own Cache of T over the
// records' store, with the records' guards, timeouts and hooks, under its
// own prefix, its TTL the records' unless s sets one.
func newSide[T any, I comparable, K comparable, V any](records *Keyed[K, V], s sideSpec[I]) (*Keyed[I, T], error) {
	if s.prefix == "" {
		s.prefix = s.defaultPrefix
	}
	if s.prefix == records.keyPrefix() {
		return nil, fmt.Errorf("kura: %s.Prefix %q is the records' prefix%s", s.optsType, s.prefix, s.clash)
	}
	if s.ttl < 0 && s.ttl != NoExpiry {
		return nil, fmt.Errorf("kura: %s.TTL must not be negative, got %v", s.optsType, s.ttl)
	}
	if s.ttl == 0 {
		s.ttl = records.TTL()
	}
	rc := records.Cache()
	o := rc.options() // the records' guards, timeouts and hooks apply to the side too
	o.Name = s.name
	if o.Name == "" {
		o.Name = rc.Name() + s.nameSuffix
	}
	var err error
	if o.Codec, err = s.codec(o.Codec); err != nil {
		return nil, err
	}
	c, err := New[T](rc.Store(), o)
	if err != nil {
		return nil, err
	}
	return NewKeyed[I, T](c, KeyedOptions[I]{Prefix: s.prefix, Key: s.key, TTL: s.ttl})
}

// Name returns the name of the index's id-list Cache (IndexOptions.Name).
func (x *Index[I, K, V]) Name() string { return x.lists.Cache().Name() }

// Lists returns the view of the cached id lists (for inspection and
// tests).
func (x *Index[I, K, V]) Lists() *Keyed[I, []K] { return x.lists }

// Records returns the records' view.
func (x *Index[I, K, V]) Records() *Keyed[K, V] { return x.records }

// IDs returns the id list of v, from the cache or (on a miss) from
// LoadIDs, which fills the cache.
func (x *Index[I, K, V]) IDs(ctx context.Context, v I) ([]K, error) {
	// The loader may run after IDs returned (a background refresh, a
	// caller whose ctx ended): loaded is shared with it.
	var loaded atomic.Bool
	ids, err := x.lists.Fetch(ctx, v, func(ctx context.Context, v I) ([]K, error) {
		loaded.Store(true)
		ids, err := x.loadIDs(ctx, v)
		if err == nil && ids == nil {
			ids = []K{} // an empty list is an answer, not an absence
		}
		return ids, err
	})
	if loaded.Load() {
		x.listMisses.Add(1)
	} else if err == nil {
		x.listHits.Add(1)
	}
	return ids, err
}

// Fetch returns the records whose indexed column equals v, in the order of
// the id list (LoadIDs' order). A record that no longer exists but is
// still named by a cached list is left out, and the list is dropped from
// the cache so the next read loads it afresh: a deleted record is never
// returned as a ghost.
//
// With Options.Tracer, the read is a kura.Index.Fetch span over the
// list's kura.Fetch and the records' kura.FetchMany (docs/telemetry.md).
func (x *Index[I, K, V]) Fetch(ctx context.Context, v I) ([]V, error) {
	return traced(ctx, x.records.Cache().tracer(), observe.IndexFetch, x.lists.Key(v), 1, func(ctx context.Context) ([]V, error) {
		return x.fetch(ctx, v)
	})
}

func (x *Index[I, K, V]) fetch(ctx context.Context, v I) ([]V, error) {
	ids, err := x.IDs(ctx, v)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return []V{}, nil
	}
	got, err := x.records.FetchMany(ctx, ids, func(ctx context.Context, missing []K) (map[K]V, error) {
		recs, err := x.loadRecords(ctx, missing)
		x.recordsLoaded.Add(uint64(len(recs)))
		return recs, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]V, 0, len(ids))
	for _, id := range ids {
		if r, ok := got[id]; ok {
			out = append(out, r)
		}
	}
	if len(out) < len(ids) {
		x.ghosts.Add(uint64(len(ids) - len(out)))
		// The list names records that are gone: drop it so the next read
		// asks the database. (Writing a repaired list instead could race
		// a concurrent insert's invalidation and cache a list missing
		// the new id.) Its failure is absorbed like any write-back.
		if err := x.lists.Delete(ctx, v); err != nil {
			x.lists.Cache().reportErr(OpDelete, x.lists.Key(v), err)
		}
	}
	return out, nil
}

// Invalidate drops the cached id lists of the given index values, in one
// round trip per server. Call it after a row is inserted into, or removed
// from, those index values.
func (x *Index[I, K, V]) Invalidate(ctx context.Context, values ...I) error {
	if len(values) == 0 {
		return nil
	}
	return x.lists.Invalidate(ctx, values...)
}

// Changed drops what a change to record id makes stale, in one round trip
// per server: the record's own entry, and the id lists of every index
// value given. For an update that moves a row from one index value to
// another, pass both the old and the new value (identity_cache expires
// both); for an insert or delete, the row's value; for an update of a
// column that is not indexed, none.
func (x *Index[I, K, V]) Changed(ctx context.Context, id K, values ...I) error {
	return changed(ctx, x.records, x.lists, id, values)
}

// changed invalidates record id's entry and the side entries (id lists or
// ids) of values. Both Caches share one store, so one batch invalidates
// records and side (voiding any lease a concurrent fill holds on them, so
// a fill that loaded the old row is dropped; see docs/leases.md).
func changed[I comparable, K comparable, V, T any](ctx context.Context, records *Keyed[K, V], side *Keyed[I, T], id K, values []I) error {
	keys := make([]string, 0, 1+len(values))
	keys = append(keys, records.Key(id))
	for _, v := range values {
		keys = append(keys, side.Key(v))
	}
	return records.Cache().Invalidate(ctx, keys...)
}

// IndexStats counts what an Index did. Counters only grow.
type IndexStats struct {
	// ListHits and ListMisses count id-list reads served by the cache and
	// by LoadIDs.
	ListHits, ListMisses uint64
	// RecordsLoaded counts records LoadRecords returned.
	RecordsLoaded uint64
	// Ghosts counts ids named by a cached list whose record no longer
	// exists (left out of the result; the list is dropped).
	Ghosts uint64
}

// Stats returns a snapshot of the index's counters. The id-list Cache's
// own Stats are Lists().Cache().Stats().
func (x *Index[I, K, V]) Stats() IndexStats {
	return IndexStats{ListHits: x.listHits.Load(), ListMisses: x.listMisses.Load(),
		RecordsLoaded: x.recordsLoaded.Load(), Ghosts: x.ghosts.Load()}
}

// UniqueIndexOptions configures a UniqueIndex. LoadID and LoadRecord are
// required.
type UniqueIndexOptions[I comparable, K comparable, V any] struct {
	// Name, Prefix, Key and TTL are as in IndexOptions.
	Name   string
	Prefix string
	Key    func(I) string
	TTL    time.Duration

	// LoadID returns the id of the one record whose unique column equals
	// v, or an error matching ErrNotFound.
	LoadID func(ctx context.Context, v I) (K, error)
	// LoadRecord loads one record by id, or returns ErrNotFound.
	LoadRecord func(ctx context.Context, id K) (V, error)
}

// UniqueIndex caches a unique secondary index (an email → a user id), then
// the record through the shared per-record cache.
type UniqueIndex[I comparable, K comparable, V any] struct {
	records    *Keyed[K, V]
	ids        *Keyed[I, K]
	loadID     func(ctx context.Context, v I) (K, error)
	loadRecord func(ctx context.Context, id K) (V, error)
}

// NewUniqueIndex returns a unique index over the records view.
func NewUniqueIndex[I comparable, K comparable, V any](records *Keyed[K, V], opts UniqueIndexOptions[I, K, V]) (*UniqueIndex[I, K, V], error) {
	if records == nil {
		return nil, errors.New("kura: NewUniqueIndex needs the records' Keyed view")
	}
	if opts.LoadID == nil || opts.LoadRecord == nil {
		return nil, errors.New("kura: UniqueIndexOptions.LoadID and LoadRecord are required")
	}
	ids, err := newSide[K](records, sideSpec[I]{
		optsType: "UniqueIndexOptions",
		name:     opts.Name, nameSuffix: "-unique", prefix: opts.Prefix, defaultPrefix: "uidx:", key: opts.Key, ttl: opts.TTL,
		codec: func(*codec.Codec) (*codec.Codec, error) { return nil, nil }, // the id is small: plain msgpack
	})
	if err != nil {
		return nil, err
	}
	return &UniqueIndex[I, K, V]{records: records, ids: ids, loadID: opts.LoadID, loadRecord: opts.LoadRecord}, nil
}

// IDs returns the view of the cached ids, one per unique value (for
// inspection, tests, and cdc, which takes the keys it invalidates from
// it).
func (u *UniqueIndex[I, K, V]) IDs() *Keyed[I, K] { return u.ids }

// Fetch returns the record whose unique column equals v: the id from the
// cache (or LoadID), then the record from the per-record cache (or
// LoadRecord). A value with no record returns an error matching
// ErrNotFound, cached negatively like any other absence.
func (u *UniqueIndex[I, K, V]) Fetch(ctx context.Context, v I) (V, error) {
	return traced(ctx, u.records.Cache().tracer(), observe.IndexFetch, u.ids.Key(v), 1, func(ctx context.Context) (V, error) {
		return u.fetch(ctx, v)
	})
}

func (u *UniqueIndex[I, K, V]) fetch(ctx context.Context, v I) (V, error) {
	id, err := u.ids.Fetch(ctx, v, u.loadID)
	if err != nil {
		var zero V
		return zero, err
	}
	return u.records.Fetch(ctx, id, u.loadRecord)
}

// Changed drops the record's entry and the cached ids of the given unique
// values (the old and the new one when the column changed).
func (u *UniqueIndex[I, K, V]) Changed(ctx context.Context, id K, values ...I) error {
	return changed(ctx, u.records, u.ids, id, values)
}
