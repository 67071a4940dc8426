package readthrough

import (
	"context"
	"time"

	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

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
	rctx, sp := p.tr.startCall(ctx, observe.Refresh, j.keys[0], len(j.keys))
	b.quiet = sp == nil
	p.holders.Run(rctx, p.cfg.LoadTimeout, j.calls, tracedJob(sp, p.loads.loadJob(&b, &j, 0, ttl, ld, op)))
}
