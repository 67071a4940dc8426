package kura

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/readthrough"
	"github.com/kuracache/kura/store"
)

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
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	if c.leaser == nil {
		return c.DeleteMany(ctx, keys)
	}
	c.l1Drop(keys...)
	defer c.l1Drop(keys...)
	if !readthrough.Faults.JoinAfterInvalidate.Load() {
		for _, k := range keys {
			c.group.Forget(k)
			c.holders.Forget(k)
		}
	}
	start := time.Now()
	err = c.leaser.Invalidate(ctx, keys, c.opts.StaleWhileRevalidate)
	c.stats.since(OpDeleteMany, start)
	c.countBatchErr(err, len(keys))
	return err
}

// leaseRead is one LeaseGet of a single key under the StoreTimeout bound
// of one store call.
func (c *Cache[V]) leaseRead(ctx context.Context, key string, recache bool) (store.LeaseResult, error) {
	res, err := c.leaseReadMany(ctx, []string{key}, recache)
	if err != nil {
		var be *store.BatchError
		if errors.As(err, &be) && len(be.Errors) > 0 {
			err = be.Errors[0].Err
		}
		return store.LeaseResult{}, err
	}
	return res[0], nil
}

func (c *Cache[V]) leaseReadMany(ctx context.Context, keys []string, recache bool) ([]store.LeaseResult, error) {
	if c.opts.StoreTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.StoreTimeout)
		defer cancel()
	}
	opts := store.LeaseOptions{TTL: c.opts.LeaseTTL, Placeholder: leaseEntry()}
	if recache {
		opts.Recache = c.opts.EarlyRefresh
	}
	start := time.Now()
	res, err := c.leaser.LeaseGet(ctx, keys, opts)
	if len(keys) == 1 {
		c.stats.since(OpGet, start)
	} else {
		c.stats.since(OpGetMany, start)
	}
	if err == nil && len(res) != len(keys) {
		err = fmt.Errorf("kura: store returned %d lease results for %d keys", len(res), len(keys))
	}
	return res, err
}

// leaseView is what a lease read means to the Cache.
type leaseView uint8

const (
	viewValue   leaseView = iota // a value to serve (e holds it)
	viewWon                      // this caller holds the lease: load
	viewWait                     // another caller holds it: wait
	viewNoFill                   // load, but do not write back
	viewCorrupt                  // bytes that do not decode: remove, then read again
)

// view classifies a lease read of key, decoding the value when there is
// one to serve. serveStale lets a stale value be served (the Cache has
// StaleWhileRevalidate on).
func (c *Cache[V]) view(key string, r store.LeaseResult) (e entry[V], v leaseView) {
	usable := r.Value != nil && !isPlaceholder(r.Value) && (!r.Stale || c.opts.StaleWhileRevalidate > 0)
	if usable {
		de, err := c.found(key, r.Value)
		switch {
		case err == nil:
			if r.Stale {
				c.stats.staleServed.Add(1)
			}
			return de, viewValue
		case notUnderstood(err):
			// A newer writer's entry: never overwrite it (a lease that
			// came with it is released by the caller).
			c.reportErr(OpGet, key, err)
			return e, viewNoFill
		case de.keep:
			// A recent value of another type (a rolling deploy): serve
			// the loader's value without overwriting it, as the plain
			// read-through does (Options.SchemaGrace).
			c.stats.schemaKept.Add(1)
			c.reportErr(OpGet, key, err)
			return e, viewNoFill
		default:
			c.reportErr(OpGet, key, err)
			if r.Won {
				return e, viewWon
			}
			return e, viewCorrupt
		}
	}
	if r.Value != nil && isPlaceholder(r.Value) {
		c.stats.misses.Add(1)
		return e, viewWait
	}
	c.stats.misses.Add(1)
	switch {
	case r.Won:
		return e, viewWon
	case r.Held:
		return e, viewWait
	}
	return e, viewNoFill
}

