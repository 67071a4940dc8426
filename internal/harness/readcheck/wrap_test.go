package readcheck_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/history"
	"github.com/kuracache/kura/store"
)

// passKey marks a context that went through the top layer of a stack.
type passKey struct{}

// calls counts the store calls a layer saw, per method, and the calls
// that went around a wrapper.
type calls struct {
	mu       sync.Mutex
	n        map[string]int64
	bypassed map[string]int64
	sample   []string
}

func newCalls() *calls { return &calls{n: map[string]int64{}, bypassed: map[string]int64{}} }

func (c *calls) add(method string) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
}

func (c *calls) bypass(method, why string) {
	c.mu.Lock()
	c.bypassed[method]++
	if len(c.sample) < 5 {
		c.sample = append(c.sample, method+": "+why)
	}
	c.mu.Unlock()
}

// layer is a counting store wrapper. Stacks are built as
//
//	top -> [health.Store] -> bottom -> [fault] -> the real store
//
// top marks the context of every call; bottom counts every call and
// checks that it went through top (the mark) and, when the stack has the
// health wrapper, through health (its frames are on the stack): a call
// that reached bottom without them went around a wrapper. Both implement
// every capability the Cache looks for, finding it on what they wrap the
// way a transparent wrapper does, so that neither is ever gone around
// itself; with the health wrapper in between, a call that goes around
// health shows at bottom.
type layer struct {
	inner  store.Store
	top    bool
	mark   string // the mark top sets and bottom wants
	health bool   // bottom: the stack has health above
	calls  *calls

	// top only: the L1's store reads and reports, for the history.
	rec    *history.Recorder
	proc   int
	decode *codec.Codec
	// plainL1: the L1 reads the store with Get, GetMany and LeaseGet (no
	// server reports), so the values they find are recorded as the L1's.
	plainL1 bool
}

var (
	_ store.Store        = (*layer)(nil)
	_ store.Batcher      = (*layer)(nil)
	_ store.Wrapper      = (*layer)(nil)
	_ store.Leaser       = (*layer)(nil)
	_ store.LeaseCapable = (*layer)(nil)
	_ store.LeaseWaker   = (*layer)(nil)
	_ store.Tracker      = (*layer)(nil)
	_ store.NodeLocator  = (*layer)(nil)
	_ store.NodeProber   = (*layer)(nil)
)

const healthPkg = "github.com/kuracache/kura/store/health."

// enter is the start of every method: top marks ctx, bottom counts and
// checks.
func (l *layer) enter(ctx context.Context, method string) context.Context {
	if l.top {
		return context.WithValue(ctx, passKey{}, l.mark)
	}
	l.calls.add(method)
	if ctx.Value(passKey{}) != l.mark {
		l.calls.bypass(method, "did not pass through the outer counting wrapper")
	}
	if l.health && !onStack(healthPkg) {
		l.calls.bypass(method, "did not pass through the health wrapper (store/health)")
	}
	return ctx
}

// onStack reports whether a function of pkg (a prefix ending in ".") is
// on the calling goroutine's stack.
func onStack(pkg string) bool {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, pkg) {
			return true
		}
		if !more {
			return false
		}
	}
}

func (l *layer) Unwrap() store.Store { return l.inner }

// NodeOf, Nodes and ProbeNode let the health wrapper above see the nodes
// (store.Find does not look through a wrapper for an interface).
func (l *layer) NodeOf(key string) string {
	if n, ok := store.Find[store.NodeLocator](l.inner); ok {
		return n.NodeOf(key)
	}
	return ""
}

func (l *layer) Nodes() []string {
	if p, ok := store.Find[store.NodeProber](l.inner); ok {
		return p.Nodes()
	}
	return nil
}

func (l *layer) ProbeNode(ctx context.Context, addr string) error {
	if p, ok := store.Find[store.NodeProber](l.inner); ok {
		return p.ProbeNode(ctx, addr)
	}
	return errors.New("readcheck: the wrapped store has no nodes")
}

func (l *layer) Get(ctx context.Context, key string) ([]byte, error) {
	start := history.Now()
	v, err := l.inner.Get(l.enter(ctx, "Get"), key)
	if l.plainL1 {
		l.tracked([]string{key}, [][]byte{v}, err, start)
	}
	return v, err
}

func (l *layer) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	return l.inner.Set(l.enter(ctx, "Set"), key, v, ttl)
}

func (l *layer) Delete(ctx context.Context, key string) error {
	return l.inner.Delete(l.enter(ctx, "Delete"), key)
}

func (l *layer) Close() error { return nil }

func (l *layer) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	start := history.Now()
	vs, err := store.GetMany(l.enter(ctx, "GetMany"), l.inner, keys)
	if l.plainL1 {
		l.tracked(keys, vs, err, start)
	}
	return vs, err
}

func (l *layer) SetMany(ctx context.Context, items []store.Item) error {
	return store.SetMany(l.enter(ctx, "SetMany"), l.inner, items)
}

func (l *layer) DeleteMany(ctx context.Context, keys []string) error {
	return store.DeleteMany(l.enter(ctx, "DeleteMany"), l.inner, keys)
}

func (l *layer) leaser() store.Leaser {
	le, _ := store.FindLeaser(l.inner)
	return le
}

func (l *layer) CanLease() bool { return l.leaser() != nil }

func (l *layer) LeaseGet(ctx context.Context, keys []string, o store.LeaseOptions) ([]store.LeaseResult, error) {
	start := history.Now()
	rs, err := l.leaser().LeaseGet(l.enter(ctx, "LeaseGet"), keys, o)
	l.leaseRead(keys, rs, err, start)
	return rs, err
}

