package readthrough

import (
	"context"
	"fmt"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/observe"
)

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

func (p *Pipeline[V]) manyLoader(ctx context.Context, keys []string, loader ManyLoader[V]) (_ map[string]V, err error) {
	ctx, sp := p.start(ctx, observe.Load, keys[0], len(keys))
	defer observe.Finish(sp, &err)
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