// fetchLeased is Fetch on a store with leases. The first read is the
// lease read itself (one round trip on memcached; a plain GET on a Redis
// hit). A hit returns at once; a miss goes into this process's flight for
// the key, where the lease holder loads and fills, and everyone else
// polls the store until the fill is there.
func (c *Cache[V]) fetchLeased(ctx context.Context, key string, ttl time.Duration, loader Loader[V]) (V, error) {
	var zero V
	r, err := c.leaseRead(ctx, key, c.opts.EarlyRefresh > 0)
	if err != nil {
		c.stats.storeErrs.Add(1)
		c.stats.misses.Add(1)
		c.reportErr(OpGet, key, err)
		c.countSkip(ctx, err, 1)
		return c.shareLoad(ctx, key, ttl, loader, store.LeaseResult{}, viewNoFill)
	}
	e, v := c.view(key, r)
	if v == viewValue {
		switch {
		case r.Won:
			// Early refresh (or a stale value under stale-while-
			// revalidate): serve what is cached, reload in the
			// background under the lease.
			c.refreshLater(ctx, key, ttl, loader, r.Lease)
		case c.opts.EarlyRefresh > 0 && r.Lease.Token != nil && xfetch(e.fields, time.Now(), c.opts.EarlyRefresh):
			// A store without memcached's R flag (Redis) hands out the
			// value's own bytes as its version: refresh on condition
			// that the value did not change meanwhile.
			c.refreshLater(ctx, key, ttl, loader, r.Lease)
		}
		if e.negative {
			return zero, absent(key)
		}
		return e.v, nil
	}
	return c.shareLoad(ctx, key, ttl, loader, r, v)
}

// shareLoad runs the lease protocol for key in a flight of this process,
// so that concurrent Fetches of one key in a process make one set of store
// calls between them: waiters share one polling flight, a lease holder
// runs its load in a flight of its own kind. A holder that joins a holder
// flight already running (it won a lease again after an invalidation, while
// the older load still runs) gives its lease up at once, so a lease is
// always either filled or released by the process that took it.
func (c *Cache[V]) shareLoad(ctx context.Context, key string, ttl time.Duration, loader Loader[V], r store.LeaseResult, v leaseView) (V, error) {
	g := &c.group
	if r.Won {
		g = &c.holders
	}
	val, _, err := g.Do(ctx, key, c.opts.LoadTimeout, func(lctx context.Context) (V, error) {
		return c.leaseLoad(lctx, key, ttl, loader, r, v)
	}, func() {
		c.stats.shared.Add(1)
		if r.Won {
			c.release(ctx, r.Lease)
		}
	})
	return val, err
}

// refreshLater reloads key in the background under lease l, unless a load
// of key is running in this process already.
func (c *Cache[V]) refreshLater(ctx context.Context, key string, ttl time.Duration, loader Loader[V], l store.Lease) {
	c.stats.earlyRefreshes.Add(1)
	bctx := context.WithoutCancel(ctx)
	go func() {
		defer func() { _ = recover() }() // a panicking loader already counted; nobody waits here
		_, _, _ = c.holders.Do(bctx, key, c.opts.LoadTimeout, func(lctx context.Context) (V, error) {
			return c.loadUnderLease(lctx, key, ttl, loader, l)
		}, func() { c.release(bctx, l) })
	}()
}

