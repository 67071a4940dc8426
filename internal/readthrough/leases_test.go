package readthrough

import (
	"context"
	"testing"

	"github.com/kuracache/kura/store"
)

// wakingLeaser is a warmLeaser whose server reports changes.
type wakingLeaser struct {
	warmLeaser
	watched int
}

func (w *wakingLeaser) WatchedLeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, bool, error) {
	w.watched++
	res, err := w.LeaseGet(ctx, keys, opts)
	return res, true, err
}

func (w *wakingLeaser) WatchLeases(func([]string)) func() { return func() {} }

// TestLeaseCoordHoldsTheCapability: the lease coordination finds the
// store's LeaseWaker once, in New, and the poller's read goes through it
// only when there is one.
func TestLeaseCoordHoldsTheCapability(t *testing.T) {
	ctx := context.Background()
	plain := newLeaseCoord[[]byte](nil, &warmLeaser{})
	if plain.watches() {
		t.Error("a leaser without LeaseWaker: the hub must poll")
	}
	if _, watched, err := plain.watchedGet(ctx, []string{"k"}, store.LeaseOptions{}); watched || err != nil {
		t.Errorf("watchedGet without LeaseWaker: watched %v, err %v", watched, err)
	}
	w := &wakingLeaser{}
	waking := newLeaseCoord[[]byte](nil, w)
	if !waking.watches() {
		t.Error("a LeaseWaker: the hub's reads are watched")
	}
	if _, watched, err := waking.watchedGet(ctx, []string{"k"}, store.LeaseOptions{}); !watched || err != nil || w.watched != 1 {
		t.Errorf("watchedGet with LeaseWaker: watched %v, err %v, calls %d", watched, err, w.watched)
	}
	if none := newLeaseCoord[[]byte](nil, nil); none.watches() {
		t.Error("the process coordination holds no lease capability")
	}
}
