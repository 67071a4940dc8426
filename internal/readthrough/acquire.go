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

// acquisition is one acquire step, of Fetch (one key) or FetchMany: it
// decides who loads each key that the lookup did not serve, and hands
// each key's outcome to emit once.
//
// Each key to load is one flight of this process: group for the process
// strategy (and, with leases, a load that writes nothing back), holders
// for a load under this caller's lease. A caller leads the flights of
// its keys that no other caller runs, loading them all with one loader
// call on one goroutine (bounded by Config.LoadTimeout, a panic re-raised
// in the caller), and joins the others. A key whose lease another caller
// holds joins that caller's load if it runs in this process, else waits
// through the Cache's poller (the hub) for its fill. A result shared with
// this caller is taken only if the store vouched for it after the caller
// asked (see vouched); else the key is looked up again.
type acquisition[V any] struct {
	p      *Pipeline[V]
	b      *budget
	gen    uint64 // the process flights that had ended before the lookup
	ttl    time.Duration
	ld     loadFunc[V]
	fillOp Op // OpSet for Fetch, OpSetMany for FetchMany
	emit   func(key string, v V, err error)
	n      int       // keys in all: the hub's channel holds this many
	start  time.Time // after the lookup: a shared result is taken if vouched for after it
	reg    *waitReg
	waitOn string // the first key waited for (the wait span's)
	waited bool
	// failedOpen: LeaseWait passed; the first load this caller then leads
	// is counted in LeaseFailOpen.
	failedOpen, countedOpen bool
}

// maxRetries bounds how often a key is looked up again after the load it
// joined lost its lease; then it is loaded without writing back.
const maxRetries = 3