// leaseLoad is the body of the flight: load under the lease, or wait for
// the holder's fill with backoff, bounded by Options.LeaseWait; when the
// bound passes, load without writing back (fail open).
func (c *Cache[V]) leaseLoad(ctx context.Context, key string, ttl time.Duration, loader Loader[V], r store.LeaseResult, v leaseView) (V, error) {
	var zero V
	start := time.Now()
	waited := false
	for delay := time.Millisecond; ; {
		switch v {
		case viewWon:
			return c.loadUnderLease(ctx, key, ttl, loader, r.Lease)
		case viewNoFill:
			if r.Won {
				c.release(ctx, r.Lease)
			}
			return c.loadNoFill(ctx, key, loader)
		case viewCorrupt:
			// Undecodable bytes under no lease: remove them so the next
			// read takes a lease (an Invalidate voids nobody's fill that
			// matters: the bytes were garbage).
			if err := c.leaser.Invalidate(ctx, []string{key}, 0); err != nil {
				return c.loadNoFill(ctx, key, loader)
			}
			delay = 0
		case viewWait:
			if !waited {
				waited = true
				c.stats.leaseWaits.Add(1)
			}
			// The holder may be in this process: then its result is
			// ours without another read.
			if val, ok, err := c.holders.Join(ctx, key, func() { c.stats.shared.Add(1) }); ok {
				return val, err
			}
			left := c.opts.LeaseWait - time.Since(start)
			if left <= 0 {
				c.stats.leaseFailOpen.Add(1)
				return c.loadNoFill(ctx, key, loader)
			}
			if err := sleep(ctx, jittered(min(delay, left))); err != nil {
				c.stats.leaseFailOpen.Add(1)
				return c.loadNoFill(ctx, key, loader)
			}
			delay = min(2*delay, maxPoll)
		case viewValue:
			return zero, errors.New("kura: internal: leaseLoad with a value") // not reached
		}
		var err error
		if r, err = c.leaseRead(ctx, key, false); err != nil {
			c.stats.storeErrs.Add(1)
			c.reportErr(OpGet, key, err)
			c.stats.leaseFailOpen.Add(1)
			return c.loadNoFill(ctx, key, loader)
		}
		var e entry[V]
		if e, v = c.view(key, r); v == viewValue {
			if r.Won {
				// A stale value (stale-while-revalidate) whose refresh
				// fell to this caller: serve it, refresh behind.
				c.refreshLater(ctx, key, ttl, loader, r.Lease)
			}
			if e.negative {
				return zero, absent(key)
			}
			return e.v, nil
		}
	}
}

// xfetch decides probabilistic early expiration (Vattani, Chierichetti,
// Lowenstein, "Optimal Probabilistic Cache Stampede Prevention", VLDB
// 2015) with beta 1: refresh when now - cost * ln(rand) >= expiry, where
// cost is how long the last load took, so the chance grows as expiry
// nears and a slow load starts earlier. Only entries in their last window
// before expiry are considered; entries without the fields never are.
func xfetch(f codec.Fields, now time.Time, window time.Duration) bool {
	if f.Written.IsZero() || f.TTL <= 0 {
		return false
	}
	left := f.Written.Add(f.TTL).Sub(now)
	switch {
	case left > window:
		return false
	case left <= 0:
		return true
	}
	cost := max(f.Cost, time.Millisecond)
	return float64(cost)*-math.Log(rand.Float64()) >= float64(left)
}

// maxPoll caps the backoff between two reads of a waiter: a fill is seen
// at most this late, and a waiter reads the store at most 1/maxPoll times
// a second.
const maxPoll = 20 * time.Millisecond

// jittered spreads d over [d/2, d) so waiters of many processes do not
// poll in step.
func jittered(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)))
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loadUnderLease calls the loader as the lease holder and fills the key
// on condition that the lease still holds. A loader error or panic gives
// the lease up so waiters need not wait out its TTL.
func (c *Cache[V]) loadUnderLease(ctx context.Context, key string, ttl time.Duration, loader Loader[V], l store.Lease) (v V, err error) {
	filled := false
	defer func() {
		if !filled {
			c.release(ctx, l)
		}
	}()
	c.stats.loads.Add(1)
	start := time.Now()
	v, err = c.callLoader(ctx, key, loader)
	cost := time.Since(start)
	c.stats.observe(OpLoad, cost)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			if c.opts.NegativeTTL >= 0 {
				filled = c.leaseFill(ctx, key, c.encodeNegative(), c.opts.jitter(c.opts.NegativeTTL), l)
			}
			return v, err
		}
		c.stats.loadErrs.Add(1)
		return v, fmt.Errorf("kura: load %q: %w", key, err)
	}
	ttl = c.opts.jitter(ttl)
	var f codec.Fields
	if c.opts.EarlyRefresh > 0 && ttl > 0 {
		// What XFetch needs to decide an early refresh on Redis.
		f = codec.Fields{Written: start, TTL: ttl, Cost: cost}
	}
	data, eerr := c.encodeWith(key, v, f)
	if eerr != nil {
		c.reportErr(OpSet, key, eerr)
		return v, nil
	}
	filled = c.leaseFill(ctx, key, data, ttl, l)
	return v, nil
}

