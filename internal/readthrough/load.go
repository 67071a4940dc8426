package readthrough

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// loadFunc is the loader of one acquire step: Fetch's Loader for its one
// key, or FetchMany's ManyLoader. It returns a value or an error for each
// key, in order: an error matching store.ErrNotFound says the key does
// not exist; a loader's failure (wrapped) is every key's error.
type loadFunc[V any] func(ctx context.Context, keys []string) ([]V, []error)

// oneLoader is Fetch's loader as a loadFunc (of one key).
func oneLoader[V any](loader Loader[V]) loadFunc[V] {
	return func(ctx context.Context, keys []string) ([]V, []error) {
		v, err := loader(ctx, keys[0])
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("kura: load %q: %w", keys[0], err)
		}
		return []V{v}, []error{err}
	}
}

// manyLoader is FetchMany's loader as a loadFunc: a key it leaves out
// does not exist.
func manyLoader[V any](loader ManyLoader[V]) loadFunc[V] {
	return func(ctx context.Context, keys []string) ([]V, []error) {
		m, err := loader(ctx, keys)
		if err != nil {
			err = fmt.Errorf("kura: load %d missing keys (first %q): %w", len(keys), keys[0], err)
		}
		vals, errs := make([]V, len(keys)), make([]error, len(keys))
		for i, k := range keys {
			v, ok := m[k]
			switch {
			case err != nil:
				errs[i] = err
			case ok:
				vals[i] = v
			default:
				errs[i] = Absent(k)
			}
		}
		return vals, errs
	}
}

// loadJob is the body of the flights of j: the process flights first look
// once more at the keys they may find filled by a load that ended since
// the lookup (gen), so a plain cold miss costs one read, not two; the
// rest is loaded with one loader call and filled with one batched write.
func (p loadStep[V]) loadJob(b *budget, j *job[V], gen uint64, ttl time.Duration, ld loadFunc[V], op Op) func(context.Context) ([]vouched[V], []error) {
	return func(ctx context.Context) ([]vouched[V], []error) {
		out, errs := make([]vouched[V], len(j.keys)), make([]error, len(j.keys))
		idx := make([]int, 0, len(j.keys))
		var again []slot[V]
		for i, k := range j.keys {
			if j.check != nil && j.check[i] && p.group.Ended() != gen {
				again = append(again, slot[V]{key: k})
				continue
			}
			idx = append(idx, i)
		}
		if len(again) > 0 {
			p.rd.read(ctx, b, again)
			for n, i := 0, 0; n < len(again); i++ {
				if j.keys[i] != again[n].key {
					continue
				}
				if s := &again[n]; s.class == hit {
					out[i].v, errs[i] = serve(s.key, s.e.v, s.e.negative)
				} else {
					idx = append(idx, i)
				}
				n++
			}
		}
		if len(idx) > 0 {
			p.loads.loadFill(ctx, b, j, idx, ttl, ld, op, out, errs)
		}
		return out, errs
	}
}

// loadFill calls the loader once for the keys of j at idx and writes
// what it returns back in one batch (values, and negative entries for
// the keys that do not exist): under j's leases when it has them, else
// plainly where j.fill says so. out[i].at is when the result is vouched
// for from (see vouched): when the fill the store took under the lease
// was sent, else when the load began; a fill refused because the lease
// was lost gives errVoided with the value. A loader error or panic gives
// the leases up, so waiters need not wait out their TTL.
func (p loadStep[V]) loadFill(ctx context.Context, b *budget, j *job[V], idx []int, ttl time.Duration, ld loadFunc[V], op Op, out []vouched[V], errs []error) {
	keys := make([]string, len(idx))
	for n, i := range idx {
		keys[n] = j.keys[i]
	}
	var unfilled []store.Lease // leases no fill spends
	spent := false
	if j.leases != nil {
		defer func() {
			if !spent { // a panic
				for _, i := range idx {
					unfilled = append(unfilled, j.leases[i])
				}
			}
			p.leases.releaseMany(ctx, unfilled)
		}()
	}
	start := time.Now()
	vals, lerrs := p.loads.callLoad(ctx, b, keys, ld)
	buf := GetEncBuf() // the write-back's bytes: reused once p.fill returned
	defer PutEncBuf(buf)
	items, of := p.fills.fillItems(buf, j, idx, vals, lerrs, ttl, op, start, time.Since(start), &unfilled)
	for n, i := range idx {
		out[i], errs[i] = vouched[V]{v: vals[n], at: start}, lerrs[n]
	}
	sent := time.Now()
	filled, lost := p.fills.fill(ctx, b, items, op)
	spent = true
	for n, it := range items {
		i := of[n]
		switch {
		case !filled && it.lease != nil:
			unfilled = append(unfilled, *it.lease)
		case lost[it.key]:
			errs[i] = p.iso.voided(errs[i])
		case filled && it.lease != nil && !b.isKept(it.key):
			out[i].at = sent
		}
	}
}

// callLoad calls the loader in the caller's goroutine (a flight's),
// counting the call, its time, a failure or a panic (which goes on).
// The loader runs in the kura.load span: a driver's spans nest under it.
func (p loadStep[V]) callLoad(ctx context.Context, b *budget, keys []string, ld loadFunc[V]) ([]V, []error) {
	ctx, sp := p.tr.start(ctx, b, observe.Load, keys[0], len(keys))
	var failed error
	defer observe.Finish(sp, &failed)
	defer p.loads.countPanic()
	p.st.Loads.Add(1)
	start := time.Now()
	vals, errs := ld(ctx, keys)
	p.st.Since(OpLoad, start)
	if failed = firstFailure(errs); failed != nil {
		p.st.LoadErrs.Add(1)
	}
	return vals, errs
}

func (p loadStep[V]) countPanic() {
	if r := recover(); r != nil {
		p.st.LoadErrs.Add(1)
		p.st.Panics.Add(1)
		panic(r)
	}
}

// loadStep is the load step: methods over the pipeline's state.
type loadStep[V any] struct{ *Pipeline[V] }
