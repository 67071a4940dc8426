// Package kura is a read-through cache for Redis and Memcached in front of
// a database.
//
// A [Cache] stores typed values in any [store.Store] (Redis or Redis
// Cluster in store/redisstore, a memcached pool in store/memcache, the
// process's own memory in store/memstore), encoded in one self-describing
// envelope (package codec, docs/FORMAT.md): msgpack by default, compressed
// only above a size threshold and only when that pays.
//
//	c, _ := kura.New[Article](redisStore, kura.Options{})
//	a, err := c.Fetch(ctx, "article:42", time.Hour, func(ctx context.Context, key string) (Article, error) {
//		return db.LoadArticle(ctx, 42) // runs once per miss, even under a stampede
//	})
//
// # Reading through
//
// [Cache.Fetch] reads one key and calls the loader on a miss; concurrent
// Fetches of one key share a single loader call. [Cache.FetchMany] is the
// batch form for pages that show many records: one batched cache read (one
// round trip per server), one loader call with every miss, one batched
// write-back. A loader says "this key does not exist" by returning
// [ErrNotFound] (Fetch) or by leaving the key out (FetchMany); the absence
// is cached for Options.NegativeTTL so a missing row is not queried again
// on every request.
//
// The read-through path never fails because of the cache: a store error, a
// timeout (Options.StoreTimeout), or bytes that do not decode (another
// writer's format, corruption) count as a miss in [Stats] and fall through
// to the loader; the next fill overwrites the bad entry. The plain
// [Cache.Get] and [Cache.Set] do return those errors, for callers who
// want them.
//
// # Why generics
//
// The value type is a type parameter (Cache[V]) rather than a destination
// pointer as in encoding/json. The batch API is the reason: FetchMany's
// loader returns map[string]V and the caller gets map[string]V back, with
// no reflection on the caller's side and no interface{} to assert. With a
// destination pointer, the batch forms need a map or slice destination
// whose element type is checked at run time. One Store can serve several
// Caches of different value types.
//
// # Guards and metrics
//
// Values larger than Options.MaxValueSize fail with [ErrValueTooLarge]
// before anything is sent; values above Options.WarnValueSize (100 KiB)
// are counted and reported to Options.OnLargeValue. [Cache.Stats] returns
// hits, misses, errors, bytes before and after compression and latency per
// operation; package kuraprom exports them to Prometheus on a registry of
// the caller's choosing. The library never logs: cached values may hold
// personal data.
package kura
