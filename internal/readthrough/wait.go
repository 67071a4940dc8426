package readthrough

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// keyResult is a lease read of one key, or its failure.
type keyResult struct {
	key string
	r   store.LeaseResult
	err error
}

// waitHub is the Cache's poller for FetchMany: the keys that callers of
// this process wait for (another caller, anywhere, holds their lease) are
// read together, one batched lease read per tick, however many callers
// wait, so waiting costs the store one batch per tick and process instead
// of one per caller. A value goes only to the callers that registered
// before the read that found it was sent (see vouched): one that
// registered while a read was in flight may have asked after an
// Invalidate that read did not see, and waits for the next read.
//
// On a store whose server reports changes (store.LeaseWaker: Redis), the
// hub's reads are watched: the server reports the next change of every
// key read, and the hub reads a key again when its report comes (the
// holder's fill) or when a caller registers it, not on a timer. It still
// reads every key now and then (maxWatchedPoll), in case a report never
// comes, and polls as on memcached while a read could not be watched.
type waitHub struct {
	mu   sync.Mutex
	keys map[string][]waiter
	// round numbers the hub's reads: a read takes the registrations
	// made while round was at most its own number.
	round   uint64
	running bool
	kick    bool // keys were added: poll soon again

	// With a LeaseWaker: due holds the keys to read on the next wake
	// (registered, or reported changed since the last read), all asks
	// for every key (reports may have been lost), wake wakes the loop.
	due     map[string]struct{}
	all     bool
	wake    chan struct{}
	watched bool // the last read was watched
}

// maxWatchedPoll caps the back-off of the hub's reads of every key while
// its reads are watched: a report the server never sends (a push lost on
// a connection that stayed up) costs a waiter at most about this much.
const maxWatchedPoll = 5 * maxPoll

// reported is the LeaseWaker's report: keys changed (nil: any may have).
// It marks the waited-for ones due and wakes the loop.
func (h *waitHub) reported(keys []string) {
	h.mu.Lock()
	n := 0
	if keys == nil {
		h.all, n = true, 1
	}
	for _, k := range keys {
		if _, ok := h.keys[k]; ok {
			h.due[k] = struct{}{}
			n++
		}
	}
	h.mu.Unlock()
	if n > 0 {
		h.signal()
	}
}

// signal wakes the loop without blocking.
func (h *waitHub) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// batch returns the keys the next read takes (under mu) and whether
// that is every key: while polling, or when the slow timer ran out, or
// reports may have been lost; else, while watched, the due ones.
func (h *waitHub) batch(timeout bool) (keys []string, every bool) {
	every = h.due == nil || timeout || h.all || !h.watched
	keys = make([]string, 0, len(h.keys))
	for k := range h.keys {
		if _, due := h.due[k]; every || due {
			keys = append(keys, k)
		}
	}
	clear(h.due)
	h.all = false
	return keys, every
}

// waiter is one registration of a key.
type waiter struct {
	reg   *waitReg
	round uint64 // the hub's round when it registered
}

// waitReg is one FetchMany's registration with the hub.
type waitReg struct {
	ch      chan keyResult // results for its keys; buffered for all of them
	pending int            // keys registered and not yet received (owner only)
}

func newWaitReg(n int) *waitReg { return &waitReg{ch: make(chan keyResult, n)} }

// startWait registers keys for reg and starts the poller if it is idle.
func (p waitStep[V]) startWait(reg *waitReg, keys []string) {
	h := &p.hub
	h.mu.Lock()
	if h.keys == nil {
		h.keys = make(map[string][]waiter)
	}
	if p.leases.watches() && h.due == nil {
		h.due, h.wake = make(map[string]struct{}), make(chan struct{}, 1)
	}
	for _, k := range keys {
		h.keys[k] = append(h.keys[k], waiter{reg: reg, round: h.round})
		if h.due != nil {
			h.due[k] = struct{}{}
		}
	}
	reg.pending += len(keys)
	h.kick = true
	start := !h.running
	h.running = true
	h.mu.Unlock()
	if start {
		go p.waits.pollLoop()
	} else if h.wake != nil {
		h.signal()
	}
}

