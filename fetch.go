package kura

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/store"
)

// budget is the time one read-through call may spend on its own store
// work (the read, the second look and the write-back together), so a
// stalled server costs a caller at most Options.StoreTimeout however many
// store calls the path makes. The loader's time is not counted.
type budget struct {
	left      time.Duration
	unlimited bool
	// keep holds keys whose entry must not be overwritten by this call's
	// fill: entries from a newer writer (ErrNotUnderstood), and recent
	// entries of another type (Options.SchemaGrace; the value is true
	// for those, counted in Stats.SchemaKept when a write is skipped).
	keep map[string]bool
}

// keepEntry marks key's entry as one this call must not overwrite;
// schema tells a recent entry of another type.
func (b *budget) keepEntry(key string, schema bool) {
	if b.keep == nil {
		b.keep = make(map[string]bool, 1)
	}
	b.keep[key] = schema
}

// kept reports whether key's entry must not be overwritten, and counts a
// write skipped for a recent entry of another type.
func (b *budget) kept(key string, st *counters) bool {
	schema, ok := b.keep[key]
	if schema {
		st.schemaKept.Add(1)
	}
	return ok
}

func (c *Cache[V]) newBudget() *budget {
	return &budget{left: c.opts.StoreTimeout, unlimited: c.opts.StoreTimeout < 0}
}

// exhausted reports whether no time is left for another store call.
func (b *budget) exhausted() bool { return !b.unlimited && b.left <= 0 }

// ctx returns ctx bounded by what is left; done charges the time used.
func (b *budget) ctx(ctx context.Context) (context.Context, func()) {
	if b.unlimited {
		return ctx, func() {}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.left)
	return ctx, func() {
		cancel()
		b.left -= time.Since(start)
	}
}

// lookup reads key for the read-through path. Store errors and undecodable
// bytes are absorbed (counted, reported to OnError) and look like a miss,
// so a broken cache never breaks the caller. failed reports a store error,
// after which another look would only wait out the same failure.
func (c *Cache[V]) lookup(ctx context.Context, b *budget, key string) (e entry[V], found, failed bool) {
	if b.exhausted() {
		c.stats.misses.Add(1)
		c.stats.budgetSkips.Add(1)
		return e, false, true
	}
	sctx, done := b.ctx(ctx)
	e, err := c.read(sctx, key)
	done()
	switch {
	case err == nil:
		return e, true, false
	case errors.Is(err, ErrNotFound):
		return e, false, false
	case errors.Is(err, ErrMalformed):
		if e.keep {
			// A recent entry of another type (rolling deploy): a miss
			// here, but its writer reads it back.
			b.keepEntry(key, true)
		}
		c.reportErr(OpGet, key, err)
		return e, false, false
	case errors.Is(err, ErrNotUnderstood):
		// A newer writer's entry: a miss here, but its writer reads it
		// back, so this call must not replace it.
		b.keepEntry(key, false)
		c.reportErr(OpGet, key, err)
		return e, false, false
	default:
		c.stats.misses.Add(1) // read counted the store error; here it is also a miss
		c.reportErr(OpGet, key, err)
		return e, false, true
	}
}

// fill writes a loaded value (or a negative entry) back. Failures are
// absorbed: the caller already has its value. With no budget left the
// write is skipped (counted in Stats.BudgetSkips); so is a write over an
// entry lookup marked to keep.
func (c *Cache[V]) fill(ctx context.Context, b *budget, key string, v V, negative bool, ttl time.Duration) {
	if b.kept(key, c.stats) {
		return
	}
	var data []byte
	if negative {
		if c.opts.NegativeTTL < 0 {
			return
		}
		data, ttl = c.encodeNegative(), c.opts.NegativeTTL
	} else {
		var err error
		if data, err = c.encode(key, v); err != nil {
			c.reportErr(OpSet, key, err)
			return
		}
	}
	if b.exhausted() {
		c.stats.budgetSkips.Add(1)
		return
	}
	sctx, done := b.ctx(ctx)
	defer done()
	start := time.Now()
	err := c.store.Set(sctx, key, data, c.opts.jitter(ttl))
	c.stats.since(OpSet, start)
	if err != nil {
		c.stats.storeErrs.Add(1)
		c.reportErr(OpSet, key, err)
	}
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
	if c.leaser != nil {
		return c.fetchLeased(ctx, key, ttl, loader)
	}
	b := c.newBudget()
	gen := c.group.Ended()
	e, ok, failed := c.lookup(ctx, b, key)
	if ok {
		if e.negative {
			return zero, absent(key)
		}
		return e.v, nil
	}
	v, _, err := c.group.Do(ctx, key, c.opts.LoadTimeout, func(lctx context.Context) (V, error) {
		// Look again only if a load ended since the first look (it may
		// have filled the key): on a plain cold miss a second read would
		// be a wasted round trip. After a store failure, it would only
		// wait out the same failure.
		return c.load(lctx, b, key, ttl, loader, !failed && c.group.Ended() != gen)
	}, func() { c.stats.shared.Add(1) })
	return v, err
}

