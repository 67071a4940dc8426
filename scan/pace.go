package scan

import (
	"context"
	"sync/atomic"
	"time"
)

// pacer spaces the commands sent to one server so that, over any span of
// time t from the first command, at most rate*t + one batch are sent.
// A rate <= 0 means no limit. It is used by one goroutine.
type pacer struct {
	rate  float64
	next  time.Time
	count atomic.Int64
}

func newPacer(rate int) *pacer { return &pacer{rate: float64(rate)} }

// wait blocks until n more commands may be sent, and counts them.
func (p *pacer) wait(ctx context.Context, n int) error {
	p.count.Add(int64(n))
	if p.rate <= 0 {
		return ctx.Err()
	}
	now := time.Now()
	if p.next.IsZero() || p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return ctx.Err()
}
