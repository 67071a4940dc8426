// Package clock hands out the deadlines of the first store call of a
// read without a timer, a context or a goroutine per call: the read
// path's StoreTimeout budget (internal/readthrough, budget.bound) binds
// that call to a shared tick of a Clock, and releases it when the call
// returns. It knows nothing of stores or values.
package clock

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/store"
)

// clock hands out the deadlines of the first store call of reads (the
// lookup, which is all a hit does) without a timer or a context per call:
// reads that start within StoreTimeout/8 of each other share one tick, a
// deadline with one channel closed by one timer. A read's first store call
// gets between 7/8 of its budget and all of it, never more; a Cache makes
// at most eight ticks per StoreTimeout, whatever its request rate.
//
// A caller's context that can end early (it has a Done channel: a
// net/http request's, anything from context.WithCancel, WithTimeout or
// WithDeadline) needs a Done channel of its own for the call, closed when
// either the tick or the caller's context ends. Go's context package has no
// way to hear of a context's end without an allocation (context.AfterFunc)
// or a goroutine, so the clock watches such calls itself: each gets a
// pooled callCtx, whose channel is reused as long as it was never closed,
// on one of the clock's watch lanes; while any call is on them, one timer
// polls the callers' contexts every cancelPoll, and a tick that expires ends
// its calls at once. Nothing runs while no such call is in flight.
type clock struct {
	cur atomic.Pointer[tick]

	watch [lanes]watchLane
	// polling is set while the poll timer is armed (or firing).
	polling atomic.Bool
	pollMu  sync.Mutex // guards poll's creation and resets
	poll    *time.Timer
}

// cancelPoll is how often the clock looks at the contexts of the callers
// of calls in flight: a caller's cancellation ends its store call within
// about this much (plus scheduling delay), on a store that watches Done.
// Each poll is a timer firing while calls are in flight: at 1 ms, it cost
// a one-caller hit with a cancellable context about 1 % more than at 5 ms
// (BenchmarkFetchHitBudgetInterleaved); a budget's end does not wait for
// it (a tick's expiry ends its calls at once).
const cancelPoll = 5 * time.Millisecond

// lanes is how many Done channels a tick spreads its reads over: a store
// that selects on Done (rueidis does) locks the channel, and 64 callers on
// one channel queue on its lock. The clock's watch list has as many lanes,
// each with its own lock.
const lanes = 32

// watchLane is a list of calls in flight whose caller's context can end.
type watchLane struct {
	mu   sync.Mutex
	head *callCtx
	// n counts the calls on the lane (changed under mu): the poll skips
	// an empty lane without taking its lock, so a poll costs one lock
	// per busy lane, not one per lane.
	n atomic.Int32
	_ [44]byte // a cache line of its own (64 bytes)
}

// tick is one shared deadline.
type tick struct {
	clk      *clock
	deadline time.Time
	done     [lanes]chan struct{}
	expired  atomic.Bool
	// bg are the contexts of reads whose caller's context is
	// context.Background(): shared, so such a read allocates nothing.
	bg [lanes]tickCtx
}

// at returns a tick whose deadline lies in (now+d-d/8, now+d].
func (c *clock) at(now time.Time, d time.Duration) *tick {
	for {
		t := c.cur.Load()
		if t != nil {
			if left := t.deadline.Sub(now); left <= d && left > d-d/8 {
				return t
			}
		}
		nt := &tick{clk: c, deadline: now.Add(d)}
		for i := range nt.done {
			nt.done[i] = make(chan struct{})
			nt.bg[i] = tickCtx{Context: context.Background(), t: nt, lane: uint8(i)}
		}
		if c.cur.CompareAndSwap(t, nt) {
			time.AfterFunc(d, nt.expire)
			return nt
		}
	}
}

// expire closes the tick's channels and ends the watched calls it bounds.
func (t *tick) expire() {
	t.expired.Store(true)
	for _, ch := range t.done {
		close(ch)
	}
	t.clk.sweep()
}

// lane picks one of the tick's Done channels (a per-P random number: no
// shared counter).
func lane() uint8 { return uint8(rand.Uint32() % lanes) }

// Clock is the deadline clock of one read path. Its zero value is ready
// to use; it must not be copied after first use.
type Clock struct{ c clock }

// Call is what Release needs of a call that Bind bounded.
type Call struct {
	tc *tickCtx // pooled: back to the pool in Release
	cc *callCtx // watched by the clock until Release
}

