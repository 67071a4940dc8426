package readthrough

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/flight"
	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// errVoided is what a flight returns to the callers that joined it when
// its fill was refused because its lease was voided (an Invalidate, in
// any process, overtook the load): they may have joined after the
// invalidation, so they look again. The caller that led the flight
// started before the lease was taken, and keeps the value.
var errVoided = errors.New("kura: internal: the load's lease was voided")

// vouched is the result of a flight with the time from which it is known
// to hold: the moment the store operation that vouches for it was sent (a
// fill the store took under a lease, the read that found the value), or,
// for a load nothing checked, the moment the load began. A caller may
// take a shared result only if it asked before that moment: then any
// Invalidate that had returned when it asked came before the result's
// store operation, which saw its effect (a voided lease refuses the fill,
// a read finds the key gone). A caller that asked later looks again.
type vouched[V any] struct {
	v  V
	at time.Time
}

// takes reports whether a caller that asked at asked may take r.
func (r vouched[V]) takes(asked time.Time) bool {
	return asked.Before(r.at) || Faults.JoinAfterInvalidate.Load()
}

// acquireProcess is the process strategy for one key: one load per key at
// a time in this process (a flight). If a load ended since the lookup (it
// may have filled the key), the flight looks once more before loading, so
// a plain cold miss costs one read, not two.
func (p *Pipeline[V]) acquireProcess(ctx context.Context, b *budget, s *slot[V], gen uint64, ttl time.Duration, loader Loader[V]) (V, error) {
	recheck := !s.failed && s.class == miss
	r, res, err := p.group.Do(ctx, s.key, p.cfg.LoadTimeout, func(lctx context.Context) (vouched[V], error) {
		if recheck && p.group.Ended() != gen {
			var one [1]slot[V]
			one[0].key = s.key
			p.read(lctx, b, one[:])
			if one[0].class == hit {
				v, err := serve(s.key, one[0].e.v, one[0].e.negative)
				return vouched[V]{v: v}, err
			}
		}
		v, _, _, err := p.loadOne(lctx, b, s.key, ttl, loader, nil)
		return vouched[V]{v: v}, err
	}, p.countShared)
	if res == flight.Joined {
		p.note(ctx, observe.Shared, 0)
	}
	return r.v, err
}

func (p *Pipeline[V]) countShared() { p.st.Shared.Add(1) }

// acquireLease is the lease strategy for one key: the lease holder loads
// in a flight of its own kind (holders); everyone else in this process
// shares one waiting flight, which joins a holder of this process or
// waits, through the Cache's poller (the hub, the same step FetchMany
// waits with), until the fill is there. A caller that joined takes the
// shared result only if the store vouched for it after the caller asked
// (see vouched); else it gets errVoided and looks again.
func (p *Pipeline[V]) acquireLease(ctx context.Context, b *budget, s *slot[V], ttl time.Duration, loader Loader[V]) (V, error) {
	g := &p.group
	if s.r.Won {
		g = &p.holders
		if !Faults.JoinAfterInvalidate.Load() {
			// A new lease means the lease of a holder flight still
			// running here was voided or expired: its value may predate
			// an invalidation, so this caller must not join it.
			g.Forget(s.key)
		}
	}
	asked := time.Now()
	r, res, err := g.Do(ctx, s.key, p.cfg.LoadTimeout, func(lctx context.Context) (vouched[V], error) {
		return p.leaseLoad(lctx, b, s.key, ttl, loader, s.r, s.class)
	}, func() {
		p.countShared()
		if s.r.Won {
			p.release(ctx, s.r.Lease) // not reached unless the fault is on
		}
	})
	if res == flight.Joined {
		p.note(ctx, observe.Shared, 0)
	}
	switch {
	case res == flight.Led && s.r.Won:
		// The lease holder began before it took the lease: its own load
		// read the source after any Invalidate that returned before it.
		if errors.Is(err, errVoided) {
			return r.v, nil
		}
		return r.v, err
	case errors.Is(err, errVoided):
		return r.v, err
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return r.v, err // a load's error (or this caller's context): shared as is
	case !r.takes(asked):
		return r.v, errVoided
	}
	return r.v, err
}

// loadUnfilled is loadNoFill inside a shared flight: nothing vouches for
// its result but the time the load began.
func (p *Pipeline[V]) loadUnfilled(ctx context.Context, key string, loader Loader[V]) (vouched[V], error) {
	began := time.Now()
	v, err := p.loadNoFill(ctx, key, loader)
	return vouched[V]{v: v, at: began}, err
}