// leaseFill writes data for ttl (jittered already) under lease l; it reports whether the store took
// the fill or refused it (either way the lease is spent).
func (c *Cache[V]) leaseFill(ctx context.Context, key string, data []byte, ttl time.Duration, l store.Lease) bool {
	sctx, cancel := c.storeCtx(ctx)
	defer cancel()
	start := time.Now()
	err := c.leaser.Fill(sctx, []store.Fill{{Lease: l, Value: data, TTL: ttl}})
	c.stats.since(OpSet, start)
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrNotStored):
		c.stats.leaseLost.Add(1)
		return true
	}
	c.stats.storeErrs.Add(1)
	c.reportErr(OpSet, key, err)
	return false
}

// release gives up lease l, best effort: if it fails, the lease expires.
func (c *Cache[V]) release(ctx context.Context, l store.Lease) {
	sctx, cancel := c.storeCtx(context.WithoutCancel(ctx))
	defer cancel()
	if err := c.leaser.Release(sctx, []store.Lease{l}); err != nil {
		c.stats.storeErrs.Add(1)
		c.reportErr(OpDelete, l.Key, err)
	}
}

// countSkip counts, in Stats.BudgetSkips, the write-backs skipped because
// a read spent the StoreTimeout budget (not the caller's own deadline).
func (c *Cache[V]) countSkip(ctx context.Context, err error, n int) {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		c.stats.budgetSkips.Add(uint64(n))
	}
}

// storeCtx bounds one store call by Options.StoreTimeout.
func (c *Cache[V]) storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.opts.StoreTimeout < 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.opts.StoreTimeout)
}

// loadNoFill calls the loader and writes nothing back: the fail-open path
// (another caller holds the lease, or the store failed).
func (c *Cache[V]) loadNoFill(ctx context.Context, key string, loader Loader[V]) (V, error) {
	c.stats.loads.Add(1)
	start := time.Now()
	v, err := c.callLoader(ctx, key, loader)
	c.stats.since(OpLoad, start)
	if err != nil && !errors.Is(err, ErrNotFound) {
		c.stats.loadErrs.Add(1)
		return v, fmt.Errorf("kura: load %q: %w", key, err)
	}
	return v, err
}