// Bind returns ctx bounded by a tick of d from now, for the first store
// call of a read; pass the Call to Release once that call returned, and
// do not use the context after that (it may serve another call). It
// allocates nothing in the steady state (see bind).
func (c *Clock) Bind(ctx context.Context, now time.Time, d time.Duration) (context.Context, Call) {
	ctx, tc, cc := c.c.bind(ctx, now, d)
	return ctx, Call{tc, cc}
}

// Release ends what Bind handed out for call (see release).
func (c *Clock) Release(call Call) { c.c.release(call.tc, call.cc) }

// bind returns ctx bounded by a tick of d from now, for the first store
// call of a read (ctx's own deadline is later than the tick's), and what
// release needs when the call returns. It allocates nothing in the steady
// state: Background gets one of the tick's shared contexts, other contexts
// a pooled tickCtx or callCtx.
func (c *clock) bind(ctx context.Context, now time.Time, d time.Duration) (context.Context, *tickCtx, *callCtx) {
	t := c.at(now, d)
	if ctx.Done() == nil {
		if ctx == context.Background() {
			return &t.bg[lane()], nil, nil
		}
		tc := tickCtxs.Get().(*tickCtx)
		tc.Context, tc.t, tc.lane = ctx, t, lane()
		return tc, tc, nil
	}
	cc := callCtxs.Get().(*callCtx)
	cc.parent, cc.t, cc.lane = ctx, t, lane()
	c.add(cc)
	return cc, nil, cc
}

// release ends what bind handed out once its call has returned: the
// contexts go back to their pools, except a callCtx whose channel was
// closed (whoever still holds it sees it ended, never another call's).
func (c *clock) release(tc *tickCtx, cc *callCtx) {
	if tc != nil {
		tc.Context, tc.t = context.Background(), &idle // as callCtx.recycle
		tickCtxs.Put(tc)
	}
	if cc != nil {
		c.remove(cc)
		if cc.recycle() {
			callCtxs.Put(cc)
		}
	}
}

var (
	tickCtxs = sync.Pool{New: func() any { return new(tickCtx) }}
	callCtxs = sync.Pool{New: func() any { return newCallCtx() }}
)

// add puts cc on its watch lane, and arms the poll timer if it is not.
func (c *clock) add(cc *callCtx) {
	l := &c.watch[cc.lane]
	l.mu.Lock()
	cc.prev, cc.next = nil, l.head
	if l.head != nil {
		l.head.prev = cc
	}
	l.head = cc
	l.n.Add(1)
	l.mu.Unlock()
	// After the push: a poll that found the lanes empty clears polling
	// before it looks again (see poll), so one of the two arms the timer.
	if !c.polling.Load() && c.polling.CompareAndSwap(false, true) {
		c.arm()
	}
}

// remove takes cc off its watch lane: no sweep ends it after this.
func (c *clock) remove(cc *callCtx) {
	l := &c.watch[cc.lane]
	l.mu.Lock()
	if cc.prev != nil {
		cc.prev.next = cc.next
	} else {
		l.head = cc.next
	}
	if cc.next != nil {
		cc.next.prev = cc.prev
	}
	cc.prev, cc.next = nil, nil
	l.n.Add(-1)
	l.mu.Unlock()
}

// arm starts the poll timer; only the caller that set polling does.
func (c *clock) arm() {
	c.pollMu.Lock()
	if c.poll == nil {
		c.poll = time.AfterFunc(cancelPoll, c.pollNow)
	} else {
		c.poll.Reset(cancelPoll)
	}
	c.pollMu.Unlock()
}

// pollNow is the poll timer's function: it ends the watched calls whose
// caller's context ended, and comes back in cancelPoll while any call is
// watched; otherwise it stops until the next add arms it.
func (c *clock) pollNow() {
	if c.sweep() {
		c.arm()
		return
	}
	c.polling.Store(false)
	if c.watching() && c.polling.CompareAndSwap(false, true) {
		c.arm() // a call added between the sweep and the Store
	}
}

// sweep ends the watched calls whose caller's context or tick ended, and
// reports whether any call is watched.
func (c *clock) sweep() (any bool) {
	for i := range c.watch {
		l := &c.watch[i]
		if l.n.Load() == 0 {
			continue
		}
		l.mu.Lock()
		for cc := l.head; cc != nil; cc = cc.next {
			any = true
			cc.check()
		}
		l.mu.Unlock()
	}
	return any
}

// watching reports whether any call is on a watch lane.
func (c *clock) watching() bool {
	for i := range c.watch {
		if c.watch[i].n.Load() != 0 {
			return true
		}
	}
	return false
}

// tickCtx is a caller's context (one without a Done channel: it can be
// neither cancelled nor time out) bounded by a tick.
type tickCtx struct {
	context.Context
	t    *tick
	lane uint8
}