// leaseLoad is the body of a lease flight: load under the lease, or wait
// for the holder's fill, bounded by Config.LeaseWait; when the bound
// passes, load without writing back (fail open). Waiting is the same step
// as FetchMany's: the key goes to the Cache's poller (the hub), which
// reads every key this process waits for in one batch per tick.
func (p *Pipeline[V]) leaseLoad(ctx context.Context, b *budget, key string, ttl time.Duration, loader Loader[V], r store.LeaseResult, c class) (vouched[V], error) {
	start := time.Now()
	var reg *waitReg
	for {
		switch c {
		case won:
			v, at, refused, err := p.loadOne(ctx, b, key, ttl, loader, &r.Lease)
			if err == nil && refused && !Faults.JoinAfterInvalidate.Load() {
				err = errVoided
			}
			return vouched[V]{v: v, at: at}, err
		case noFill, miss:
			if r.Won {
				p.release(ctx, r.Lease)
			}
			return p.loadUnfilled(ctx, key, loader)
		case corrupt:
			// Undecodable bytes under no lease: remove them so the next
			// read takes a lease.
			if err := p.leaser.Invalidate(ctx, []string{key}, 0); err != nil {
				return p.loadUnfilled(ctx, key, loader)
			}
		case wait:
			if reg == nil {
				p.st.LeaseWaits.Add(1)
				reg = newWaitReg(1)
				defer p.cancelWait(reg)
			}
			// The holder may be in this process: then its result is
			// ours without another read, unless its fill was refused or
			// came before this flight began (an Invalidate may lie in
			// between: read the store instead).
			if hr, ok, err := p.holders.Join(ctx, key, p.countShared); ok && !errors.Is(err, errVoided) && (err != nil || hr.takes(start)) {
				return hr, err
			}
		case hit:
			return p.loadUnfilled(ctx, key, loader) // not reached
		}
		if reg == nil { // after a corrupt entry was removed
			reg = newWaitReg(1)
			defer p.cancelWait(reg)
		}
		// The poller hands this key only the result of a read sent after
		// it was registered, so that moment vouches for a value found.
		asked := time.Now()
		p.startWait(reg, []string{key})
		wctx, ws := p.waitSpan(ctx, key, 1)
		got, err := p.awaitFills(wctx, reg, start)
		p.endWait(wctx, ws, start, got != nil, err)
		if err != nil {
			return vouched[V]{}, err
		}
		if got == nil || got[0].failed {
			p.st.LeaseFailOpen.Add(1)
			return p.loadUnfilled(ctx, key, loader)
		}
		s := &got[0]
		if s.class == hit {
			if s.refresh {
				// A stale value whose refresh fell to this caller:
				// serve it, refresh behind.
				p.refreshLater(ctx, key, ttl, loader, s.r.Lease)
			}
			v, err := serve(key, s.e.v, s.e.negative)
			return vouched[V]{v: v, at: asked}, err
		}
		r, c = s.r, s.class
	}
}

// refreshLater reloads key in the background under lease l, unless a load
// of key is running in this process already. The reload outlives the
// request: it keeps ctx's values, not its cancellation, and is bounded by
// Config.LoadTimeout.
func (p *Pipeline[V]) refreshLater(ctx context.Context, key string, ttl time.Duration, loader Loader[V], l store.Lease) {
	p.st.EarlyRefreshes.Add(1)
	bctx, sp := p.start(context.WithoutCancel(ctx), observe.Refresh, key, 1)
	go func() {
		var err error
		defer func() { end(sp, err) }()
		defer func() {
			if recover() != nil { // a panicking loader already counted; nobody waits here
				err = &observe.Panic{}
			}
		}()
		_, _, err = p.holders.Do(bctx, key, p.cfg.LoadTimeout, func(lctx context.Context) (vouched[V], error) {
			b := p.newBudget() // the refresh's own store time, not the request's
			v, at, _, err := p.loadOne(lctx, &b, key, ttl, loader, &l)
			return vouched[V]{v: v, at: at}, err
		}, func() { p.release(bctx, l) })
	}()
}

// maxPoll caps the backoff between two reads of the poller: a fill is
// seen at most this late, and the poller reads a waited-for key at most
// 1/maxPoll times a second once nothing new is waited for.
const maxPoll = 20 * time.Millisecond

