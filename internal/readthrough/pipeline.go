// Package readthrough is the read path of a kura Cache: one pipeline that
// Fetch and FetchMany both run, in five steps.
//
//  1. lookup: the L1 (if any), then the store: a plain or tracked read, or
//     a lease read, which reads and takes leases on misses in one call;
//  2. classify: each key is a hit (a value or a negative entry), stale or
//     due for early refresh (served, reloaded in the background), not
//     understood or kept (load, never overwrite), or a miss that this
//     caller holds the lease of, waits for, or loads without a lease;
//  3. acquire: the strategy that decides who loads: the process flight
//     (one load per key per process) or the lease (one load per key across
//     every process sharing the store);
//  4. load: one loader call for the keys a caller leads, on the goroutine
//     of their flights;
//  5. fill: the write-back, conditional on the lease when there is one.
//
// Fetch is the one-key case: its keys are a slice of one. The store time
// of a call is one budget over all its steps. The package knows nothing of
// the kura API; the root package is its face.
package readthrough

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/deadline"
	"github.com/kuracache/kura/internal/flight"
	"github.com/kuracache/kura/internal/l1"
	"github.com/kuracache/kura/internal/readthrough/clock"
	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// Loader loads one key; ManyLoader many (see the kura package).
type (
	Loader[V any]     func(ctx context.Context, key string) (V, error)
	ManyLoader[V any] func(ctx context.Context, keys []string) (map[string]V, error)
)

// Config is what the pipeline needs of the Cache's options, defaults
// applied.
type Config struct {
	Codec                                  *codec.Codec
	Schema                                 uint32 // V's fingerprint
	NegativeTTL, StoreTimeout, LoadTimeout time.Duration
	SchemaGrace                            time.Duration
	LeaseTTL, LeaseWait                    time.Duration
	StaleWhileRevalidate, EarlyRefresh     time.Duration
	MaxValueSize, WarnValueSize            int
	OnLargeValue                           func(key string, n int)
	OnError                                func(op Op, key string, err error)
	Jitter                                 func(time.Duration) time.Duration
	Leaser                                 store.Leaser   // nil: process coordination
	L1                                     any            // *l1.Tier[V], nil without an L1
	Tracker                                store.Tracker  // the L1's reports, nil: TTL-bounded L1
	Tracer                                 observe.Tracer // nil: no spans
}

// Pipeline is the read path of one Cache of values of type V.
type Pipeline[V any] struct {
	cfg     Config
	store   store.Store
	leaser  store.Leaser
	l1      *l1.Tier[V]
	tracker store.Tracker
	st      *Counters
	schema  uint32
	// group runs the process flights (one load per key per process)
	// and, with leases, the loads that write nothing back.
	group flight.Group[vouched[V]]
	// holders runs the loads of lease holders, apart from group, so a
	// caller that wins a lease never joins a load it may not take.
	holders flight.Group[vouched[V]]
	// hub polls, for Fetch and FetchMany, the keys other callers hold
	// leases on: one batched read per tick for the whole process.
	hub waitHub
	// clock bounds the first store call of reads (see budget.bound).
	clock clock.Clock
	// batches are the slots of batch reads (*batch[V]), reused.
	batches sync.Pool
}

// New returns the pipeline over s.
func New[V any](s store.Store, cfg Config) *Pipeline[V] {
	p := &Pipeline[V]{cfg: cfg, store: s, leaser: cfg.Leaser, tracker: cfg.Tracker, st: new(Counters), schema: cfg.Schema}
	if t, ok := cfg.L1.(*l1.Tier[V]); ok {
		p.l1 = t
	}
	if p.cfg.Jitter == nil {
		p.cfg.Jitter = func(d time.Duration) time.Duration { return d }
	}
	return p
}

// Counters returns the pipeline's counters.
func (p *Pipeline[V]) Counters() *Counters { return p.st }