// DeadlineBound tells a store that only the deadline ends the context
// (store.DeadlineBound): it may bound I/O by the deadline alone.
func (c *tickCtx) DeadlineBound() {}

var _ store.DeadlineBound = (*tickCtx)(nil)

// Deadline is the tick's.
func (c *tickCtx) Deadline() (time.Time, bool) { return c.t.deadline, true }

// Done is closed when the tick expires.
func (c *tickCtx) Done() <-chan struct{} { return c.t.done[c.lane] }

// Err is context.DeadlineExceeded once the tick expired.
func (c *tickCtx) Err() error {
	if c.t.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// idle is the tick of a callCtx between calls: it never expires.
var idle = tick{deadline: time.Unix(1<<62, 0)}

// How a callCtx ended.
const (
	live uint32 = iota
	expired
	canceled // the caller's context ended
)

// callCtx is a caller's context that can end early bounded by a tick: one
// store call's context, on a watch lane of the clock while the call runs.
// Its Done channel is its own, closed when the tick expires or the
// caller's context ends (by the clock's sweep, or by Err noticing first).
// It is valid for its call only: a store must not keep it after the call
// returns (a callCtx that ended is never reused, so one kept after a
// cancellation still reads as ended).
type callCtx struct {
	parent context.Context
	t      *tick
	lane   uint8
	state  atomic.Uint32
	done   chan struct{}

	// next and prev link the calls of a watch lane, under its lock.
	next, prev *callCtx

	mu     sync.Mutex // guards afters
	afters []func()   // AfterFunc's functions; nil once stopped or run
	stop0  func() bool
}

func newCallCtx() *callCtx {
	cc := &callCtx{done: make(chan struct{})}
	cc.stop0 = func() bool { return cc.stopAfter(0) }
	return cc
}

// Deadline is the tick's: a caller's deadline before it is bounded by the
// caller's context alone (see budget.bound).
func (c *callCtx) Deadline() (time.Time, bool) { return c.t.deadline, true }

// Done is closed when the tick expires or the caller's context ends.
func (c *callCtx) Done() <-chan struct{} { return c.done }

// Err is the caller's context's error once that ended,
// context.DeadlineExceeded once the tick expired. An end it notices
// before the clock's sweep it makes the sweep's (Done closes first).
func (c *callCtx) Err() error {
	switch c.state.Load() {
	case live:
		if !c.check() {
			return nil
		}
		return c.Err()
	case expired:
		return context.DeadlineExceeded
	default:
		return c.parent.Err()
	}
}

// Value is the caller's context's.
func (c *callCtx) Value(key any) any { return c.parent.Value(key) }

// check ends c if its caller's context or its tick ended, and reports
// whether c has ended.
func (c *callCtx) check() bool {
	switch {
	case c.state.Load() != live:
		return true
	case c.parent.Err() != nil:
		c.end(canceled)
		return true
	case c.t.expired.Load():
		c.end(expired)
		return true
	}
	return false
}

// end closes Done (once) and starts the functions AfterFunc registered.
func (c *callCtx) end(how uint32) {
	if !c.state.CompareAndSwap(live, how) {
		return
	}
	close(c.done)
	c.mu.Lock()
	fs := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, f := range fs {
		if f != nil {
			go f()
		}
	}
}

// AfterFunc runs f in its own goroutine once c ends, as context.AfterFunc
// does; the context package uses it to hear of c's end without a
// goroutine of its own (a store that watches ctx with context.AfterFunc,
// such as the memcache client, or a context derived from c).
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.state.Load() != live {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	i := len(c.afters)
	c.afters = append(c.afters, f)
	c.mu.Unlock()
	if i == 0 {
		return c.stop0
	}
	return func() bool { return c.stopAfter(i) }
}

// stopAfter unregisters the i-th AfterFunc function, reporting whether
// that stopped it from running.
func (c *callCtx) stopAfter(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.afters) || c.afters[i] == nil {
		return false
	}
	c.afters[i] = nil
	return true
}

// recycle readies c for another call, or reports that it cannot be
// reused: it ended (its channel is closed and may be held by whoever saw
// it end).
func (c *callCtx) recycle() bool {
	if c.state.Load() != live {
		return false
	}
	// Nothing should use c between calls; should a store keep it anyway,
	// it reads as a context that never ends, holding no caller's values,
	// rather than another call's (or a nil pointer).
	c.parent, c.t = context.Background(), &idle
	c.mu.Lock()
	clear(c.afters)
	c.afters = c.afters[:0]
	c.mu.Unlock()
	return true
}