// jittered spreads d over [d/2, d) so waiters of many processes do not
// poll in step.
func jittered(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)))
}

// loadOne calls the loader for key and fills the result back: under lease
// l when there is one (refused reports a fill the store refused because
// the lease was lost), else with a plain write within budget b. at is when
// the result is vouched for from (see vouched): when the fill the store
// took under l was sent, else when the load began. A loader error or
// panic gives the lease up, so waiters need not wait out its TTL.
func (p *Pipeline[V]) loadOne(ctx context.Context, b *budget, key string, ttl time.Duration, loader Loader[V], l *store.Lease) (v V, at time.Time, refused bool, err error) {
	filled := false
	if l != nil {
		defer func() {
			if !filled {
				p.release(ctx, *l)
			}
		}()
	}
	p.st.Loads.Add(1)
	start := time.Now()
	v, err = p.callLoader(ctx, key, loader)
	cost := time.Since(start)
	p.st.observe(OpLoad, cost)
	f := fillItem{key: key, lease: l}
	switch {
	case errors.Is(err, store.ErrNotFound):
		if p.cfg.NegativeTTL < 0 {
			return v, start, false, err
		}
		f.data, f.ttl = p.encodeNegative(), p.cfg.Jitter(p.cfg.NegativeTTL)
	case err != nil:
		p.st.LoadErrs.Add(1)
		return v, start, false, fmt.Errorf("kura: load %q: %w", key, err)
	default:
		f.ttl = p.cfg.Jitter(ttl)
		var eerr error
		if f.data, eerr = p.Encode(key, v, p.refreshFields(start, f.ttl, cost)); eerr != nil {
			p.report(OpSet, key, eerr)
			return v, start, false, nil
		}
	}
	_, kept := b.keep[key]
	sent := time.Now()
	filled, refused = p.fill(ctx, b, []fillItem{f}, OpSet)
	at = start
	if filled && !refused && !kept && l != nil && !Faults.FillIgnoresLease.Load() {
		at = sent
	}
	return v, at, refused, err
}

// fillItem is one write-back: under lease when there is one.
type fillItem struct {
	key   string
	data  []byte
	ttl   time.Duration // jittered already
	lease *store.Lease
}

// fill writes items back in one call (op names it): conditional on their
// leases when they have them, within the call's budget b. Failures are
// absorbed: the caller already has its value. A write over an entry the
// lookup marked to keep is skipped; so is a write with no budget left
// (counted in BudgetSkips). filled reports that every lease was spent
// (the store took the fill, or refused it); refused that the store
// refused a fill because its lease was lost.
func (p *Pipeline[V]) fill(ctx context.Context, b *budget, items []fillItem, op Op) (filled, refused bool) {
	if len(items) == 0 {
		return true, false
	}
	ctx, sp := p.start(ctx, observe.Fill, items[0].key, len(items))
	defer end(sp, nil)
	n := len(items)
	items = p.unkept(b, items)
	if kept := n - len(items); kept > 0 {
		p.note(ctx, observe.FillKept, int64(kept))
	}
	if len(items) == 0 {
		return true, false
	}
	if b.exhausted() {
		p.st.BudgetSkips.Add(uint64(len(items)))
		p.note(ctx, observe.BudgetSkip, int64(len(items)))
		return false, false
	}
	sctx, st := b.bound(ctx, nil)
	defer b.charge(st)
	if items[0].lease == nil || Faults.FillIgnoresLease.Load() {
		return p.write(sctx, items, op), false
	}
	fills := make([]store.Fill, len(items))
	for i, it := range items {
		fills[i] = store.Fill{Lease: *it.lease, Value: it.data, TTL: it.ttl}
	}
	start := time.Now()
	err := p.leaser.Fill(sctx, fills)
	p.st.Since(op, start)
	if err == nil {
		return true, false
	}
	var be *store.BatchError
	if !errors.As(err, &be) {
		p.st.StoreErrs.Add(uint64(len(fills)))
		p.absorbed(ctx, "", err)
		p.report(op, "", err)
		return false, false
	}
	filled = true
	var lost int64
	for _, ke := range be.Errors {
		if errors.Is(ke.Err, store.ErrNotStored) {
			p.st.LeaseLost.Add(1)
			refused = true
			lost++
			continue
		}
		filled = false
		p.st.StoreErrs.Add(1)
		p.absorbed(ctx, ke.Key, ke.Err)
		p.report(op, ke.Key, ke.Err)
	}
	if lost > 0 {
		p.note(ctx, observe.FillRefused, lost)
	}
	return filled, refused
}

