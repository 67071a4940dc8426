package readthrough

import (
	"context"
	"errors"
	"time"

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
				p.tr.tracedLookup(ctx, b, slots, nil, false)
				if fillOp == OpSet && !b.quiet { // Fetch: its outcome is the last lookup's
					p.tr.noteLookup(ctx, &slots[0])
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
			c, led := p.iso.claimHolder(s.key)
			if led {
				hold.add(s.key, c)
				hold.leases = append(hold.leases, s.lease)
			} else { // only under the JoinAfterInvalidate fault: this lease is not needed
				p.countShared(ctx)
				p.leases.release(ctx, s.lease)
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
			p.leases.release(ctx, s.lease)
		}
		c, led := p.group.Claim(s.key, fresh)
		if led {
			if a.failedOpen && !a.countedOpen {
				a.countedOpen = true
				p.st.LeaseFailOpen.Add(1)
			}
			proc.add(s.key, c)
			proc.fill = append(proc.fill, p.coord == processCoord) // a kept entry: see budget.keep
			proc.check = append(proc.check, s.class == miss && !s.failed && p.coord == processCoord)
		} else {
			p.countShared(ctx)
		}
		claims = append(claims, claimed[V]{key: s.key, call: c, led: led, kind: process})
	}
	p.refreshLater(ctx, refresh, a.ttl, a.ld, a.fillOp)
	a.run(ctx, &hold, &proc)
	a.startWait(waits)
	return claims
}

// run starts the loads this caller leads: hold under its leases, proc in
// the process flight.
func (a *acquisition[V]) run(ctx context.Context, hold, proc *job[V]) {
	p := a.p
	pb := a.b
	if len(hold.calls) > 0 && len(proc.calls) > 0 {
		cp := *a.b // the two loads run at once: each its own copy of the budget
		pb = &cp
	}
	if len(hold.calls) > 0 {
		p.holders.Run(ctx, p.cfg.LoadTimeout, hold.calls, p.loads.loadJob(a.b, hold, a.gen, a.ttl, a.ld, a.fillOp))
	}
	if len(proc.calls) > 0 {
		p.group.Run(ctx, p.cfg.LoadTimeout, proc.calls, p.loads.loadJob(pb, proc, a.gen, a.ttl, a.ld, a.fillOp))
	}
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
	if err := a.p.leases.invalidate(ctx, keys, 0); err != nil {
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
		case c.led, c.kind == process && a.p.coord == processCoord:
		case c.kind == joinHolder && (voided || err == nil && !a.p.iso.takes(r, a.start)):
			rewait = append(rewait, c.key)
			continue
		case voided || (err == nil || errors.Is(err, store.ErrNotFound)) && !a.p.iso.takes(r, a.start):
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
	a.p.waits.startWait(a.reg, keys)
}

func (a *acquisition[V]) stopWaiting() {
	if a.reg != nil {
		a.p.waits.cancelWait(a.reg)
	}
}

// await waits for the hub's results, classified; when Config.LeaseWait
// has passed, the keys still waited for load without writing back.
func (a *acquisition[V]) await(ctx context.Context) ([]slot[V], error) {
	wctx, ws := a.p.tr.waitSpan(ctx, a.b, a.waitOn, a.reg.pending)
	got, err := a.p.waits.awaitFills(wctx, a.reg, a.start)
	a.p.tr.endWait(ws, a.start, got, err)
	if err != nil || got != nil {
		return got, err
	}
	a.failedOpen = true
	keys := a.p.waits.cancelWait(a.reg)
	slots := make([]slot[V], len(keys))
	for i, k := range keys {
		slots[i] = slot[V]{key: k, class: noFill}
	}
	return slots, nil
}

// countShared counts a caller that takes another caller's load.
func (p *Pipeline[V]) countShared(ctx context.Context) {
	p.st.Shared.Add(1)
	p.tr.note(ctx, observe.Shared, 0)
}
