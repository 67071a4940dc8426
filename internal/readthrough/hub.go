package readthrough

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
type waitHub struct {
	mu   sync.Mutex
	keys map[string][]waiter
	// round numbers the hub's reads: a read takes the registrations
	// made while round was at most its own number.
	round   uint64
	running bool
	kick    bool // keys were added: poll soon again
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
func (p *Pipeline[V]) startWait(reg *waitReg, keys []string) {
	h := &p.hub
	h.mu.Lock()
	if h.keys == nil {
		h.keys = make(map[string][]waiter)
	}
	for _, k := range keys {
		h.keys[k] = append(h.keys[k], waiter{reg: reg, round: h.round})
	}
	reg.pending += len(keys)
	h.kick = true
	start := !h.running
	h.running = true
	h.mu.Unlock()
	if start {
		go p.pollLoop()
	}
}

// cancelWait unregisters reg and returns the keys it was still waiting
// for; leases the poller handed it that it never read are released.
func (p *Pipeline[V]) cancelWait(reg *waitReg) []string {
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
	h.mu.Unlock()
	for more := true; more; {
		select {
		case kr := <-reg.ch:
			if kr.err == nil && kr.r.Won {
				p.release(context.Background(), kr.r.Lease)
			}
			rest = append(rest, kr.key)
		default:
			more = false
		}
	}
	reg.pending = 0
	return rest
}

// pollLoop reads every waited-for key in one batch per tick (backing off
// from 1 ms to maxPoll while nothing new is waited for) and hands out what
// it finds: a value or a failure to every waiter of the key, a lease to
// one of them. It ends when nobody waits.
func (p *Pipeline[V]) pollLoop() {
	h := &p.hub
	delay := time.Millisecond
	for {
		time.Sleep(jittered(delay))
		h.mu.Lock()
		if len(h.keys) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		if h.kick {
			delay, h.kick = time.Millisecond, false
		}
		round := h.round
		h.round++
		keys := make([]string, 0, len(h.keys))
		for k := range h.keys {
			keys = append(keys, k)
		}
		h.mu.Unlock()
		res, err := p.pollRead(keys)
		var failed map[string]error
		if err != nil {
			var be *store.BatchError
			if errors.As(err, &be) {
				failed = be.Failed()
			} else {
				failed = make(map[string]error, len(keys))
				for _, k := range keys {
					failed[k] = err
				}
			}
		}
		h.mu.Lock()
		for i, k := range keys {
			regs := h.keys[k]
			if len(regs) == 0 {
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
			case r.Held, r.Value != nil && IsPlaceholder(r.Value), r.Stale && p.cfg.StaleWhileRevalidate == 0:
				// still being loaded elsewhere
			default:
				late := regs[:0]
				for _, w := range regs {
					if w.round > round && !Faults.JoinAfterInvalidate.Load() {
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
		h.mu.Unlock()
		delay = min(2*delay, maxPoll)
	}
}

// pollRead is the hub's batched lease read, bounded by Config.StoreTimeout
// (the hub's own time: no caller's budget is charged).
func (p *Pipeline[V]) pollRead(keys []string) ([]store.LeaseResult, error) {
	ctx := context.Background()
	if p.cfg.StoreTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.StoreTimeout)
		defer cancel()
	}
	start := time.Now()
	res, err := p.leaser.LeaseGet(ctx, keys, store.LeaseOptions{TTL: p.cfg.LeaseTTL, Placeholder: LeaseEntry()})
	p.st.Since(OpGetMany, start)
	if err == nil && len(res) != len(keys) {
		err = fmt.Errorf("kura: store returned %d lease results for %d keys", len(res), len(keys))
	}
	return res, err
}

// awaitFills waits until the hub hands back results for some of reg's
// keys, within Config.LeaseWait of start, and classifies them. nil slots
// and a nil error: the wait is over (fail open).
func (p *Pipeline[V]) awaitFills(ctx context.Context, reg *waitReg, start time.Time) ([]slot[V], error) {
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
			slots[i].class, slots[i].failed = noFill, true
			continue
		}
		p.classifyLease(ctx, &b, &slots[i], kr.r, false)
	}
	return slots, nil
}
