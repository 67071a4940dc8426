package readthrough

import (
	"context"
	"errors"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// fillItems encodes the write-back of a load of j's keys at idx (of
// gives each item's index in j) into buf; the leases of the keys it will
// not fill go to unfilled.
func (p fillStep[V]) fillItems(buf *EncBuf, j *job[V], idx []int, vals []V, errs []error, ttl time.Duration, op Op, start time.Time, cost time.Duration, unfilled *[]store.Lease) ([]fillItem, []int) {
	items, of := make([]fillItem, 0, len(idx)), make([]int, 0, len(idx))
	for n, i := range idx {
		f := fillItem{key: j.keys[i]}
		if j.leases != nil {
			f.lease = &j.leases[i]
		}
		switch {
		case j.fill != nil && !j.fill[i]:
			continue
		case errors.Is(errs[n], store.ErrNotFound) && p.cfg.NegativeTTL >= 0:
			f.data, f.ttl = p.ent.encodeNegative(buf), p.cfg.Jitter(p.cfg.NegativeTTL)
		case errs[n] == nil:
			f.ttl = p.cfg.Jitter(ttl)
			var err error
			if f.data, err = p.EncodeTo(buf, f.key, vals[n], p.fills.refreshFields(start, f.ttl, cost)); err == nil {
				break
			}
			p.report(op, f.key, err)
			fallthrough
		default: // a loader error, no negative caching, or no encoding
			if f.lease != nil {
				*unfilled = append(*unfilled, *f.lease)
			}
			continue
		}
		items, of = append(items, f), append(of, i)
	}
	return items, of
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
// (the store took the fill, or refused it); lost holds the keys whose
// fill the store refused because their lease was lost.
func (p fillStep[V]) fill(ctx context.Context, b *budget, items []fillItem, op Op) (filled bool, lost map[string]bool) {
	if len(items) == 0 {
		return true, nil
	}
	ctx, sp := p.tr.start(ctx, b, observe.Fill, items[0].key, len(items))
	defer end(sp, nil)
	n := len(items)
	items = p.fills.unkept(b, items)
	if kept := n - len(items); kept > 0 {
		p.tr.note(ctx, observe.FillKept, int64(kept))
	}
	if len(items) == 0 {
		return true, nil
	}
	if b.exhausted() {
		if items[0].lease == nil {
			p.st.BudgetSkips.Add(uint64(len(items)))
			p.tr.note(ctx, observe.BudgetSkip, int64(len(items)))
			return false, nil
		}
		// A fill under leases this call holds is not skipped: its
		// leases would stay held, and every reader of those keys (in
		// any process) would wait LeaseWait until they expire. It gets
		// one StoreTimeout of its own, as before the one acquire step.
		fresh := p.newBudget()
		fresh.keep = b.keep
		b = &fresh
	}
	sctx, st := b.bound(ctx, nil, time.Now())
	defer b.charge(st)
	if items[0].lease == nil {
		return p.fills.write(sctx, items, op), nil
	}
	fills := make([]store.Fill, len(items))
	for i, it := range items {
		fills[i] = store.Fill{Lease: *it.lease, Value: it.data, TTL: it.ttl}
	}
	start := time.Now()
	err := p.leases.fill(sctx, fills)
	p.st.Since(op, start)
	if err == nil {
		return true, nil
	}
	return p.refused(ctx, err, len(fills), op)
}

// refused is the outcome of a conditional fill of n values that failed
// with err (see fill): the keys whose lease was lost, counted, and every
// other failure counted and reported.
func (p fillStep[V]) refused(ctx context.Context, err error, n int, op Op) (filled bool, lost map[string]bool) {
	var be *store.BatchError
	if !errors.As(err, &be) {
		p.st.StoreErrs.Add(uint64(n))
		p.tr.absorbed(ctx, "", err)
		p.report(op, "", err)
		return false, nil
	}
	filled = true
	for _, ke := range be.Errors {
		if errors.Is(ke.Err, store.ErrNotStored) {
			p.st.LeaseLost.Add(1)
			if lost == nil {
				lost = make(map[string]bool)
			}
			lost[ke.Key] = true
			continue
		}
		filled = false
		p.st.StoreErrs.Add(1)
		p.tr.absorbed(ctx, ke.Key, ke.Err)
		p.report(op, ke.Key, ke.Err)
	}
	if len(lost) > 0 {
		p.tr.note(ctx, observe.FillRefused, int64(len(lost)))
	}
	return filled, lost
}

// unkept drops the items whose entry the lookup marked to keep.
func (p fillStep[V]) unkept(b *budget, items []fillItem) []fillItem {
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
func (p fillStep[V]) write(ctx context.Context, items []fillItem, op Op) bool {
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
func (p fillStep[V]) refreshFields(start time.Time, ttl, cost time.Duration) codec.Fields {
	if p.cfg.EarlyRefresh > 0 && ttl > 0 {
		return codec.Fields{Written: start, TTL: ttl, Cost: cost}
	}
	return codec.Fields{}
}

// fillStep is the fill step: methods over the pipeline's state.
type fillStep[V any] struct{ *Pipeline[V] }