// fetchManyLeased is FetchMany on a store with leases: one batched lease
// read per server for every key; one loader call with the keys this
// caller holds and one batched conditional fill; the keys other callers
// hold are handed to the Cache's poller, which reads every key that any
// FetchMany of this process waits for in one batch per tick and hands
// back each fill (or a lease, when the holder's expired or was given up:
// those keys are loaded in one more loader call). After Options.LeaseWait
// the rest is loaded without writing back.
func (c *Cache[V]) fetchManyLeased(ctx context.Context, keys []string, ttl time.Duration, loader ManyLoader[V]) (map[string]V, error) {
	out := make(map[string]V, len(keys))
	res, err := c.leaseReadMany(ctx, keys, c.opts.EarlyRefresh > 0)
	results := make([]keyResult, len(keys))
	if err != nil {
		var be *store.BatchError
		if !errors.As(err, &be) {
			c.stats.storeErrs.Add(uint64(len(keys)))
			c.stats.misses.Add(uint64(len(keys)))
			c.reportErr(OpGetMany, "", err)
			c.countSkip(ctx, err, len(keys))
			return c.loadManyNoFill(ctx, out, keys, loader)
		}
		failed := be.Failed()
		c.stats.storeErrs.Add(uint64(len(failed)))
		for i, k := range keys {
			results[i] = keyResult{key: k, err: failed[k]}
		}
	}
	for i, k := range keys {
		results[i].key = k
		if results[i].err == nil {
			results[i].r = res[i]
		}
	}
	start := time.Now()
	reg := newWaitReg(len(keys))
	defer c.cancelWait(reg)
	waited := false
	for first := true; ; first = false {
		var won, refresh []store.Lease
		var wait, noFill, corrupt []string
		for _, kr := range results {
			if kr.err != nil {
				c.stats.misses.Add(1)
				c.reportErr(OpGetMany, kr.key, kr.err)
				noFill = append(noFill, kr.key)
				continue
			}
			e, v := c.view(kr.key, kr.r)
			switch v {
			case viewValue:
				if !e.negative {
					out[kr.key] = e.v
				}
				switch {
				case kr.r.Won && !kr.r.Stale:
					// Early refresh (memcached's R flag: only a read
					// that asked for it wins with a fresh value).
					refresh = append(refresh, kr.r.Lease)
				case kr.r.Won:
					won = append(won, kr.r.Lease) // stale: refresh it now
				case first && c.opts.EarlyRefresh > 0 && kr.r.Lease.Token != nil && xfetch(e.fields, time.Now(), c.opts.EarlyRefresh):
					// Redis: XFetch, on condition that the value (its
					// own bytes are the version) did not change.
					refresh = append(refresh, kr.r.Lease)
				}
			case viewWon:
				won = append(won, kr.r.Lease)
			case viewWait:
				wait = append(wait, kr.key)
			case viewNoFill:
				if kr.r.Won {
					c.release(ctx, kr.r.Lease)
				}
				noFill = append(noFill, kr.key)
			case viewCorrupt:
				corrupt = append(corrupt, kr.key)
			}
		}
		if len(refresh) > 0 {
			c.refreshManyLater(ctx, refresh, ttl, loader)
		}
		if len(won) > 0 {
			if err := c.loadManyUnderLease(ctx, out, won, ttl, loader); err != nil {
				return out, err
			}
		}
		if len(noFill) > 0 {
			if _, err := c.loadManyNoFill(ctx, out, noFill, loader); err != nil {
				return out, err
			}
		}
		if len(corrupt) > 0 {
			if err := c.leaser.Invalidate(ctx, corrupt, 0); err != nil {
				if _, err := c.loadManyNoFill(ctx, out, corrupt, loader); err != nil {
					return out, err
				}
			} else {
				wait = append(wait, corrupt...)
			}
		}
		if len(wait) > 0 {
			if !waited {
				waited = true
				c.stats.leaseWaits.Add(1)
			}
			c.startWait(reg, wait)
		}
		if reg.pending == 0 {
			return out, nil
		}
		results = results[:0]
		left := c.opts.LeaseWait - time.Since(start)
		if left > 0 {
			t := time.NewTimer(left)
			select {
			case kr := <-reg.ch:
				results = append(results, kr)
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if len(results) == 0 {
			rest := c.cancelWait(reg)
			c.stats.leaseFailOpen.Add(1)
			return c.loadManyNoFill(ctx, out, rest, loader)
		}
		for more := true; more; {
			select {
			case kr := <-reg.ch:
				results = append(results, kr)
			default:
				more = false
			}
		}
		reg.pending -= len(results)
	}
}

// refreshManyLater reloads the keys of leases in the background, with one
// loader call and one batched conditional fill (as refreshLater does for
// one key): on a context that keeps ctx's values but not its
// cancellation, bounded by Options.LoadTimeout. A loader error or panic
// (counted by callManyLoader) releases the leases. Keys whose refresh
// already runs in this process are not refreshed twice: their leases are
// dropped, not released, since releasing a lease that came with a value
// removes the value, and the running refresh replaces it anyway.
func (c *Cache[V]) refreshManyLater(ctx context.Context, leases []store.Lease, ttl time.Duration, loader ManyLoader[V]) {
	bctx := context.WithoutCancel(ctx)
	mine := c.refreshing.claim(leases)
	if len(mine) == 0 {
		return
	}
	c.stats.earlyRefreshes.Add(uint64(len(mine)))
	go func() {
		defer c.refreshing.done(mine)
		defer func() { _ = recover() }() // a panicking loader already counted; nobody waits here
		lctx := bctx
		if c.opts.LoadTimeout > 0 {
			var cancel context.CancelFunc
			lctx, cancel = context.WithTimeout(bctx, c.opts.LoadTimeout)
			defer cancel()
		}
		_ = c.loadManyUnderLease(lctx, make(map[string]V, len(mine)), mine, ttl, loader)
	}()
}

// refreshSet is the set of keys under a FetchMany early refresh in this
// process.
type refreshSet struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

// claim marks the keys of leases as under refresh and returns the leases
// whose key was not under refresh already.
func (r *refreshSet) claim(leases []store.Lease) (mine []store.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = make(map[string]struct{})
	}
	for _, l := range leases {
		if _, busy := r.keys[l.Key]; busy {
			continue
		}
		r.keys[l.Key] = struct{}{}
		mine = append(mine, l)
	}
	return mine
}

// done unmarks the keys of leases.
func (r *refreshSet) done(leases []store.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		delete(r.keys, l.Key)
	}
}