// unkept drops the items whose entry the lookup marked to keep.
func (p *Pipeline[V]) unkept(b *budget, items []fillItem) []fillItem {
	if b == nil || len(b.keep) == 0 {
		return items
	}
	out := items[:0:0]
	for _, it := range items {
		if !b.kept(it.key, p.st) {
			out = append(out, it)
		}
	}
	return out
}

// write is the plain write-back: one Set, or one batch. The L1 drops the
// keys before and after, so this process never reads its old values.
func (p *Pipeline[V]) write(ctx context.Context, items []fillItem, op Op) bool {
	if len(items) == 1 && op == OpSet {
		it := items[0]
		p.DropL1(it.key)
		defer p.DropL1(it.key)
		start := time.Now()
		err := p.store.Set(ctx, it.key, it.data, it.ttl)
		p.st.Since(OpSet, start)
		if err != nil {
			p.st.StoreErrs.Add(1)
			p.report(OpSet, it.key, err)
		}
		return err == nil
	}
	batch := make([]store.Item, len(items))
	for i, it := range items {
		batch[i] = store.Item{Key: it.key, Value: it.data, TTL: it.ttl}
	}
	err := p.SetMany(ctx, batch)
	var be *store.BatchError
	switch {
	case errors.As(err, &be):
		for _, ke := range be.Errors {
			p.report(OpSetMany, ke.Key, ke.Err)
		}
	case err != nil:
		p.report(OpSetMany, "", err)
	}
	return err == nil
}

// refreshFields are what XFetch needs to decide an early refresh on Redis.
func (p *Pipeline[V]) refreshFields(start time.Time, ttl, cost time.Duration) codec.Fields {
	if p.cfg.EarlyRefresh > 0 && ttl > 0 {
		return codec.Fields{Written: start, TTL: ttl, Cost: cost}
	}
	return codec.Fields{}
}

// callLoader counts a panicking loader before the panic goes on to the
// flight, which hands it to the caller.
func (p *Pipeline[V]) callLoader(ctx context.Context, key string, loader Loader[V]) (v V, err error) {
	ctx, sp := p.start(ctx, observe.Load, key, 1)
	defer observe.Finish(sp, &err)
	defer p.countPanic()
	return loader(ctx, key)
}

func (p *Pipeline[V]) countPanic() {
	if r := recover(); r != nil {
		p.st.LoadErrs.Add(1)
		p.st.Panics.Add(1)
		panic(r)
	}
}

// loadNoFill calls the loader and writes nothing back: the fail-open path
// (another caller holds the lease, or the store failed).
func (p *Pipeline[V]) loadNoFill(ctx context.Context, key string, loader Loader[V]) (V, error) {
	p.st.Loads.Add(1)
	start := time.Now()
	v, err := p.callLoader(ctx, key, loader)
	p.st.Since(OpLoad, start)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		p.st.LoadErrs.Add(1)
		return v, fmt.Errorf("kura: load %q: %w", key, err)
	}
	return v, err
}

// release gives up lease l, best effort: if it fails, the lease expires.
func (p *Pipeline[V]) release(ctx context.Context, l store.Lease) {
	p.releaseMany(ctx, []store.Lease{l})
}

func (p *Pipeline[V]) releaseMany(ctx context.Context, leases []store.Lease) {
	if len(leases) == 0 {
		return
	}
	b := p.newBudget()
	sctx, st := b.bound(context.WithoutCancel(ctx), nil)
	defer b.charge(st)
	if err := p.leaser.Release(sctx, leases); err != nil {
		p.countBatchErr(err, len(leases))
		op := OpDeleteMany
		if len(leases) == 1 {
			op = OpDelete
		}
		p.report(op, "", err)
	}
}

// countBatchErr counts the keys a batch call failed: those named in a
// *store.BatchError, or all n when the whole call failed.
func (p *Pipeline[V]) countBatchErr(err error, n int) {
	if err == nil {
		return
	}
	var be *store.BatchError
	if errors.As(err, &be) {
		n = len(be.Errors)
	}
	p.st.StoreErrs.Add(uint64(n))
}