// acquire runs the acquire, load and fill steps for slots (none of them
// served yet) and hands each key's outcome to emit. It returns early with
// ctx's error if ctx ends; a panic of a load this caller leads goes on
// (a *flight.PanicError).
func (p *Pipeline[V]) acquire(ctx context.Context, b *budget, slots []slot[V], gen uint64, ttl time.Duration, ld loadFunc[V], fillOp Op, emit func(string, V, error)) error {
	a := &acquisition[V]{p: p, b: b, gen: gen, ttl: ttl, ld: ld, fillOp: fillOp, emit: emit, n: len(slots), start: time.Now()}
	defer a.stopWaiting()
	for round := 0; ; round++ {
		retry, err := a.collect(ctx, a.claim(ctx, slots, round > maxRetries))
		switch {
		case err != nil:
			return err
		case len(retry) > 0:
			slots = retry
			if round < maxRetries {
				p.tracedLookup(ctx, b, slots, nil, false)
				if fillOp == OpSet && !b.quiet { // Fetch: its outcome is the last lookup's
					p.noteLookup(ctx, &slots[0])
				}
			} else {
				for i := range slots {
					slots[i].class = noFill
				}
			}
		case a.reg != nil && a.reg.pending > 0:
			if slots, err = a.await(ctx); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// claimed is one key's load that this caller leads or joined.
type claimed[V any] struct {
	key  string
	call *flight.Call[vouched[V]]
	led  bool
	kind uint8 // process, holder or joinHolder
}

const (
	process    = iota // a load in the process flight (group)
	holder            // a load under this caller's lease (holders)
	joinHolder        // another caller's load under its lease, here
)

// job is the keys of the flights one caller leads in one group: loaded
// with one loader call, filled with one batched write.
type job[V any] struct {
	keys   []string
	calls  []*flight.Call[vouched[V]]
	leases []store.Lease // holders: the lease of each key
	fill   []bool        // process: write back (a miss) or not
	check  []bool        // process: read again first if a load ended
}

// claim serves the hits of slots, claims a flight for each key to load
// (starting the loads this caller leads), and sends the keys another
// caller holds the lease of to that caller's load here, or to the hub.
// fresh makes the process flights new ones (the last retry).
func (a *acquisition[V]) claim(ctx context.Context, slots []slot[V], fresh bool) []claimed[V] {
	p := a.p
	a.removeCorrupt(ctx, slots)
	claims := make([]claimed[V], 0, len(slots))
	var hold, proc job[V]
	var waits []string
	var refresh []store.Lease
	for i := range slots {
		s := &slots[i]
		switch s.class {
		case hit:
			if s.refresh {
				refresh = append(refresh, s.lease) // a stale value: serve it, reload behind
			}
			v, err := serve(s.key, s.e.v, s.e.negative)
			a.emit(s.key, v, err)
			continue
		case won:
			c, led := p.holders.Claim(s.key, !Faults.JoinAfterInvalidate.Load())
			if led {
				hold.add(s.key, c)
				hold.leases = append(hold.leases, s.lease)
			} else { // only with the fault on: this lease is not needed
				p.countShared(ctx)
				p.release(ctx, s.lease)
			}
			claims = append(claims, claimed[V]{key: s.key, call: c, led: led, kind: holder})
			continue
		case wait:
			a.countWait()
			if c := p.holders.Lookup(s.key); c != nil {
				p.countShared(ctx)
				claims = append(claims, claimed[V]{key: s.key, call: c, kind: joinHolder})
			} else {
				waits = append(waits, s.key)
			}
			continue
		}
		if s.won { // a lease this caller will not fill
			p.release(ctx, s.lease)
		}
		c, led := p.group.Claim(s.key, fresh)
		if led {
			if a.failedOpen && !a.countedOpen {
				a.countedOpen = true
				p.st.LeaseFailOpen.Add(1)
			}
			proc.add(s.key, c)
			proc.fill = append(proc.fill, p.leaser == nil) // a kept entry: see budget.keep
			proc.check = append(proc.check, s.class == miss && !s.failed && p.leaser == nil)
		} else {
			p.countShared(ctx)
		}
		claims = append(claims, claimed[V]{key: s.key, call: c, led: led, kind: process})
	}
	p.refreshLater(ctx, refresh, a.ttl, a.ld, a.fillOp)
	pb := a.b
	if len(hold.calls) > 0 && len(proc.calls) > 0 {
		cp := *a.b // the two loads run at once: each its own copy of the budget
		pb = &cp
	}
	if len(hold.calls) > 0 {
		p.holders.Run(ctx, p.cfg.LoadTimeout, hold.calls, p.loadJob(a.b, &hold, a.gen, a.ttl, a.ld, a.fillOp))
	}
	if len(proc.calls) > 0 {
		p.group.Run(ctx, p.cfg.LoadTimeout, proc.calls, p.loadJob(pb, &proc, a.gen, a.ttl, a.ld, a.fillOp))
	}
	a.startWait(waits)
	return claims
}

func (j *job[V]) add(key string, c *flight.Call[vouched[V]]) {
	j.keys = append(j.keys, key)
	j.calls = append(j.calls, c)
}

// removeCorrupt removes the undecodable bytes found under no lease, so
// that the next read takes a lease: those keys wait for it through the
// hub, or, if the removal failed, load without writing back.
func (a *acquisition[V]) removeCorrupt(ctx context.Context, slots []slot[V]) {
	var keys []string
	for i := range slots {
		if slots[i].class == corrupt {
			keys = append(keys, slots[i].key)
		}
	}
	if len(keys) == 0 {
		return
	}
	next := wait
	if err := a.p.leaser.Invalidate(ctx, keys, 0); err != nil {
		next = noFill
	}
	for i := range slots {
		if slots[i].class == corrupt {
			slots[i].class = next
		}
	}
}

// collect waits for the loads of claims and hands each result to emit,
// or returns the keys whose shared result this caller may not take, to
// look up again (a joined holder's load: to wait for through the hub).
func (a *acquisition[V]) collect(ctx context.Context, claims []claimed[V]) ([]slot[V], error) {
	var retry []slot[V]
	var rewait []string
	for _, c := range claims {
		r, err := c.call.Wait(ctx, c.led)
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		voided := errors.Is(err, errVoided)
		switch {
		case c.led && voided:
			// The lease holder began before it took the lease: its own
			// load read the source after any Invalidate that returned
			// before it. Its fill was refused, its value stands.
			err = nil
		case c.led, c.kind == process && a.p.leaser == nil:
		case c.kind == joinHolder && (voided || err == nil && !r.takes(a.start)):
			rewait = append(rewait, c.key)
			continue
		case voided || (err == nil || errors.Is(err, store.ErrNotFound)) && !r.takes(a.start):
			retry = append(retry, slot[V]{key: c.key})
			continue
		}
		a.emit(c.key, r.v, err)
	}
	a.startWait(rewait)
	return retry, nil
}

// countWait counts, once per call, that it waits for another caller.
func (a *acquisition[V]) countWait() {
	if !a.waited {
		a.waited = true
		a.p.st.LeaseWaits.Add(1)
	}
}

// startWait registers keys with the hub.
func (a *acquisition[V]) startWait(keys []string) {
	if len(keys) == 0 {
		return
	}
	if a.reg == nil {
		a.reg = newWaitReg(a.n)
		a.waitOn = keys[0]
	}
	a.p.startWait(a.reg, keys)
}

func (a *acquisition[V]) stopWaiting() {
	if a.reg != nil {
		a.p.cancelWait(a.reg)
	}
}

// await waits for the hub's results, classified; when Config.LeaseWait
// has passed, the keys still waited for load without writing back.
func (a *acquisition[V]) await(ctx context.Context) ([]slot[V], error) {
	wctx, ws := a.p.waitSpan(ctx, a.b, a.waitOn, a.reg.pending)
	got, err := a.p.awaitFills(wctx, a.reg, a.start)
	a.p.endWait(ws, a.start, got, err)
	if err != nil || got != nil {
		return got, err
	}
	a.failedOpen = true
	keys := a.p.cancelWait(a.reg)
	slots := make([]slot[V], len(keys))
	for i, k := range keys {
		slots[i] = slot[V]{key: k, class: noFill}
	}
	return slots, nil
}

// countShared counts a caller that takes another caller's load.
func (p *Pipeline[V]) countShared(ctx context.Context) {
	p.st.Shared.Add(1)
	p.note(ctx, observe.Shared, 0)
}

// refreshLater reloads the keys of leases in the background, in one
// holder flight (one loader call, one batched conditional fill), except
// the keys a load of which runs in this process already: their leases
// are dropped, not released (releasing a lease that came with a value
// removes the value). The reload outlives the request: it keeps ctx's
// values, not its cancellation, and is bounded by Config.LoadTimeout.
func (p *Pipeline[V]) refreshLater(ctx context.Context, leases []store.Lease, ttl time.Duration, ld loadFunc[V], op Op) {
	var j job[V]
	for _, l := range leases {
		if c, led := p.holders.Claim(l.Key, false); led {
			j.add(l.Key, c)
			j.leases = append(j.leases, l)
		}
	}
	if len(j.calls) == 0 {
		return
	}
	p.st.EarlyRefreshes.Add(uint64(len(j.calls)))
	b := p.newBudget() // the refresh's own store time, not the request's
	// A new root span, linked to the call's: the reload outlives it. It
	// is asked for whether or not the call was recorded (a new root is
	// sampled on its own), and its steps are recorded as it is.
	rctx, sp := p.startCall(ctx, observe.Refresh, j.keys[0], len(j.keys))
	b.quiet = sp == nil
	p.holders.Run(rctx, p.cfg.LoadTimeout, j.calls, tracedJob(sp, p.loadJob(&b, &j, 0, ttl, ld, op)))
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

// loadJob is the body of the flights of j: the process flights first look
// once more at the keys they may find filled by a load that ended since
// the lookup (gen), so a plain cold miss costs one read, not two; the
// rest is loaded with one loader call and filled with one batched write.
func (p *Pipeline[V]) loadJob(b *budget, j *job[V], gen uint64, ttl time.Duration, ld loadFunc[V], op Op) func(context.Context) ([]vouched[V], []error) {
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
			p.read(ctx, b, again)
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
			p.loadFill(ctx, b, j, idx, ttl, ld, op, out, errs)
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
func (p *Pipeline[V]) loadFill(ctx context.Context, b *budget, j *job[V], idx []int, ttl time.Duration, ld loadFunc[V], op Op, out []vouched[V], errs []error) {
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
			p.releaseMany(ctx, unfilled)
		}()
	}
	start := time.Now()
	vals, lerrs := p.callLoad(ctx, b, keys, ld)
	buf := GetEncBuf() // the write-back's bytes: reused once p.fill returned
	defer PutEncBuf(buf)
	items, of := p.fillItems(buf, j, idx, vals, lerrs, ttl, op, start, time.Since(start), &unfilled)
	for n, i := range idx {
		out[i], errs[i] = vouched[V]{v: vals[n], at: start}, lerrs[n]
	}
	sent := time.Now()
	filled, lost := p.fill(ctx, b, items, op)
	spent = true
	for n, it := range items {
		i := of[n]
		switch {
		case !filled && it.lease != nil:
			unfilled = append(unfilled, *it.lease)
		case lost[it.key] && errs[i] == nil && !Faults.JoinAfterInvalidate.Load():
			errs[i] = errVoided
		case filled && !lost[it.key] && it.lease != nil && !b.isKept(it.key) && !Faults.FillIgnoresLease.Load():
			out[i].at = sent
		}
	}
}

// fillItems encodes the write-back of a load of j's keys at idx (of
// gives each item's index in j) into buf; the leases of the keys it will
// not fill go to unfilled.
func (p *Pipeline[V]) fillItems(buf *EncBuf, j *job[V], idx []int, vals []V, errs []error, ttl time.Duration, op Op, start time.Time, cost time.Duration, unfilled *[]store.Lease) ([]fillItem, []int) {
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
			f.data, f.ttl = p.encodeNegative(buf), p.cfg.Jitter(p.cfg.NegativeTTL)
		case errs[n] == nil:
			f.ttl = p.cfg.Jitter(ttl)
			var err error
			if f.data, err = p.EncodeTo(buf, f.key, vals[n], p.refreshFields(start, f.ttl, cost)); err == nil {
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
func (p *Pipeline[V]) fill(ctx context.Context, b *budget, items []fillItem, op Op) (filled bool, lost map[string]bool) {
	if len(items) == 0 {
		return true, nil
	}
	ctx, sp := p.start(ctx, b, observe.Fill, items[0].key, len(items))
	defer end(sp, nil)
	n := len(items)
	items = p.unkept(b, items)
	if kept := n - len(items); kept > 0 {
		p.note(ctx, observe.FillKept, int64(kept))
	}
	if len(items) == 0 {
		return true, nil
	}
	if b.exhausted() {
		if items[0].lease == nil {
			p.st.BudgetSkips.Add(uint64(len(items)))
			p.note(ctx, observe.BudgetSkip, int64(len(items)))
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
	if items[0].lease == nil || Faults.FillIgnoresLease.Load() {
		return p.write(sctx, items, op), nil
	}
	fills := make([]store.Fill, len(items))
	for i, it := range items {
		fills[i] = store.Fill{Lease: *it.lease, Value: it.data, TTL: it.ttl}
	}
	start := time.Now()
	err := p.leaser.Fill(sctx, fills)
	p.st.Since(op, start)
	if err == nil {
		return true, nil
	}
	var be *store.BatchError
	if !errors.As(err, &be) {
		p.st.StoreErrs.Add(uint64(len(fills)))
		p.absorbed(ctx, "", err)
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
		p.absorbed(ctx, ke.Key, ke.Err)
		p.report(op, ke.Key, ke.Err)
	}
	if len(lost) > 0 {
		p.note(ctx, observe.FillRefused, int64(len(lost)))
	}
	return filled, lost
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

// callLoad calls the loader in the caller's goroutine (a flight's),
// counting the call, its time, a failure or a panic (which goes on).
// The loader runs in the kura.load span: a driver's spans nest under it.
func (p *Pipeline[V]) callLoad(ctx context.Context, b *budget, keys []string, ld loadFunc[V]) ([]V, []error) {
	ctx, sp := p.start(ctx, b, observe.Load, keys[0], len(keys))
	var failed error
	defer observe.Finish(sp, &failed)
	defer p.countPanic()
	p.st.Loads.Add(1)
	start := time.Now()
	vals, errs := ld(ctx, keys)
	p.st.Since(OpLoad, start)
	if failed = firstFailure(errs); failed != nil {
		p.st.LoadErrs.Add(1)
	}
	return vals, errs
}

func (p *Pipeline[V]) countPanic() {
	if r := recover(); r != nil {
		p.st.LoadErrs.Add(1)
		p.st.Panics.Add(1)
		panic(r)
	}
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
	sctx, st := b.bound(context.WithoutCancel(ctx), nil, time.Now())
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