// keyResult is a lease read of one key, or its failure.
type keyResult struct {
	key string
	r   store.LeaseResult
	err error
}

// waitHub is the Cache's poller for FetchMany: the keys that callers of
// this process wait for (another caller, anywhere, holds their lease) are
// read together, one batched lease read per tick, however many callers
// wait, so waiting costs the store one batch per tick and process instead
// of one per caller.
type waitHub struct {
	mu      sync.Mutex
	keys    map[string][]*waitReg
	running bool
	kick    bool // keys were added: poll soon again
}

// waitReg is one FetchMany's registration with the hub.
type waitReg struct {
	ch      chan keyResult // results for its keys; buffered for all of them
	pending int            // keys registered and not yet received (owner only)
}

func newWaitReg(n int) *waitReg { return &waitReg{ch: make(chan keyResult, n)} }

// startWait registers keys for reg and starts the poller if it is idle.
func (c *Cache[V]) startWait(reg *waitReg, keys []string) {
	h := &c.hub
	h.mu.Lock()
	if h.keys == nil {
		h.keys = make(map[string][]*waitReg)
	}
	for _, k := range keys {
		h.keys[k] = append(h.keys[k], reg)
	}
	reg.pending += len(keys)
	h.kick = true
	start := !h.running
	h.running = true
	h.mu.Unlock()
	if start {
		go c.pollLoop()
	}
}

// cancelWait unregisters reg and returns the keys it was still waiting
// for; leases the poller handed it that it never read are released.
func (c *Cache[V]) cancelWait(reg *waitReg) []string {
	h := &c.hub
	var rest []string
	h.mu.Lock()
	for k, regs := range h.keys {
		for i, r := range regs {
			if r == reg {
				rest = append(rest, k)
				regs = append(regs[:i:i], regs[i+1:]...)
				break
			}
		}
		if len(regs) == 0 {
			delete(h.keys, k)
		} else {
			h.keys[k] = regs
		}
	}
	h.mu.Unlock()
	for more := true; more; {
		select {
		case kr := <-reg.ch:
			if kr.err == nil && kr.r.Won {
				c.release(context.Background(), kr.r.Lease)
			}
			rest = append(rest, kr.key)
		default:
			more = false
		}
	}
	reg.pending = 0
	return rest
}

// pollLoop reads every waited-for key in one batch per tick (backing off
// from 1 ms to maxPoll while nothing new is waited for) and hands out what
// it finds: a value or a failure to every waiter of the key, a lease to
// one of them. It ends when nobody waits.
func (c *Cache[V]) pollLoop() {
	h := &c.hub
	delay := time.Millisecond
	for {
		time.Sleep(jittered(delay))
		h.mu.Lock()
		if len(h.keys) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		if h.kick {
			delay, h.kick = time.Millisecond, false
		}
		keys := make([]string, 0, len(h.keys))
		for k := range h.keys {
			keys = append(keys, k)
		}
		h.mu.Unlock()
		res, err := c.leaseReadMany(context.Background(), keys, false)
		var failed map[string]error
		if err != nil {
			var be *store.BatchError
			if errors.As(err, &be) {
				failed = be.Failed()
			} else {
				failed = make(map[string]error, len(keys))
				for _, k := range keys {
					failed[k] = err
				}
			}
		}
		h.mu.Lock()
		for i, k := range keys {
			regs := h.keys[k]
			if len(regs) == 0 {
				continue
			}
			if ferr, bad := failed[k]; bad {
				for _, r := range regs {
					r.ch <- keyResult{key: k, err: ferr}
				}
				delete(h.keys, k)
				continue
			}
			r := res[i]
			switch {
			case r.Won:
				regs[0].ch <- keyResult{key: k, r: r}
				if len(regs) == 1 {
					delete(h.keys, k)
				} else {
					h.keys[k] = regs[1:]
				}
			case r.Held, r.Value != nil && isPlaceholder(r.Value), r.Stale && c.opts.StaleWhileRevalidate == 0:
				// still being loaded elsewhere
			default:
				for _, reg := range regs {
					reg.ch <- keyResult{key: k, r: r}
				}
				delete(h.keys, k)
			}
		}
		h.mu.Unlock()
		delay = min(2*delay, maxPoll)
	}
}

