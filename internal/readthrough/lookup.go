package readthrough

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/deadline"
	"github.com/kuracache/kura/internal/l1"
	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// lookup reads the keys of slots (with the read strategy chosen in New,
// readStrategy) and classifies each one; keys are the
// keys of slots in order when the caller has them in a slice (nil: made
// from slots). With an L1
// whose store reports changes the read is tracked (it fills the L1); with
// leases, the keys it did not find are read again with the lease read,
// which takes their leases. With leases and an L1 bounded by MaxStaleness
// the lease read is the only read, and fills the L1: a plain read of an
// entry an Invalidate left stale would take memcached's recache token
// (every mg of a stale item hands it out) and never use it, so nobody
// would reload the key while Invalidates keep it stale. early asks the
// lease read for early refresh. Store errors and undecodable bytes are
// absorbed (counted, reported to OnError) and look like a miss, so a
// broken cache never breaks the caller.
func (p lookupStep[V]) lookup(ctx context.Context, b *budget, slots []slot[V], keys []string, early bool) {
	switch p.reads {
	case plainRead:
		p.rd.read(ctx, b, slots)
	case leaseRead:
		p.lr.leaseRead(ctx, b, slots, nil, keys, early)
	case trackedThenLease:
		p.rd.read(ctx, b, slots)
		var idx []int
		for i := range slots {
			if slots[i].class != hit {
				idx = append(idx, i)
			}
		}
		if len(idx) > 0 {
			p.lr.leaseRead(ctx, b, slots, idx, nil, early)
		}
	}
}

// readStrategy is how the lookup step reads the store: chosen once, in
// New, from the coordination and the L1.
type readStrategy uint8

const (
	// plainRead: no leases. One Get or one batch, tracked for the keys
	// an L1 over a store that reports changes may hold (l1Step.beginL1).
	plainRead readStrategy = iota
	// leaseRead: leases, and no L1 or one bounded by MaxStaleness,
	// which the lease read fills (l1Step.beginL1s).
	leaseRead
	// trackedThenLease: leases and an L1 over a store that reports
	// changes: the tracked read fills the L1, then the lease read takes
	// the leases of what it did not find.
	trackedThenLease
)

// chooseReads is the read strategy of a pipeline with coordination c and
// an L1 (l1: whether there is one; tracked: whether the store reports
// its changes).
func chooseReads(c coordination, l1, tracked bool) readStrategy {
	switch {
	case c == processCoord:
		return plainRead
	case l1 && tracked:
		return trackedThenLease
	}
	return leaseRead
}

// lookupStep is the lookup step: it reads with the pipeline's read
// strategy. Methods over the pipeline's state.
type lookupStep[V any] struct{ *Pipeline[V] }

// read is the plain (or, with an L1, tracked) read of slots: one Get for
// one key, one batch for more.
func (p readStep[V]) read(ctx context.Context, b *budget, slots []slot[V]) {
	if b.exhausted() {
		p.st.BudgetSkips.Add(1)
		p.tr.note(ctx, observe.BudgetSkip, int64(len(slots)))
		for i := range slots {
			p.st.Misses.Add(1)
			slots[i].failed = true
		}
		return
	}
	start := time.Now()
	sctx, st := b.bound(ctx, &p.clock, start)
	defer b.charge(st)
	if len(slots) == 1 {
		s := &slots[0]
		tok, track := p.l1f.beginL1(s.key)
		data, err := p.rd.get(sctx, s.key, track)
		p.st.Since(OpGet, start)
		p.cl.classify(sctx, b, s, data, err, OpGet, true, p.l1f.owned(track))
		p.l1f.finishL1(s, tok, track)
		return
	}
	keys := make([]string, len(slots))
	toks := make([]l1.Token, len(slots))
	track := make([]bool, len(slots))
	for i := range slots {
		keys[i] = slots[i].key
		toks[i], track[i] = p.l1f.beginL1(keys[i])
	}
	vals, err := p.rd.getMany(sctx, keys, p.l1 != nil)
	p.st.Since(OpGetMany, start)
	failed := batchFailures(err)
	for i := range slots {
		kerr := failed[keys[i]]
		if failed == nil && err != nil {
			kerr = err // the whole batch failed
		}
		var data []byte
		if kerr == nil && len(vals) == len(keys) {
			data = vals[i]
			if data == nil {
				kerr = store.ErrNotFound
			}
		}
		p.cl.classify(sctx, b, &slots[i], data, kerr, OpGetMany, failed != nil, p.l1f.owned(p.l1 != nil))
		p.l1f.finishL1(&slots[i], toks[i], track[i])
	}
	if err != nil && failed == nil {
		p.report(OpGetMany, "", err)
	}
}

// get is one store read, tracked when the L1 relies on reports.
func (p readStep[V]) get(ctx context.Context, key string, track bool) ([]byte, error) {
	if track && p.tracker != nil {
		return p.tracker.GetTracked(ctx, key)
	}
	return p.store.Get(ctx, key)
}

func (p readStep[V]) getMany(ctx context.Context, keys []string, track bool) ([][]byte, error) {
	if track && p.tracker != nil {
		return p.tracker.GetManyTracked(ctx, keys)
	}
	return store.GetMany(ctx, p.store, keys)
}

