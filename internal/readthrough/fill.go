package readthrough

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

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
	items = p.unkept(b, items)
	if len(items) == 0 {
		return true, false
	}
	if b.exhausted() {
		p.st.BudgetSkips.Add(uint64(len(items)))
		return false, false
	}
	sctx, done := b.ctx(ctx)
	defer done()
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
		p.report(op, "", err)
		return false, false
	}
	filled = true
	for _, ke := range be.Errors {
		if errors.Is(ke.Err, store.ErrNotStored) {
			p.st.LeaseLost.Add(1)
			refused = true
			continue
		}
		filled = false
		p.st.StoreErrs.Add(1)
		p.report(op, ke.Key, ke.Err)
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

// loadManyProcess is the process strategy for many keys: one loader call
// with every key that missed and one batched write-back. Batching already
// makes the loader call per batch, so loads are not shared with
// concurrent callers.
func (p *Pipeline[V]) loadManyProcess(ctx context.Context, b *budget, out map[string]V, slots []slot[V], ttl time.Duration, loader ManyLoader[V]) error {
	keys := make([]string, len(slots))
	for i := range slots {
		keys[i] = slots[i].key
	}
	loaded, err := p.callManyLoader(ctx, keys, loader)
	if err != nil {
		return err
	}
	items := make([]fillItem, 0, len(keys))
	for _, key := range keys {
		v, ok := loaded[key]
		if ok {
			out[key] = v
		}
		if b.kept(key, p.st) {
			continue
		}
		if !ok {
			if p.cfg.NegativeTTL > 0 {
				items = append(items, fillItem{key: key, data: p.encodeNegative(), ttl: p.cfg.Jitter(p.cfg.NegativeTTL)})
			}
			continue
		}
		data, err := p.Encode(key, v, codec.Fields{})
		if err != nil {
			p.report(OpSetMany, key, err)
			continue
		}
		items = append(items, fillItem{key: key, data: data, ttl: p.cfg.Jitter(ttl)})
	}
	p.fill(ctx, b, items, OpSetMany)
	return nil
}

// callManyLoader calls a ManyLoader in the caller's goroutine, counting
// the call, its time, an error (wrapped) or a panic (which goes on).
func (p *Pipeline[V]) callManyLoader(ctx context.Context, keys []string, loader ManyLoader[V]) (map[string]V, error) {
	p.st.Loads.Add(1)
	start := time.Now()
	loaded, err := p.manyLoader(ctx, keys, loader)
	p.st.Since(OpLoad, start)
	if err != nil {
		p.st.LoadErrs.Add(1)
		return nil, fmt.Errorf("kura: load %d missing keys (first %q): %w", len(keys), keys[0], err)
	}
	return loaded, nil
}

func (p *Pipeline[V]) manyLoader(ctx context.Context, keys []string, loader ManyLoader[V]) (map[string]V, error) {
	defer p.countPanic()
	return loader(ctx, keys)
}

// loadManyNoFill loads keys and writes nothing back (fail open).
func (p *Pipeline[V]) loadManyNoFill(ctx context.Context, out map[string]V, keys []string, loader ManyLoader[V]) error {
	loaded, err := p.callManyLoader(ctx, keys, loader)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if v, ok := loaded[k]; ok {
			out[k] = v
		}
	}
	return nil
}
