package readthrough

import (
	"context"
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
type clock struct {
	cur atomic.Pointer[tick]
}

// tick is one shared deadline.
type tick struct {
	deadline time.Time
	done     chan struct{}
	expired  atomic.Bool
	// bg is the context of reads whose caller's context is
	// context.Background(): shared, so such a read allocates nothing.
	bg tickCtx
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
		nt := &tick{deadline: now.Add(d), done: make(chan struct{})}
		nt.bg = tickCtx{Context: context.Background(), t: nt}
		if c.cur.CompareAndSwap(t, nt) {
			time.AfterFunc(d, nt.expire)
			return nt
		}
	}
}

func (t *tick) expire() {
	t.expired.Store(true)
	close(t.done)
}

// tickCtx is a caller's context (one without a Done channel: it can be
// neither cancelled nor time out) bounded by a tick.
type tickCtx struct {
	context.Context
	t *tick
}

// DeadlineBound tells a store that only the deadline ends the context
// (store.DeadlineBound): it may bound I/O by the deadline alone.
func (c *tickCtx) DeadlineBound() {}

var _ store.DeadlineBound = (*tickCtx)(nil)

// Deadline is the tick's.
func (c *tickCtx) Deadline() (time.Time, bool) { return c.t.deadline, true }

// Done is closed when the tick expires.
func (c *tickCtx) Done() <-chan struct{} { return c.t.done }

// Err is context.DeadlineExceeded once the tick expired.
func (c *tickCtx) Err() error {
	if c.t.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}
