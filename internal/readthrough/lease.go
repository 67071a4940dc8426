package readthrough

import (
	"context"
	"time"

	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// acquireManyLease is the lease strategy for many keys: one loader call
// with the keys this caller holds and one batched conditional fill; the
// keys other callers hold go to the Cache's poller (the hub), which reads
// every key that any FetchMany of this process waits for in one batch per
// tick and hands back each fill (or a lease, when the holder's expired or
// was given up: those keys are loaded in one more loader call). After
// Config.LeaseWait the rest is loaded without writing back.
func (p *Pipeline[V]) acquireManyLease(ctx context.Context, out map[string]V, slots []slot[V], ttl time.Duration, loader ManyLoader[V]) error {
	start := time.Now()
	reg := newWaitReg(len(slots))
	defer p.cancelWait(reg)
	waited := false
	for {
		var winners []store.Lease
		var waits, noFills, corrupts []string
		for _, s := range slots {
			switch s.class {
			case hit:
				if !s.e.negative {
					out[s.key] = s.e.v
				}
				if s.refresh {
					winners = append(winners, s.r.Lease) // stale: refresh it now
				}
			case won:
				winners = append(winners, s.r.Lease)
			case wait:
				waits = append(waits, s.key)
			case corrupt:
				corrupts = append(corrupts, s.key)
			default:
				if s.r.Won {
					p.release(ctx, s.r.Lease)
				}
				noFills = append(noFills, s.key)
			}
		}
		if len(winners) > 0 {
			if err := p.loadManyUnderLease(ctx, out, winners, ttl, loader); err != nil {
				return err
			}
		}
		if len(corrupts) > 0 {
			if err := p.leaser.Invalidate(ctx, corrupts, 0); err != nil {
				noFills = append(noFills, corrupts...)
			} else {
				waits = append(waits, corrupts...)
			}
		}
		if len(noFills) > 0 {
			if err := p.loadManyNoFill(ctx, out, noFills, loader); err != nil {
				return err
			}
		}
		if len(waits) > 0 {
			if !waited {
				waited = true
				p.st.LeaseWaits.Add(1)
			}
			p.startWait(reg, waits)
		}
		if reg.pending == 0 {
			return nil
		}
		var err error
		wctx, ws := p.waitSpan(ctx, slots[0].key, reg.pending)
		slots, err = p.awaitFills(wctx, reg, start)
		p.endWait(wctx, ws, start, slots != nil, err)
		if err != nil || slots == nil {
			if err == nil {
				p.st.LeaseFailOpen.Add(1)
				err = p.loadManyNoFill(ctx, out, p.cancelWait(reg), loader)
			}
			return err
		}
	}
}

// awaitFills waits until the hub hands back results for some of reg's
// keys, within Config.LeaseWait of start, and classifies them. nil slots
// and a nil error: the wait is over (fail open).
func (p *Pipeline[V]) awaitFills(ctx context.Context, reg *waitReg, start time.Time) ([]slot[V], error) {
	var got []keyResult
	if left := p.cfg.LeaseWait - time.Since(start); left > 0 {
		t := time.NewTimer(left)
		select {
		case kr := <-reg.ch:
			got = append(got, kr)
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(got) == 0 {
		return nil, nil
	}
	for more := true; more; {
		select {
		case kr := <-reg.ch:
			got = append(got, kr)
		default:
			more = false
		}
	}
	reg.pending -= len(got)
	slots := make([]slot[V], len(got))
	var b budget // the hub's read is the hub's time, not this call's
	b.unlimited = true
	for i, kr := range got {
		slots[i].key = kr.key
		if kr.err != nil {
			p.st.Misses.Add(1)
			p.report(OpGetMany, kr.key, kr.err)
			slots[i].class, slots[i].failed = noFill, true
			continue
		}
		p.classifyLease(ctx, &b, &slots[i], kr.r, false)
	}
	return slots, nil
}

// loadManyUnderLease loads the keys of won in one loader call and fills
// them (values, and negative entries for the keys the loader left out) in
// one conditional batch. Leases it cannot fill are released.
func (p *Pipeline[V]) loadManyUnderLease(ctx context.Context, out map[string]V, won []store.Lease, ttl time.Duration, loader ManyLoader[V]) (err error) {
	keys := make([]string, len(won))
	for i, l := range won {
		keys[i] = l.Key
	}
	var release []store.Lease
	defer func() {
		if r := recover(); r != nil {
			p.releaseMany(ctx, won)
			panic(r)
		}
		p.releaseMany(ctx, release)
	}()
	start := time.Now()
	loaded, err := p.callManyLoader(ctx, keys, loader)
	if err != nil {
		release = won
		return err
	}
	cost := time.Since(start)
	fills := make([]fillItem, 0, len(won))
	for i := range won {
		l := &won[i]
		v, ok := loaded[l.Key]
		if !ok {
			delete(out, l.Key) // a stale value under refresh that no longer exists
			if p.cfg.NegativeTTL < 0 {
				release = append(release, *l)
				continue
			}
			fills = append(fills, fillItem{key: l.Key, lease: l, data: p.encodeNegative(), ttl: p.cfg.Jitter(p.cfg.NegativeTTL)})
			continue
		}
		out[l.Key] = v
		kttl := p.cfg.Jitter(ttl)
		data, err := p.Encode(l.Key, v, p.refreshFields(start, kttl, cost))
		if err != nil {
			p.report(OpSetMany, l.Key, err)
			release = append(release, *l)
			continue
		}
		fills = append(fills, fillItem{key: l.Key, lease: l, data: data, ttl: kttl})
	}
	b := p.newBudget()
	p.fill(ctx, &b, fills, OpSetMany)
	return nil
}

// refreshManyLater reloads the keys of leases in the background, with one
// loader call and one batched conditional fill, on a context that keeps
// ctx's values but not its cancellation, bounded by Config.LoadTimeout.
// Keys whose refresh already runs in this process are not refreshed
// twice: their leases are dropped, not released, since releasing a lease
// that came with a value removes the value.
func (p *Pipeline[V]) refreshManyLater(ctx context.Context, leases []store.Lease, ttl time.Duration, loader ManyLoader[V]) {
	bctx := context.WithoutCancel(ctx)
	mine := p.refreshing.claim(leases)
	if len(mine) == 0 {
		return
	}
	p.st.EarlyRefreshes.Add(uint64(len(mine)))
	bctx, sp := p.start(bctx, observe.Refresh, mine[0].Key, len(mine))
	go func() {
		var err error
		defer func() { end(sp, err) }()
		defer p.refreshing.done(mine)
		defer func() {
			if recover() != nil { // a panicking loader already counted; nobody waits here
				err = &observe.Panic{}
			}
		}()
		lctx := bctx
		if p.cfg.LoadTimeout > 0 {
			var cancel context.CancelFunc
			lctx, cancel = context.WithTimeout(bctx, p.cfg.LoadTimeout)
			defer cancel()
		}
		err = p.loadManyUnderLease(lctx, make(map[string]V, len(mine)), mine, ttl, loader)
	}()
}
