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
// # Across processes: leases
//
// On a store with leases (Redis, Redis Cluster and memcached; Options.Leases,
// on by default there) a miss takes a lease: one caller in any process loads
// a cold key while the others wait for its write-back, and
// [Cache.Invalidate] voids the leases of its keys, so once it has returned no
// read is handed a value that a load read before it (docs/leases.md states
// the guarantee of each combination of options). Options.StaleWhileRevalidate
// (memcached) serves the old value for a bounded time while one reader
// reloads; Options.EarlyRefresh reloads hot keys before they expire.
//
// # In the process: the L1
//
// Options.L1 keeps decoded values in the process, so a warm hit costs no
// round trip and no decode. Over Redis with redisstore's Tracking the
// server reports changes and every process drops the key; over other stores
// the L1 needs Options.L1.MaxStaleness, its staleness bound (docs/l1.md).
//
// # Typed keys and indexes
//
// [Keyed] is a view of a Cache with typed identifiers (an int64 user id,
// say) and one prefix; [Index] and [UniqueIndex] cache the ids a query
// returns (a user's orders; the user of an email) over a Keyed of the
// records, with one invalidation per write.
//
// # One read path
//
// Fetch, FetchMany and the Keyed and Index reads run one pipeline
// (internal/readthrough): look up (the L1, then the store), classify (hit,
// negative, stale, due for early refresh, not understood, miss), acquire
// (this process's flight, or a lease), load, fill. Options.StoreTimeout
// bounds a call's own store work as one budget; a hit creates no timer,
// context or goroutine for it, and allocates nothing, whatever the caller's
// context (a cancellable one is watched by the Cache). Capabilities of the store are found through
// its wrappers only where a wrapper implements them (store.Find), so a
// circuit breaker (store/health) sees every read, the L1's included.
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
// # Where things live
//
// This package is the API face; the read path it hands calls to is one
// pipeline of steps in internal/readthrough, and each mechanism is chosen
// once in New. docs/ARCHITECTURE.md draws the floors (what may import
// what), says where a new mechanism, store, adapter, tool or language
// port goes, and walks a key through Fetch and FetchMany.
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
//
// # Traces
//
// Options.Tracer gives each call a span and each step of a read (the
// lookup or lease read, the lease wait, the load, the fill) a child span;
// the loader runs with its span in its context. Package kuraotel (a module
// of its own) implements it over OpenTelemetry, wraps a store for a span
// per server batch, and mirrors Stats as OpenTelemetry metrics; the span
// tree and attributes are in docs/telemetry.md. Without a Tracer each step
// costs a nil check.
package kura