// loadManyUnderLease loads the keys of won in one loader call and fills
// them (values, and negative entries for the keys the loader left out) in
// one conditional batch. Leases it cannot fill are released.
func (c *Cache[V]) loadManyUnderLease(ctx context.Context, out map[string]V, won []store.Lease, ttl time.Duration, loader ManyLoader[V]) (err error) {
	keys := make([]string, len(won))
	for i, l := range won {
		keys[i] = l.Key
	}
	var release []store.Lease
	defer func() {
		if r := recover(); r != nil {
			c.releaseMany(ctx, won)
			panic(r)
		}
		c.releaseMany(ctx, release)
	}()
	c.stats.loads.Add(1)
	start := time.Now()
	loaded, err := c.callManyLoader(ctx, keys, loader)
	c.stats.since(OpLoad, start)
	if err != nil {
		c.stats.loadErrs.Add(1)
		release = won
		return fmt.Errorf("kura: load %d missing keys (first %q): %w", len(keys), keys[0], err)
	}
	cost := time.Since(start)
	fills := make([]store.Fill, 0, len(won))
	for _, l := range won {
		v, ok := loaded[l.Key]
		if !ok {
			delete(out, l.Key) // a stale value under refresh that no longer exists
			if c.opts.NegativeTTL < 0 {
				release = append(release, l)
				continue
			}
			fills = append(fills, store.Fill{Lease: l, Value: c.encodeNegative(), TTL: c.opts.jitter(c.opts.NegativeTTL)})
			continue
		}
		out[l.Key] = v
		kttl := c.opts.jitter(ttl)
		var f codec.Fields
		if c.opts.EarlyRefresh > 0 && kttl > 0 {
			// What XFetch needs to decide an early refresh on Redis;
			// the cost is the batch's, shared by its keys.
			f = codec.Fields{Written: start, TTL: kttl, Cost: cost}
		}
		data, err := c.encodeWith(l.Key, v, f)
		if err != nil {
			c.reportErr(OpSetMany, l.Key, err)
			release = append(release, l)
			continue
		}
		fills = append(fills, store.Fill{Lease: l, Value: data, TTL: kttl})
	}
	if len(fills) == 0 {
		return nil
	}
	sctx, cancel := c.storeCtx(ctx)
	defer cancel()
	fstart := time.Now()
	ferr := c.leaser.Fill(sctx, fills)
	c.stats.since(OpSetMany, fstart)
	if ferr != nil {
		var be *store.BatchError
		if !errors.As(ferr, &be) {
			c.stats.storeErrs.Add(uint64(len(fills)))
			c.reportErr(OpSetMany, "", ferr)
			return nil
		}
		for _, ke := range be.Errors {
			if errors.Is(ke.Err, store.ErrNotStored) {
				c.stats.leaseLost.Add(1)
				continue
			}
			c.stats.storeErrs.Add(1)
			c.reportErr(OpSetMany, ke.Key, ke.Err)
		}
	}
	return nil
}

func (c *Cache[V]) releaseMany(ctx context.Context, leases []store.Lease) {
	if len(leases) == 0 {
		return
	}
	sctx, cancel := c.storeCtx(context.WithoutCancel(ctx))
	defer cancel()
	if err := c.leaser.Release(sctx, leases); err != nil {
		c.countBatchErr(err, len(leases))
		c.reportErr(OpDeleteMany, "", err)
	}
}

// loadManyNoFill loads keys and writes nothing back (fail open).
func (c *Cache[V]) loadManyNoFill(ctx context.Context, out map[string]V, keys []string, loader ManyLoader[V]) (map[string]V, error) {
	c.stats.loads.Add(1)
	start := time.Now()
	loaded, err := c.callManyLoader(ctx, keys, loader)
	c.stats.since(OpLoad, start)
	if err != nil {
		c.stats.loadErrs.Add(1)
		return out, fmt.Errorf("kura: load %d missing keys (first %q): %w", len(keys), keys[0], err)
	}
	for _, k := range keys {
		if v, ok := loaded[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}