// load runs inside the flight: it looks once more, then calls the loader
// and writes the result back.
func (c *Cache[V]) load(ctx context.Context, b *budget, key string, ttl time.Duration, loader Loader[V], recheck bool) (V, error) {
	var zero V
	if recheck {
		if e, ok, _ := c.lookup(ctx, b, key); ok {
			if e.negative {
				return zero, absent(key)
			}
			return e.v, nil
		}
	}
	c.stats.loads.Add(1)
	start := time.Now()
	v, err := c.callLoader(ctx, key, loader)
	c.stats.since(OpLoad, start)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			c.fill(ctx, b, key, zero, true, 0)
			return zero, err
		}
		c.stats.loadErrs.Add(1)
		return zero, fmt.Errorf("kura: load %q: %w", key, err)
	}
	c.fill(ctx, b, key, v, false, ttl)
	return v, nil
}

// callLoader counts a panicking loader before the panic goes on to the
// flight, which hands it to the caller.
func (c *Cache[V]) callLoader(ctx context.Context, key string, loader Loader[V]) (v V, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.stats.loadErrs.Add(1)
			c.stats.panics.Add(1)
			panic(r)
		}
	}()
	return loader(ctx, key)
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
// Without leases, FetchMany does not share loads with concurrent callers:
// batching already makes the loader call per batch, not per key. With
// leases it takes a lease on every missing key in the same batched read,
// calls the loader once with the keys it holds, fills them in one batched
// conditional write, and waits for the keys other callers (in any
// process) hold; see docs/leases.md.
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
	if c.leaser != nil {
		return c.fetchManyLeased(ctx, keys, ttl, loader)
	}
	out := make(map[string]V, len(keys))
	var missing []string
	b := c.newBudget()
	sctx, done := b.ctx(ctx)
	err = c.getMany(sctx, keys, func(key string, e entry[V], err error) {
		switch {
		case err != nil:
			if err != errMiss {
				c.reportErr(OpGetMany, key, err)
			}
			switch {
			case errors.Is(err, ErrNotUnderstood):
				b.keepEntry(key, false)
			case e.keep:
				b.keepEntry(key, true)
			}
			missing = append(missing, key)
		case !e.negative:
			out[key] = e.v
		}
	})
	if err != nil {
		c.reportErr(OpGetMany, "", err)
		missing = keys
	}
	done()
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if len(missing) == 0 {
		return out, nil
	}

	c.stats.loads.Add(1)
	start := time.Now()
	loaded, err := c.callManyLoader(ctx, missing, loader)
	c.stats.since(OpLoad, start)
	if err != nil {
		c.stats.loadErrs.Add(1)
		return out, fmt.Errorf("kura: load %d missing keys (first %q): %w", len(missing), missing[0], err)
	}

	batch := make([]store.Item, 0, len(missing))
	for _, key := range missing {
		v, ok := loaded[key]
		if b.kept(key, c.stats) {
			if ok {
				out[key] = v
			}
			continue
		}
		if !ok {
			if c.opts.NegativeTTL > 0 {
				batch = append(batch, store.Item{Key: key, Value: c.encodeNegative(), TTL: c.opts.jitter(c.opts.NegativeTTL)})
			}
			continue
		}
		out[key] = v
		b, err := c.encode(key, v)
		if err != nil {
			c.reportErr(OpSetMany, key, err)
			continue
		}
		batch = append(batch, store.Item{Key: key, Value: b, TTL: c.opts.jitter(ttl)})
	}
	if len(batch) > 0 && b.exhausted() {
		c.stats.budgetSkips.Add(uint64(len(batch)))
		return out, nil
	}
	sctx, done = b.ctx(ctx)
	defer done()
	if err := c.setMany(sctx, batch); err != nil {
		var be *store.BatchError
		if errors.As(err, &be) {
			for _, ke := range be.Errors {
				c.reportErr(OpSetMany, ke.Key, ke.Err)
			}
		} else {
			c.reportErr(OpSetMany, "", err)
		}
	}
	return out, nil
}

// callManyLoader counts a panicking loader; the panic goes on in the
// caller's own goroutine (FetchMany calls its loader there), and nothing
// was locked or written for the batch.
func (c *Cache[V]) callManyLoader(ctx context.Context, missing []string, loader ManyLoader[V]) (m map[string]V, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.stats.loadErrs.Add(1)
			c.stats.panics.Add(1)
			panic(r)
		}
	}()
	return loader(ctx, missing)
}
