package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/store"
)

// keptCtx is a cancellable context that notes every use after the call
// it was given to returned. kura's read path hands stores pooled contexts
// (internal/readthrough/clock) that serve another call once this one
// returned: a store that kept one would see that call's values and
// cancellation (the store.Store contract: a context is valid for its call
// only).
type keptCtx struct {
	context.Context
	returned atomic.Bool
	mu       sync.Mutex
	late     []string // the methods called after the call returned
}

func (c *keptCtx) use(m string) {
	if c.returned.Load() {
		c.mu.Lock()
		c.late = append(c.late, m)
		c.mu.Unlock()
	}
}

func (c *keptCtx) Deadline() (time.Time, bool) { c.use("Deadline"); return c.Context.Deadline() }
func (c *keptCtx) Done() <-chan struct{}       { c.use("Done"); return c.Context.Done() }
func (c *keptCtx) Err() error                  { c.use("Err"); return c.Context.Err() }
func (c *keptCtx) Value(key any) any           { c.use("Value"); return c.Context.Value(key) }

// AfterFunc is context.AfterFunc on the context, as kura's pooled
// contexts offer it (the context package and the memcache client use the
// method), so registering one is not a use after return by the context
// package's own goroutine.
func (c *keptCtx) AfterFunc(f func()) func() bool {
	c.use("AfterFunc")
	return context.AfterFunc(c.Context, f)
}

// testContextNotKept: no operation of the seam uses its context after it
// returned, also once that context is cancelled (a goroutine left waiting
// on it would wake then).
func testContextNotKept(h *harness) {
	ops := h.ops()
	if l, ok := store.FindLeaser(h.s); ok {
		k := h.key("lease")
		ph := placeholder()
		ops = append(ops, struct {
			name string
			fn   func(ctx context.Context) error
		}{"LeaseGet+Fill+Release", func(ctx context.Context) error {
			res, err := l.LeaseGet(ctx, []string{k, h.key("lease2")}, store.LeaseOptions{TTL: time.Minute, Placeholder: ph})
			if err != nil {
				return err
			}
			if res[0].Won {
				if err := l.Fill(ctx, []store.Fill{{Lease: res[0].Lease, Value: []byte("v"), TTL: time.Minute}}); err != nil {
					return err
				}
			}
			if res[1].Won {
				return l.Release(ctx, []store.Lease{res[1].Lease})
			}
			return nil
		}})
	}
	for _, op := range ops {
		parent, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ctx := &keptCtx{Context: parent}
		err := h.watchdog(op.name, func() error { return op.fn(ctx) })
		ctx.returned.Store(true)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			h.t.Errorf("%s: %v", op.name, err)
		}
		time.Sleep(10 * time.Millisecond)
		cancel()
		time.Sleep(20 * time.Millisecond)
		ctx.mu.Lock()
		late := ctx.late
		ctx.mu.Unlock()
		if len(late) > 0 {
			h.t.Errorf("%s used its context after it returned (%v): a context is valid for its call only (store.Store); kura's read path reuses it for another call", op.name, late)
		}
	}
}