// batchFailures returns the per-key failures of a batch call (nil if
// none, or if the whole call failed).
func batchFailures(err error) map[string]error {
	var be *store.BatchError
	if err != nil && errors.As(err, &be) {
		return be.Failed()
	}
	return nil
}

// leaseRead is the lookup of a store with leases: one LeaseGet for the
// keys of slots at idx (all of them when idx is nil), which reads them and
// takes a lease on every key that holds nothing, then classify. keys are
// those keys in order if the caller has them (nil: made here).
func (p leaseReadStep[V]) leaseRead(ctx context.Context, b *budget, slots []slot[V], idx []int, keys []string, early bool) {
	sel := picks[V]{slots, idx}
	n := sel.len()
	op := OpGetMany
	if n == 1 {
		op = OpGet
	}
	if b.exhausted() {
		p.st.BudgetSkips.Add(uint64(n))
		p.tr.note(ctx, observe.BudgetSkip, int64(n))
		for j := range n {
			s := sel.at(j)
			s.failed, s.class = true, noFill
			p.st.Misses.Add(1)
		}
		return
	}
	if len(keys) != n {
		keys = make([]string, n)
		for j := range n {
			keys[j] = sel.at(j).key
		}
	}
	if p.l1 != nil && p.tracker == nil {
		defer p.l1f.finishL1s(sel, p.l1f.beginL1s(keys))
	}
	ph := placeholders.Get().(*placeholder)
	opts := store.LeaseOptions{TTL: p.cfg.LeaseTTL, Placeholder: ph.b}
	if early {
		opts.Recache = p.cfg.EarlyRefresh
	}
	start := time.Now()
	sctx, st := b.bound(ctx, &p.clock, start)
	res, err := p.leases.get(sctx, keys, opts)
	p.st.Since(op, start)
	ph.release(res, err)
	failed, whole := p.lr.leaseErr(ctx, res, err, n)
	if whole != nil {
		b.charge(st)
		for j := range n {
			p.lr.leaseFail(ctx, sel.at(j), op, whole)
		}
		return
	}
	var t tally
	for j := range n {
		if ferr, ok := failed[keys[j]]; ok {
			p.lr.leaseFail(ctx, sel.at(j), op, ferr)
			continue
		}
		p.cl.classifyLease(sctx, b, sel.at(j), res[j], early, &t)
	}
	t.addTo(p.st)
	b.charge(st) // after the decodes: a dictionary lookup is in the budget too
}

// picks are the slots a lease read is for: slots at idx, or all of slots
// when idx is nil.
type picks[V any] struct {
	slots []slot[V]
	idx   []int
}

func (k picks[V]) len() int {
	if k.idx != nil {
		return len(k.idx)
	}
	return len(k.slots)
}

func (k picks[V]) at(j int) *slot[V] {
	if k.idx != nil {
		return &k.slots[k.idx[j]]
	}
	return &k.slots[j]
}

// leaseErr tells a lease read that failed as a whole (whole, with every
// key failed) from one whose failed keys are listed (failed; nil when
// none did).
func (p leaseReadStep[V]) leaseErr(ctx context.Context, res []store.LeaseResult, err error, n int) (failed map[string]error, whole error) {
	if err == nil && len(res) != n {
		err = fmt.Errorf("kura: store returned %d lease results for %d keys", len(res), n)
	}
	if err == nil {
		return nil, nil
	}
	// A deadline that is not the caller's is the budget's: the read
	// spent it (deadline.Ours).
	var be *store.BatchError
	if !errors.As(err, &be) || len(res) != n {
		if deadline.Ours(ctx, err) {
			p.st.BudgetSkips.Add(uint64(n))
		}
		return nil, err
	}
	failed = be.Failed()
	// A store may report the budget's end per key (a pipeline whose
	// replies did not come back in time): those are the budget's too, not
	// only a whole-call failure.
	for _, ferr := range failed {
		if deadline.Ours(ctx, ferr) {
			p.st.BudgetSkips.Add(1)
		}
	}
	return failed, nil
}

// leaseFail is the lease read's failure for s: a miss that loads without
// filling.
func (p leaseReadStep[V]) leaseFail(ctx context.Context, s *slot[V], op Op, err error) {
	s.failed, s.class = true, noFill
	p.st.StoreErrs.Add(1)
	p.st.Misses.Add(1)
	p.tr.absorbed(ctx, s.key, err)
	p.report(op, s.key, err)
}

// placeholder is a lease placeholder (codec.NewLeaseEntry) that lease reads offer
// their store. A read that took no lease with it gives it back for the
// next read, so a hit allocates none (a token is unique to the one lease
// it is ever taken with).
type placeholder struct{ b []byte }

var placeholders = sync.Pool{New: func() any { return &placeholder{b: codec.NewLeaseEntry()} }}

// release gives ph back unless the read may have left it under a key: a
// failure, a key that held nothing (the store tried to take its lease),
// or a lease won.
func (ph *placeholder) release(res []store.LeaseResult, err error) {
	if err != nil {
		return
	}
	for i := range res {
		if res[i].Value == nil || res[i].Won {
			return
		}
	}
	placeholders.Put(ph)
}

// readStep is the plain (or tracked) read of the lookup step: methods over the pipeline's state.
type readStep[V any] struct{ *Pipeline[V] }

// leaseReadStep is the lease read of the lookup step: methods over the pipeline's state.
type leaseReadStep[V any] struct{ *Pipeline[V] }
