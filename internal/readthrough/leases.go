package readthrough

import (
	"context"
	"time"

	"github.com/kuracache/kura/store"
)

// leaseCoord is the lease coordination's hold on the store: its lease
// capability, which no other part of the pipeline reads, and the calls
// the steps make through it. New sets it, from Config.Leaser; under the
// process coordination it holds nothing and no step calls it.
type leaseCoord[V any] struct {
	*Pipeline[V]
	leaser store.Leaser
	// waker is the leaser as a store.LeaseWaker (nil: its server reports
	// no changes, and the hub polls).
	waker store.LeaseWaker
}

// newLeaseCoord is the lease coordination of p over l (nil: none).
func newLeaseCoord[V any](p *Pipeline[V], l store.Leaser) leaseCoord[V] {
	w, _ := l.(store.LeaseWaker)
	return leaseCoord[V]{Pipeline: p, leaser: l, waker: w}
}

// get is the lease read: keys read, and a lease taken on each that holds
// nothing (store.Leaser.LeaseGet).
func (c leaseCoord[V]) get(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, error) {
	return c.leaser.LeaseGet(ctx, keys, opts)
}

// fill writes values on condition that their leases are still held.
func (c leaseCoord[V]) fill(ctx context.Context, fills []store.Fill) error {
	return c.leaser.Fill(ctx, fills)
}

// invalidate voids every lease on keys and removes their values (stale:
// see store.Leaser.Invalidate).
func (c leaseCoord[V]) invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	return c.leaser.Invalidate(ctx, keys, stale)
}

// watches reports whether the store's server reports the changes of the
// keys the hub reads (watchedGet, watch).
func (c leaseCoord[V]) watches() bool { return c.waker != nil }

// watchedGet is get, watched when the server can report the next change
// of each key read (watched reports whether it was).
func (c leaseCoord[V]) watchedGet(ctx context.Context, keys []string, opts store.LeaseOptions) (res []store.LeaseResult, watched bool, err error) {
	if c.waker == nil {
		res, err = c.leaser.LeaseGet(ctx, keys, opts)
		return res, false, err
	}
	return c.waker.WatchedLeaseGet(ctx, keys, opts)
}

// watch registers fn for the server's reports of changed keys (see
// store.LeaseWaker.WatchLeases); only when watches.
func (c leaseCoord[V]) watch(fn func(keys []string)) (cancel func()) {
	return c.waker.WatchLeases(fn)
}

// release gives up lease l, best effort: if it fails, the lease expires.
func (c leaseCoord[V]) release(ctx context.Context, l store.Lease) {
	c.releaseMany(ctx, []store.Lease{l})
}

func (c leaseCoord[V]) releaseMany(ctx context.Context, leases []store.Lease) {
	if len(leases) == 0 {
		return
	}
	b := c.newBudget()
	sctx, st := b.bound(context.WithoutCancel(ctx), nil, time.Now())
	defer b.charge(st)
	if err := c.leaser.Release(sctx, leases); err != nil {
		c.countBatchErr(err, len(leases))
		op := OpDeleteMany
		if len(leases) == 1 {
			op = OpDelete
		}
		c.report(op, "", err)
	}
}