// lookupEnded reports a decode that failed because its context ended
// during a dictionary lookup (the store budget or the caller's deadline):
// the bytes may be sound, so they are neither served nor replaced.
func lookupEnded(err error) bool {
	return errors.Is(err, codec.ErrUnknownDictionary) &&
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

// class is what a lookup found for a key: what the caller does next.
type class uint8

const (
	miss    class = iota // nothing usable: load (and fill)
	hit                  // e holds a value or a negative entry to serve
	won                  // this caller holds the lease: load and fill under it
	wait                 // another caller holds the lease: wait for its fill
	noFill               // load, but write nothing back
	corrupt              // undecodable bytes under no lease: remove, look again
)

// slot is one key on its way through the pipeline.
type slot[V any] struct {
	key string
	e   entry[V]
	// lease, won, stale: what a lease read found (see store.LeaseResult);
	// the slot keeps no more of it, since FetchMany holds one per key.
	lease      store.Lease
	won, stale bool
	// refresh: serve e and reload the key in the background under r.Lease
	// (a stale value, or one due for early refresh).
	refresh bool
	failed  bool // the store failed: a second look would wait it out again
	// class last, with the flags: FetchMany holds a slot per key (128
	// bytes for a []byte V).
	class class
}

// Fetch runs the pipeline for one key: the one-key case of FetchMany. It
// is the kura.Fetch span when the Tracer records the call (startCall).
func (p *Pipeline[V]) Fetch(ctx context.Context, key string, ttl time.Duration, loader Loader[V]) (V, error) {
	if tctx, sp := p.startCall(ctx, observe.Fetch, key, 1); sp != nil {
		return inSpan(sp, func() (V, error) { return p.fetch(tctx, key, ttl, loader, sp) })
	}
	return p.fetch(ctx, key, ttl, loader, nil)
}

// fetch is Fetch in the call's span, call (nil: the call is not
// recorded, and its steps make no Tracer call at all).
func (p *Pipeline[V]) fetch(ctx context.Context, key string, ttl time.Duration, loader Loader[V], call observe.Span) (V, error) {
	if p.l1 != nil { // before any budget or timer: a hit costs none
		if v, neg, ok := p.l1.Get(key); ok {
			if call != nil {
				call.Note(observe.L1Hit, 0)
			}
			return serve(key, v, neg)
		}
	}
	if err := ctx.Err(); err != nil {
		// A caller that already gave up gets its context's error, not
		// whichever of a load's result and ctx.Done a select picks.
		var zero V
		return zero, err
	}
	b := p.newBudget()
	b.quiet = call == nil
	gen := p.group.Ended()
	var one [1]slot[V]
	one[0].key = key
	p.tracedLookup(ctx, &b, one[:], nil, true)
	if call != nil {
		p.noteLookup(ctx, &one[0])
	}
	if s := &one[0]; s.class == hit {
		if s.refresh {
			p.refreshLater(ctx, []store.Lease{s.lease}, ttl, oneLoader(loader), OpSet)
		}
		return serve(key, s.e.v, s.e.negative)
	}
	return p.fetchMiss(ctx, b, one[0], gen, ttl, loader)
}

// fetchMiss is Fetch past a lookup that served nothing. It takes the
// budget and the slot by value, so that Fetch's own stay on its stack
// (the acquire step hands them to a flight's goroutine).
func (p *Pipeline[V]) fetchMiss(ctx context.Context, b budget, s slot[V], gen uint64, ttl time.Duration, loader Loader[V]) (V, error) {
	var v V
	var verr error
	err := p.acquire(ctx, &b, []slot[V]{s}, gen, ttl, oneLoader(loader), OpSet, func(_ string, rv V, err error) {
		v, verr = rv, err
	})
	if err != nil {
		var zero V
		return zero, err
	}
	return v, verr
}

// serve is the result of a hit.
func serve[V any](key string, v V, negative bool) (V, error) {
	if negative {
		var zero V
		return zero, Absent(key)
	}
	return v, nil
}

// Absent is the error for a key cached as "not found".
func Absent(key string) error {
	return fmt.Errorf("kura: %q is cached as absent: %w", key, store.ErrNotFound)
}

// FetchMany runs the pipeline for keys (unique, checked), in a
// kura.FetchMany span when the Tracer records the call (startCall).
func (p *Pipeline[V]) FetchMany(ctx context.Context, keys []string, ttl time.Duration, loader ManyLoader[V]) (map[string]V, error) {
	if tctx, sp := p.startCall(ctx, observe.FetchMany, firstKey(keys), len(keys)); sp != nil {
		return inSpan(sp, func() (map[string]V, error) { return p.fetchMany(tctx, keys, ttl, loader, sp) })
	}
	return p.fetchMany(ctx, keys, ttl, loader, nil)
}

// fetchMany is FetchMany in the call's span, call (nil: not recorded).
func (p *Pipeline[V]) fetchMany(ctx context.Context, keys []string, ttl time.Duration, loader ManyLoader[V], call observe.Span) (map[string]V, error) {
	out := make(map[string]V, len(keys))
	bt := p.getBatch(len(keys))
	slots := p.l1Split(keys, out, bt.slots[:0])
	if len(slots) == 0 {
		p.putBatch(bt, slots)
		if call != nil {
			call.Note(observe.Hits, int64(len(keys))) // all from the L1
		}
		return out, nil
	}
	b := p.newBudget()
	b.quiet = call == nil
	gen := p.group.Ended()
	sorted := keys // the keys of slots, in order: all of them when the L1 served none
	if len(slots) != len(keys) {
		sorted = nil
	}
	p.tracedLookup(ctx, &b, slots, sorted, true)
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if call != nil {
		p.noteMany(ctx, slots, len(keys)-len(slots))
	}
	rest, refresh := slots[:0], []store.Lease(nil)
	for i := range slots {
		s := &slots[i]
		if s.class == hit && !s.e.negative {
			out[s.key] = s.e.v
		}
		switch {
		case s.class == hit && s.won && s.stale: // a stale value is reloaded now
			s.class = won
			rest = append(rest, *s)
		case s.class != hit:
			rest = append(rest, *s)
		case s.refresh:
			refresh = append(refresh, s.lease)
		}
	}
	if len(refresh) > 0 {
		p.refreshLater(ctx, refresh, ttl, manyLoader(loader), OpSetMany)
	}
	if len(rest) == 0 {
		p.putBatch(bt, slots)
		return out, nil
	}
	// rest is a part of bt's slots, which the acquire step hands on: bt
	// is not reused.
	return out, p.fetchManyMiss(ctx, b, rest, gen, ttl, loader, out)
}

// batch is the slots of one batch read, reused from call to call: a warm
// FetchMany or GetMany allocates none (a slot is 128 bytes for a []byte V,
// so 100 keys would cost 12.8 KB of garbage per call).
type batch[V any] struct{ slots []slot[V] }

// maxPooledSlots is the most slots a batch keeps for reuse.
const maxPooledSlots = 1024

// getBatch returns a batch with room for n slots.
func (p *Pipeline[V]) getBatch(n int) *batch[V] {
	bt, _ := p.batches.Get().(*batch[V])
	if bt == nil {
		bt = new(batch[V])
	}
	if cap(bt.slots) < n {
		bt.slots = make([]slot[V], 0, n)
	}
	return bt
}

// putBatch gives bt back once nothing holds its slots any more; used are
// the slots this call filled, cleared so that the pool keeps no value or
// key alive.
func (p *Pipeline[V]) putBatch(bt *batch[V], used []slot[V]) {
	clear(used)
	if cap(bt.slots) <= maxPooledSlots {
		p.batches.Put(bt)
	}
}

// fetchManyMiss is FetchMany's acquire step for the keys its lookup did
// not serve. It takes the budget by value, as fetchMiss does, so that a
// FetchMany served by its lookup keeps its own on the stack.
func (p *Pipeline[V]) fetchManyMiss(ctx context.Context, b budget, rest []slot[V], gen uint64, ttl time.Duration, loader ManyLoader[V], out map[string]V) error {
	var first error
	err := p.acquire(ctx, &b, rest, gen, ttl, manyLoader(loader), OpSetMany, func(key string, v V, err error) {
		switch {
		case err == nil:
			out[key] = v
		case errors.Is(err, store.ErrNotFound):
			delete(out, key) // a stale value that no longer exists
		case first == nil:
			first = err
		}
	})
	if err == nil {
		err = first
	}
	return err
}

// lookup reads the keys of slots and classifies each one; keys are the
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
func (p *Pipeline[V]) lookup(ctx context.Context, b *budget, slots []slot[V], keys []string, early bool) {
	if p.leaser == nil || (p.l1 != nil && p.tracker != nil) {
		p.read(ctx, b, slots)
		if p.leaser == nil {
			return
		}
	}
	var idx []int
	if p.l1 != nil && p.tracker != nil {
		for i := range slots {
			if slots[i].class != hit {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return
		}
		keys = nil
	}
	p.leaseRead(ctx, b, slots, idx, keys, early)
}

// read is the plain (or, with an L1, tracked) read of slots: one Get for
// one key, one batch for more.
func (p *Pipeline[V]) read(ctx context.Context, b *budget, slots []slot[V]) {
	if b.exhausted() {
		p.st.BudgetSkips.Add(1)
		p.note(ctx, observe.BudgetSkip, int64(len(slots)))
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
		tok, track := p.beginL1(s.key)
		data, err := p.get(sctx, s.key, track)
		p.st.Since(OpGet, start)
		p.classify(sctx, b, s, data, err, OpGet, true, p.owned(track))
		p.finishL1(s, tok, track)
		return
	}
	keys := make([]string, len(slots))
	toks := make([]l1.Token, len(slots))
	track := make([]bool, len(slots))
	for i := range slots {
		keys[i] = slots[i].key
		toks[i], track[i] = p.beginL1(keys[i])
	}
	vals, err := p.getMany(sctx, keys, p.l1 != nil)
	p.st.Since(OpGetMany, start)
	failed := batchFailures(err, len(keys), len(vals))
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
		p.classify(sctx, b, &slots[i], data, kerr, OpGetMany, failed != nil, p.owned(p.l1 != nil))
		p.finishL1(&slots[i], toks[i], track[i])
	}
	if err != nil && failed == nil {
		p.report(OpGetMany, "", err)
	}
}

// classify turns one plain read into the slot's class; ctx (the read's
// bounded context) bounds a dictionary lookup of the decode.
// A whole batch's failure is reported once by the caller, not per key
// (reportFail false). owned: see decode.
func (p *Pipeline[V]) classify(ctx context.Context, b *budget, s *slot[V], data []byte, err error, op Op, reportFail, owned bool) {
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			p.st.Misses.Add(1)
			return
		}
		p.st.StoreErrs.Add(1)
		p.st.Misses.Add(1)
		s.failed = true
		p.absorbed(ctx, s.key, err)
		if reportFail {
			p.report(op, s.key, err)
		}
		return
	}
	e, derr := p.found(ctx, s.key, data, owned, nil)
	switch {
	case derr == nil:
		s.e, s.class = e, hit
	case errors.Is(derr, store.ErrNotFound):
	case errors.Is(derr, codec.ErrNotUnderstood), lookupEnded(derr):
		// A newer writer's entry, or one whose dictionary lookup the
		// budget ended: a miss here, but its writer reads it back, so
		// this call must not replace it.
		b.keepEntry(s.key, false)
		s.class = noFill
		p.report(op, s.key, derr)
	case e.keep:
		// A recent entry of another type (rolling deploy).
		b.keepEntry(s.key, true)
		s.class = noFill
		p.report(op, s.key, derr)
	default:
		p.report(op, s.key, derr)
	}
}

