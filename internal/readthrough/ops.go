package readthrough

import (
	"context"
	"errors"
	"time"

	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// The plain operations under the Cache's Get, Set, Delete, their batch
// forms and Invalidate: each keeps the L1 and the flights consistent with
// what it does to the store.

// Get reads key: from the L1, then the store (tracked when the L1 relies
// on reports). A store error is counted as such, not as a miss.
func (p *Pipeline[V]) Get(ctx context.Context, key string) (V, error) {
	var zero V
	if p.l1 != nil {
		if v, neg, ok := p.l1.Get(key); ok {
			p.tr.note(ctx, observe.L1Hit, 0)
			return serve(key, v, neg)
		}
	}
	tok, track := p.l1f.beginL1(key)
	start := time.Now()
	data, err := p.rd.get(ctx, key, track)
	p.st.Since(OpGet, start)
	var e entry[V]
	if err == nil {
		e, err = p.ent.found(ctx, key, data, p.l1f.owned(track), nil)
	} else if errors.Is(err, store.ErrNotFound) {
		p.st.Misses.Add(1)
	} else {
		p.st.StoreErrs.Add(1)
	}
	if track {
		p.l1.Finish(key, tok, e.v, e.negative, e.rawLen, err == nil)
	}
	if err != nil {
		if errors.Is(err, store.ErrNotFound) { // a placeholder too (ErrMiss)
			p.tr.note(ctx, observe.Miss, 0)
		}
		return zero, err
	}
	if e.negative {
		p.tr.note(ctx, observe.NegativeHit, 0)
	} else {
		p.tr.note(ctx, observe.Hit, 0)
	}
	return serve(key, e.v, e.negative)
}

// Set writes data under key for ttl (jittered here).
func (p *Pipeline[V]) Set(ctx context.Context, key string, data []byte, ttl time.Duration) error {
	p.DropL1(key)
	defer p.DropL1(key)
	start := time.Now()
	err := p.store.Set(ctx, key, data, p.cfg.Jitter(ttl))
	p.st.Since(OpSet, start)
	if err != nil {
		p.st.StoreErrs.Add(1)
	}
	return err
}

// Delete removes key.
func (p *Pipeline[V]) Delete(ctx context.Context, key string) error {
	p.DropL1(key)
	defer p.DropL1(key)
	start := time.Now()
	err := p.store.Delete(ctx, key)
	p.st.Since(OpDelete, start)
	if err != nil {
		p.st.StoreErrs.Add(1)
	}
	return err
}

// GetMany reads keys (unique) in one batch and returns the values found;
// the *store.BatchError names keys that failed (store errors, bytes that
// do not decode). A plain miss or a negative entry is left out silently.
func (p *Pipeline[V]) GetMany(ctx context.Context, keys []string) (map[string]V, error) {
	out := make(map[string]V, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	bt := p.getBatch(len(keys))
	slots := p.l1f.l1Split(keys, out, bt.slots[:0])
	defer p.putBatch(bt, slots) // nothing holds a slot past GetMany
	if len(slots) == 0 {
		return out, nil
	}
	keys, toks := p.l1f.beginMany(keys, slots) // with an L1: the fills of the keys read
	start := time.Now()
	vals, err := p.rd.getMany(ctx, keys, p.l1 != nil)
	p.st.Since(OpGetMany, start)
	failed := batchFailures(err)
	if err != nil && failed == nil {
		p.st.StoreErrs.Add(uint64(len(keys)))
		p.st.Misses.Add(uint64(len(keys)))
		for i := range toks {
			p.l1f.finishL1(&slots[i], toks[i].t, toks[i].ok)
		}
		return out, err
	}
	p.st.StoreErrs.Add(uint64(len(failed)))
	be := store.BatchError{Op: "get"}
	var t tally
	defer t.addTo(p.st)
	for i := range slots {
		s := &slots[i]
		switch ferr, bad := failed[s.key]; {
		case bad:
			t.misses++
			be.Errors = append(be.Errors, store.KeyError{Key: s.key, Err: ferr})
		case i >= len(vals) || vals[i] == nil:
			t.misses++
		default:
			e, derr := p.ent.found(ctx, s.key, vals[i], p.l1f.owned(p.l1 != nil), &t)
			switch {
			case derr == nil:
				s.e, s.class = e, hit
				if !e.negative {
					out[s.key] = e.v
				}
			case !errors.Is(derr, store.ErrNotFound):
				be.Errors = append(be.Errors, store.KeyError{Key: s.key, Err: derr})
			}
		}
		if toks != nil {
			p.l1f.finishL1(s, toks[i].t, toks[i].ok)
		}
	}
	return out, be.Err()
}

// SetMany writes batch in one round trip per server.
func (p *Pipeline[V]) SetMany(ctx context.Context, batch []store.Item) error {
	if len(batch) == 0 {
		return nil
	}
	if p.l1 != nil {
		for i := range batch {
			p.DropL1(batch[i].Key)
		}
		defer func() {
			for i := range batch {
				p.DropL1(batch[i].Key)
			}
		}()
	}
	start := time.Now()
	err := store.SetMany(ctx, p.store, batch)
	p.st.Since(OpSetMany, start)
	p.countBatchErr(err, len(batch))
	return err
}

// DeleteMany removes keys (unique, checked) in one round trip per server.
func (p *Pipeline[V]) DeleteMany(ctx context.Context, keys []string) error {
	p.DropL1(keys...)
	defer p.DropL1(keys...)
	start := time.Now()
	err := store.DeleteMany(ctx, p.store, keys)
	p.st.Since(OpDeleteMany, start)
	p.countBatchErr(err, len(keys))
	return err
}

// Invalidate removes keys (unique, checked) so the next read loads them
// again. Before it touches the store it makes the flights of its keys
// invisible to later callers, so nobody who starts after it returns joins
// a load that began before it; with leases it voids every lease on them,
// so a load that began before it cannot fill after it.
func (p *Pipeline[V]) Invalidate(ctx context.Context, keys []string) error {
	p.iso.forget(keys)
	if p.coord == processCoord {
		return p.DeleteMany(ctx, keys)
	}
	p.DropL1(keys...)
	defer p.DropL1(keys...)
	start := time.Now()
	err := p.leases.invalidate(ctx, keys, p.cfg.StaleWhileRevalidate)
	p.st.Since(OpDeleteMany, start)
	p.countBatchErr(err, len(keys))
	return err
}
