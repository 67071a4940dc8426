package readthrough

import (
	"context"
	"time"

	"github.com/kuracache/kura/store"
)

// release gives up lease l, best effort: if it fails, the lease expires.
func (p leaseStep[V]) release(ctx context.Context, l store.Lease) {
	p.leases.releaseMany(ctx, []store.Lease{l})
}

func (p leaseStep[V]) releaseMany(ctx context.Context, leases []store.Lease) {
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

// leaseStep is the releases of leases this process holds: methods over the pipeline's state.
type leaseStep[V any] struct{ *Pipeline[V] }