// cancelWait unregisters reg and returns the keys it was still waiting
// for; leases the poller handed it that it never read are released.
func (p waitStep[V]) cancelWait(reg *waitReg) []string {
	h := &p.hub
	var rest []string
	h.mu.Lock()
	for k, regs := range h.keys {
		for i, r := range regs {
			if r.reg == reg {
				rest = append(rest, k)
				regs = append(regs[:i:i], regs[i+1:]...)
				break
			}
		}
		if len(regs) == 0 {
			delete(h.keys, k)
		} else {
			h.keys[k] = regs
		}
	}
	idle := len(h.keys) == 0 && h.wake != nil
	h.mu.Unlock()
	if idle {
		h.signal() // a watched loop may sleep long: let it end now
	}
	for more := true; more; {
		select {
		case kr := <-reg.ch:
			if kr.err == nil && kr.r.Won {
				p.leases.release(context.Background(), kr.r.Lease)
			}
			rest = append(rest, kr.key)
		default:
			more = false
		}
	}
	reg.pending = 0
	return rest
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

// pollLoop reads every waited-for key in one batch per tick (backing off
// from 1 ms to maxPoll while nothing new is waited for) and hands out what
// it finds: a value or a failure to every waiter of the key, a lease to
// one of them. It ends when nobody waits.
//
// With a LeaseWaker the loop reads at once when woken (a caller registered
// a key, or the server reported a change of one) and otherwise backs off
// from maxPoll to maxWatchedPoll while its reads are watched.
func (p waitStep[V]) pollLoop() {
	h := &p.hub
	watches := p.leases.watches()
	if watches {
		defer p.leases.watch(h.reported)()
	}
	delay := time.Millisecond
	// pollAt is when the next read of every key is due. Wakes between
	// do not move it: reports of some keys must not starve the others.
	pollAt := time.Now().Add(jittered(delay))
	timer := time.NewTimer(time.Hour) // armed by sleep
	timer.Stop()
	defer timer.Stop()
	for {
		timeout := true
		if !watches {
			time.Sleep(jittered(delay))
		} else {
			timeout = h.sleep(pollAt, timer)
		}
		h.mu.Lock()
		if len(h.keys) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		if h.kick {
			// New keys: polling starts over at 1 ms. Watched, they are
			// read at once (due) and the slow timer keeps its pace.
			if !h.watched {
				delay = time.Millisecond
			}
			h.kick = false
		}
		keys, every := h.batch(timeout)
		if len(keys) == 0 {
			h.mu.Unlock()
			continue
		}
		round := h.round
		h.round++
		h.mu.Unlock()
		res, watched, err := p.waits.pollRead(keys)
		orphans := p.waits.handOut(keys, res, failedKeys(keys, err), round, watched)
		p.leases.releaseMany(context.Background(), orphans)
		if every {
			if watched {
				delay = min(max(2*delay, maxPoll), maxWatchedPoll)
			} else {
				delay = min(2*delay, maxPoll)
			}
			pollAt = time.Now().Add(jittered(delay))
		}
	}
}

// sleep waits until pollAt or a wake of the loop, and reports whether the
// wait ran to pollAt (the slow timer: read every key). timer is the
// loop's own, stopped between sleeps.
func (h *waitHub) sleep(pollAt time.Time, timer *time.Timer) (timeout bool) {
	wait := time.Until(pollAt)
	if wait <= 0 {
		return true
	}
	timer.Reset(wait)
	defer timer.Stop()
	select {
	case <-h.wake:
		return !time.Now().Before(pollAt)
	case <-timer.C:
		return true
	}
}

// failedKeys maps each key of a lease read that failed to its error: the
// keys a *store.BatchError names, or every key for an error of the whole
// read. nil when the read did not fail.
func failedKeys(keys []string, err error) map[string]error {
	if err == nil {
		return nil
	}
	var be *store.BatchError
	if errors.As(err, &be) {
		return be.Failed()
	}
	failed := make(map[string]error, len(keys))
	for _, k := range keys {
		failed[k] = err
	}
	return failed
}

// handOut gives the hub's read of keys (sent in round) to their waiters:
// a failure or a value to every waiter of the key, a won lease to one of
// them; a key still being loaded elsewhere stays registered, and so do
// the waiters that registered after the read was sent (see waitHub). It
// returns the leases the read won for keys nobody waits for any more, for
// the caller to release.
func (p waitStep[V]) handOut(keys []string, res []store.LeaseResult, failed map[string]error, round uint64, watched bool) (orphans []store.Lease) {
	h := &p.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, k := range keys {
		regs := h.keys[k]
		if len(regs) == 0 {
			if _, bad := failed[k]; !bad && res[i].Won {
				orphans = append(orphans, res[i].Lease) // its waiters left
			}
			continue
		}
		if ferr, bad := failed[k]; bad {
			for _, w := range regs {
				w.reg.ch <- keyResult{key: k, err: ferr}
			}
			delete(h.keys, k)
			continue
		}
		r := res[i]
		switch {
		case r.Won: // a lease: whoever gets it loads, so anyone may
			regs[0].reg.ch <- keyResult{key: k, r: r}
			regs = regs[1:]
		case r.Held, r.Value != nil && codec.IsPlaceholder(r.Value), r.Stale && p.cfg.StaleWhileRevalidate == 0:
			// still being loaded elsewhere
		default:
			late := regs[:0]
			for _, w := range regs {
				if p.iso.late(w.round, round) {
					late = append(late, w) // registered after this read was sent
					continue
				}
				w.reg.ch <- keyResult{key: k, r: r}
			}
			regs = late
		}
		if len(regs) == 0 {
			delete(h.keys, k)
		} else {
			h.keys[k] = regs
		}
	}
	h.watched = watched
	return orphans
}

// pollRead is the hub's batched lease read, bounded by Config.StoreTimeout
// (the hub's own time: no caller's budget is charged); watched when the
// store's server reports changes.
func (p waitStep[V]) pollRead(keys []string) (res []store.LeaseResult, watched bool, err error) {
	ctx := context.Background()
	if p.cfg.StoreTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.StoreTimeout)
		defer cancel()
	}
	start := time.Now()
	opts := store.LeaseOptions{TTL: p.cfg.LeaseTTL, Placeholder: codec.NewLeaseEntry()}
	res, watched, err = p.leases.watchedGet(ctx, keys, opts)
	p.st.Since(OpGetMany, start)
	if err == nil && len(res) != len(keys) {
		err = fmt.Errorf("kura: store returned %d lease results for %d keys", len(res), len(keys))
	}
	return res, watched, err
}

// awaitFills waits until the hub hands back results for some of reg's
// keys, within Config.LeaseWait of start, and classifies them. nil slots
// and a nil error: the wait is over (fail open).
func (p waitStep[V]) awaitFills(ctx context.Context, reg *waitReg, start time.Time) ([]slot[V], error) {
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
			p.tr.absorbed(ctx, kr.key, kr.err)
			slots[i].class, slots[i].failed = noFill, true
			continue
		}
		p.cl.classifyLease(ctx, &b, &slots[i], kr.r, false, nil)
	}
	return slots, nil
}

// waitStep is the wait for the keys another caller holds the lease of: methods over the pipeline's state.
type waitStep[V any] struct{ *Pipeline[V] }
