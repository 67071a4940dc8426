package kura

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/store"
)

// lookup reads key for the read-through path. Store errors and undecodable
// bytes are absorbed (counted, reported to OnError) and look like a miss,
// so a broken cache never breaks the caller. failed reports a store error,
// after which another look would only wait out the same failure.
func (c *Cache[V]) lookup(ctx context.Context, key string) (e entry[V], found, failed bool) {
	sctx, cancel := c.storeCtx(ctx)
	e, err := c.read(sctx, key)
	cancel()
	switch {
	case err == nil:
		return e, true, false
	case errors.Is(err, ErrNotFound):
		return e, false, false
	case errors.Is(err, ErrMalformed):
		c.reportErr(OpGet, key, err)
		return e, false, false
	default:
		c.stats.misses.Add(1) // read counted the store error; here it is also a miss
		c.reportErr(OpGet, key, err)
		return e, false, true
	}
}

// fill writes a loaded value (or a negative entry) back. Failures are
// absorbed: the caller already has its value.
func (c *Cache[V]) fill(ctx context.Context, key string, v V, negative bool, ttl time.Duration) {
	var b []byte
	if negative {
		if c.opts.NegativeTTL < 0 {
			return
		}
		b, ttl = c.encodeNegative(), c.opts.NegativeTTL
	} else {
		var err error
		if b, err = c.encode(key, v); err != nil {
			c.reportErr(OpSet, key, err)
			return
		}
	}
	sctx, cancel := c.storeCtx(ctx)
	defer cancel()
	start := time.Now()
	err := c.store.Set(sctx, key, b, c.opts.jitter(ttl))
	c.stats.since(OpSet, start)
	if err != nil {
		c.stats.storeErrs.Add(1)
		c.reportErr(OpSet, key, err)
	}
}

// Fetch returns the value for key from the cache, or calls loader on a miss
// and caches what it returns for ttl.
//
// Concurrent Fetches of one key in this process share one loader call
// (singleflight); the shared flight checks the cache once more before
// loading, so a value filled by a flight that just ended is not loaded
// again. If loader returns an error matching ErrNotFound, Fetch returns it
// and caches the absence for Options.NegativeTTL; other loader errors are
// returned and not cached.
//
// Cache failures never reach the caller: a store that errs or times out
// (Options.StoreTimeout), or bytes that do not decode, count as a miss, and
// a failed write-back is counted and reported to Options.OnError.
func (c *Cache[V]) Fetch(ctx context.Context, key string, ttl time.Duration, loader Loader[V]) (V, error) {
	var zero V
	if err := store.CheckKey(key); err != nil {
		return zero, err
	}
	if err := store.CheckTTL(ttl); err != nil {
		return zero, err
	}
	if loader == nil {
		return zero, errors.New("kura: Fetch needs a loader")
	}
	e, ok, failed := c.lookup(ctx, key)
	if ok {
		if e.negative {
			return zero, absent(key)
		}
		return e.v, nil
	}
	// A flight led by a caller whose context ends fails for everyone who
	// joined it; those whose own context is still live try again, at most
	// a few times.
	for attempt := 0; ; attempt++ {
		led := false
		ch := c.group.DoChan(key, func() (any, error) {
			led = true
			// After a store failure, a second look would only wait
			// out the same failure.
			return c.load(ctx, key, ttl, loader, !failed)
		})
		select {
		case <-ctx.Done():
			return zero, ctx.Err()
		case r := <-ch:
			if !led {
				c.stats.shared.Add(1)
			}
			if r.Err != nil {
				if !led && isContextErr(r.Err) && ctx.Err() == nil && attempt < 3 {
					continue
				}
				return zero, r.Err
			}
			return r.Val.(V), nil
		}
	}
}

// load runs inside the singleflight: it looks once more, then calls the
// loader and writes the result back.
func (c *Cache[V]) load(ctx context.Context, key string, ttl time.Duration, loader Loader[V], recheck bool) (V, error) {
	var zero V
	if recheck {
		if e, ok, _ := c.lookup(ctx, key); ok {
			if e.negative {
				return zero, absent(key)
			}
			return e.v, nil
		}
	}
	c.stats.loads.Add(1)
	start := time.Now()
	v, err := loader(ctx, key)
	c.stats.since(OpLoad, start)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			c.fill(ctx, key, zero, true, 0)
			return zero, err
		}
		c.stats.loadErrs.Add(1)
		return zero, fmt.Errorf("kura: load %q: %w", key, err)
	}
	c.fill(ctx, key, v, false, ttl)
	return v, nil
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
// Unlike Fetch, FetchMany does not share loads with concurrent callers:
// batching already makes the loader call per batch, not per key.
func (c *Cache[V]) FetchMany(ctx context.Context, keys []string, ttl time.Duration, loader ManyLoader[V]) (map[string]V, error) {
	keys, err := uniqueKeys(keys)
	if err != nil {
		return nil, err
	}
	if err := store.CheckTTL(ttl); err != nil {
		return nil, err
	}
	if loader == nil {
		return nil, errors.New("kura: FetchMany needs a loader")
	}
	out := make(map[string]V, len(keys))
	var missing []string
	sctx, cancel := c.storeCtx(ctx)
	err = c.getMany(sctx, keys, func(key string, e entry[V], err error) {
		switch {
		case err != nil:
			if err != errMiss {
				c.reportErr(OpGetMany, key, err)
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
	cancel()
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if len(missing) == 0 {
		return out, nil
	}

	c.stats.loads.Add(1)
	start := time.Now()
	loaded, err := loader(ctx, missing)
	c.stats.since(OpLoad, start)
	if err != nil {
		c.stats.loadErrs.Add(1)
		return out, fmt.Errorf("kura: load %d missing keys (first %q): %w", len(missing), missing[0], err)
	}

	batch := make([]store.Item, 0, len(missing))
	for _, key := range missing {
		v, ok := loaded[key]
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
	sctx, cancel = c.storeCtx(ctx)
	defer cancel()
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