// leaseRead records the values a lease read found when they may fill an
// L1 bounded by MaxStaleness.
func (l *layer) leaseRead(keys []string, rs []store.LeaseResult, err error, start int64) {
	if l.plainL1 && len(rs) == len(keys) {
		var ks []string
		var vs [][]byte
		for i, r := range rs {
			if r.Value != nil {
				ks, vs = append(ks, keys[i]), append(vs, r.Value)
			}
		}
		l.tracked(ks, vs, err, start)
	}
}

// WatchedLeaseGet and WatchLeases pass the lease path's server reports
// (store.LeaseWaker) through the layer, so the histories cover waiters
// woken by the server.
func (l *layer) WatchedLeaseGet(ctx context.Context, keys []string, o store.LeaseOptions) ([]store.LeaseResult, bool, error) {
	w, ok := l.leaser().(store.LeaseWaker)
	if !ok {
		rs, err := l.LeaseGet(ctx, keys, o)
		return rs, false, err
	}
	start := history.Now()
	rs, watched, err := w.WatchedLeaseGet(l.enter(ctx, "WatchedLeaseGet"), keys, o)
	l.leaseRead(keys, rs, err, start)
	return rs, watched, err
}

func (l *layer) WatchLeases(fn func(keys []string)) func() {
	if w, ok := l.leaser().(store.LeaseWaker); ok {
		return w.WatchLeases(fn)
	}
	return func() {}
}

func (l *layer) Fill(ctx context.Context, fills []store.Fill) error {
	return l.leaser().Fill(l.enter(ctx, "Fill"), fills)
}

func (l *layer) Release(ctx context.Context, leases []store.Lease) error {
	return l.leaser().Release(l.enter(ctx, "Release"), leases)
}

func (l *layer) Invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	return l.leaser().Invalidate(l.enter(ctx, "Invalidate"), keys, stale)
}

func (l *layer) tracker() store.Tracker {
	t, ok := store.Find[store.Tracker](l.inner)
	if !ok || !t.Tracking() {
		return nil
	}
	return t
}

func (l *layer) Tracking() bool { return l.tracker() != nil }

func (l *layer) Tracks(key string) bool {
	t := l.tracker()
	return t != nil && t.Tracks(key)
}

func (l *layer) GetTracked(ctx context.Context, key string) ([]byte, error) {
	start := history.Now()
	v, err := l.tracker().GetTracked(l.enter(ctx, "GetTracked"), key)
	l.tracked([]string{key}, [][]byte{v}, err, start)
	return v, err
}

func (l *layer) GetManyTracked(ctx context.Context, keys []string) ([][]byte, error) {
	start := history.Now()
	vs, err := l.tracker().GetManyTracked(l.enter(ctx, "GetManyTracked"), keys)
	l.tracked(keys, vs, err, start)
	return vs, err
}

// tracked records the values an L1 read from the store (top only).
func (l *layer) tracked(keys []string, vals [][]byte, err error, start int64) {
	if l.rec == nil {
		return
	}
	end := history.Now()
	failed := map[string]bool{}
	if be, ok := err.(*store.BatchError); ok {
		for k := range be.Failed() {
			failed[k] = true
		}
	} else if err != nil && !isNotFound(err) {
		return
	}
	for i, k := range keys {
		if failed[k] || i >= len(vals) {
			continue
		}
		op := history.Op{Kind: history.Tracked, Proc: l.proc, Client: -1, Key: k, Start: start, End: end}
		if vals[i] != nil {
			var v history.Value
			h, derr := l.decode.Decode(vals[i], &v)
			if derr != nil || h.Kind != codec.KindValue {
				continue // a placeholder or a negative entry: no value
			}
			op.Ver, op.Load = v.Ver, v.Load
		}
		l.rec.Add(op)
	}
}

func (l *layer) Subscribe(fn func(keys []string)) func() {
	t := l.tracker()
	if t == nil {
		return func() {}
	}
	return t.Subscribe(func(keys []string) {
		start := history.Now()
		fn(keys)
		if l.rec == nil {
			return
		}
		end := history.Now()
		if keys == nil {
			l.rec.Add(history.Op{Kind: history.Report, Proc: l.proc, Client: -1, Flush: true, Start: start, End: end})
		}
		for _, k := range keys {
			l.rec.Add(history.Op{Kind: history.Report, Proc: l.proc, Client: -1, Key: k, Start: start, End: end})
		}
	})
}

// unleasedFill is the injected fault "a fill that ignores the lease": its
// Fill writes every value unconditionally, so a load that an Invalidate
// overtook is cached all the same. It writes 60 ms late, as a slow
// network would, so that most fills land after an Invalidate.
type unleasedFill struct {
	store.Store
}

func (u unleasedFill) Unwrap() store.Store { return u.Store }

func (u unleasedFill) leaser() store.Leaser {
	le, _ := store.FindLeaser(u.Store)
	return le
}

func (u unleasedFill) LeaseGet(ctx context.Context, keys []string, o store.LeaseOptions) ([]store.LeaseResult, error) {
	return u.leaser().LeaseGet(ctx, keys, o)
}

func (u unleasedFill) Fill(ctx context.Context, fills []store.Fill) error {
	time.Sleep(60 * time.Millisecond)
	items := make([]store.Item, len(fills))
	for i, f := range fills {
		items[i] = store.Item{Key: f.Lease.Key, Value: f.Value, TTL: f.TTL}
	}
	return store.SetMany(ctx, u.Store, items)
}

func (u unleasedFill) Release(ctx context.Context, leases []store.Lease) error {
	return u.leaser().Release(ctx, leases)
}

func (u unleasedFill) Invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	return u.leaser().Invalidate(ctx, keys, stale)
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