// leaseRead is the lookup of a store with leases: one LeaseGet for the
// keys of slots at idx (all of them when idx is nil), which reads them and
// takes a lease on every key that holds nothing, then classify. keys are
// those keys in order if the caller has them (nil: made here).
func (p *Pipeline[V]) leaseRead(ctx context.Context, b *budget, slots []slot[V], idx []int, keys []string, early bool) {
	sel := picks[V]{slots, idx}
	n := sel.len()
	op := OpGetMany
	if n == 1 {
		op = OpGet
	}
	if b.exhausted() {
		p.st.BudgetSkips.Add(uint64(n))
		p.note(ctx, observe.BudgetSkip, int64(n))
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
		defer p.finishL1s(sel, p.beginL1s(keys))
	}
	ph := placeholders.Get().(*placeholder)
	opts := store.LeaseOptions{TTL: p.cfg.LeaseTTL, Placeholder: ph.b}
	if early {
		opts.Recache = p.cfg.EarlyRefresh
	}
	start := time.Now()
	sctx, st := b.bound(ctx, &p.clock, start)
	res, err := p.leaser.LeaseGet(sctx, keys, opts)
	p.st.Since(op, start)
	ph.release(res, err)
	failed, whole := p.leaseErr(ctx, res, err, n)
	if whole != nil {
		b.charge(st)
		for j := range n {
			p.leaseFail(ctx, sel.at(j), op, whole)
		}
		return
	}
	var t tally
	for j := range n {
		if ferr, ok := failed[keys[j]]; ok {
			p.leaseFail(ctx, sel.at(j), op, ferr)
			continue
		}
		p.classifyLease(sctx, b, sel.at(j), res[j], early, &t)
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
func (p *Pipeline[V]) leaseErr(ctx context.Context, res []store.LeaseResult, err error, n int) (failed map[string]error, whole error) {
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
func (p *Pipeline[V]) leaseFail(ctx context.Context, s *slot[V], op Op, err error) {
	s.failed, s.class = true, noFill
	p.st.StoreErrs.Add(1)
	p.st.Misses.Add(1)
	p.absorbed(ctx, s.key, err)
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

// beginL1s places the L1's placeholders for a lease read of keys bounded
// by MaxStaleness; finishL1s fills the L1 with what the read found for
// the slots of sel: a fresh value, not a stale one (served under
// stale-while-revalidate).
func (p *Pipeline[V]) beginL1s(keys []string) []l1.Token {
	toks := make([]l1.Token, len(keys))
	for j, k := range keys {
		toks[j] = p.l1.Begin(k)
	}
	return toks
}

func (p *Pipeline[V]) finishL1s(sel picks[V], toks []l1.Token) {
	for j := range toks {
		s := sel.at(j)
		p.l1.Finish(s.key, toks[j], s.e.v, s.e.negative, s.e.rawLen, s.class == hit && !s.stale)
	}
}

// classifyLease is classify for a lease read, decoding the value when
// there is one to serve.
func (p *Pipeline[V]) classifyLease(ctx context.Context, b *budget, s *slot[V], r store.LeaseResult, early bool, t *tally) {
	s.lease, s.won, s.stale = r.Lease, r.Won, r.Stale
	placeholder := r.Value != nil && IsPlaceholder(r.Value)
	if r.Value != nil && !placeholder && (!r.Stale || p.cfg.StaleWhileRevalidate > 0) {
		e, err := p.found(ctx, s.key, r.Value, true, t)
		switch {
		case err == nil:
			if r.Stale {
				p.st.StaleServed.Add(1)
			}
			s.e, s.class = e, hit
			// Early refresh (memcached's R flag) or a stale value under
			// stale-while-revalidate: serve it, reload behind. A store
			// without the R flag (Redis) hands out the value's own bytes
			// as its version: refresh (XFetch) on condition that the
			// value did not change meanwhile.
			s.refresh = r.Won || (early && p.cfg.EarlyRefresh > 0 && r.Lease.Token != nil &&
				xfetch(e.due, e.cost, time.Now(), p.cfg.EarlyRefresh))
			if s.refresh {
				// A []byte value may be a slice of the token (decode):
				// the caller may change it while the refresh runs.
				s.lease.Token = bytes.Clone(s.lease.Token)
			}
			return
		case errors.Is(err, codec.ErrNotUnderstood), lookupEnded(err):
			// A newer writer's entry, or one whose dictionary lookup the
			// budget ended (not corrupt: readable once the dictionary
			// is found): never overwrite it.
			p.report(OpGet, s.key, err)
			b.keepEntry(s.key, false)
			s.class = noFill
			return
		case e.keep:
			// A recent value of another type (a rolling deploy).
			p.st.SchemaKept.Add(1)
			p.report(OpGet, s.key, err)
			s.class = noFill
			return
		default:
			p.report(OpGet, s.key, err)
			s.class = corrupt
			if r.Won {
				s.class = won
			}
			return
		}
	}
	p.st.Misses.Add(1)
	switch {
	case placeholder, r.Held:
		s.class = wait
	case r.Won:
		s.class = won
	default:
		s.class = noFill
	}
}

// get is one store read, tracked when the L1 relies on reports.
func (p *Pipeline[V]) get(ctx context.Context, key string, track bool) ([]byte, error) {
	if track && p.tracker != nil {
		return p.tracker.GetTracked(ctx, key)
	}
	return p.store.Get(ctx, key)
}

func (p *Pipeline[V]) getMany(ctx context.Context, keys []string, track bool) ([][]byte, error) {
	if track && p.tracker != nil {
		return p.tracker.GetManyTracked(ctx, keys)
	}
	return store.GetMany(ctx, p.store, keys)
}

// beginL1 places the L1's placeholder for a read of key that may fill it.
func (p *Pipeline[V]) beginL1(key string) (l1.Token, bool) {
	if p.l1 == nil || (p.tracker != nil && !p.tracker.Tracks(key)) {
		return l1.Token{}, false
	}
	return p.l1.Begin(key), true
}

// finishL1 fills the L1 with a hit, unless the key was invalidated while
// the read was in flight.
func (p *Pipeline[V]) finishL1(s *slot[V], tok l1.Token, track bool) {
	if track {
		p.l1.Finish(s.key, tok, s.e.v, s.e.negative, s.e.rawLen, s.class == hit)
	}
}

// batchFailures returns the per-key failures of a batch call (nil if
// none, or if the whole call failed).
func batchFailures(err error, nKeys, nVals int) map[string]error {
	var be *store.BatchError
	if err != nil && errors.As(err, &be) {
		return be.Failed()
	}
	return nil
}

func (p *Pipeline[V]) report(op Op, key string, err error) {
	if p.cfg.OnError != nil {
		p.cfg.OnError(op, key, err)
	}
}
