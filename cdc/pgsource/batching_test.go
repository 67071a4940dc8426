package pgsource_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/store"
)

// counting is a target's store that records cdc's calls (an Invalidate
// is one pipelined batch per server on redisstore and memcache) and can
// hold them, as a slow target would.
type counting struct {
	store.Store
	le store.Leaser

	mu     sync.Mutex
	calls  []int         // keys per Invalidate call
	others int           // any other write (a plain delete, a set)
	gate   chan struct{} // when set, Invalidate waits until it is closed
}

func newCounting(t *testing.T, s store.Store) *counting {
	le, ok := store.FindLeaser(s)
	if !ok {
		t.Fatalf("%T has no leases", s)
	}
	return &counting{Store: s, le: le}
}

// WalkNodes passes the key walk (a reset, a TRUNCATE) through.
func (c *counting) WalkNodes(ctx context.Context) (string, []store.NodeWalker, error) {
	w, ok := store.Find[store.KeyWalker](c.Store)
	if !ok {
		return "", nil, store.ErrNotCapable
	}
	return w.WalkNodes(ctx)
}

func (c *counting) LeaseGet(ctx context.Context, keys []string, o store.LeaseOptions) ([]store.LeaseResult, error) {
	return c.le.LeaseGet(ctx, keys, o)
}
func (c *counting) Fill(ctx context.Context, fills []store.Fill) error { return c.le.Fill(ctx, fills) }
func (c *counting) Release(ctx context.Context, leases []store.Lease) error {
	return c.le.Release(ctx, leases)
}

func (c *counting) Invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	c.mu.Lock()
	c.calls = append(c.calls, len(keys))
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.le.Invalidate(ctx, keys, stale)
}

func (c *counting) Delete(ctx context.Context, key string) error {
	c.other()
	return c.Store.Delete(ctx, key)
}

func (c *counting) DeleteMany(ctx context.Context, keys []string) error {
	c.other()
	return store.DeleteMany(ctx, c.Store, keys)
}

func (c *counting) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	c.other()
	return c.Store.Set(ctx, key, v, ttl)
}

func (c *counting) other() {
	c.mu.Lock()
	c.others++
	c.mu.Unlock()
}

// since returns the keys of each Invalidate call after the first n.
func (c *counting) since(n int) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.calls[n:]...)
}

func (c *counting) count() (calls, others int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls), c.others
}

func (c *counting) hold() {
	c.mu.Lock()
	c.gate = make(chan struct{})
	c.mu.Unlock()
}

func (c *counting) release() {
	c.mu.Lock()
	close(c.gate)
	c.gate = nil
	c.mu.Unlock()
}

// TestOneCallPerTargetPerTransactionAndCoalescingWhenBehind checks
// docs/cdc.md's "one round trip per server per batch" at the stores, on
// real Redis and memcached: a transaction of 200 rows is one Invalidate
// per target carrying all its keys; and while a target holds a batch, the
// transactions that arrive meanwhile are applied together, as one
// Invalidate per target, not one each.
func TestOneCallPerTargetPerTransactionAndCoalescingWhenBehind(t *testing.T) {
	f := newFixture(t, true)
	rc, mc := newCounting(t, f.redis), newCounting(t, f.mc)
	metrics := cdc.NewMetrics()
	applied, stop := f.run(t, func(o *cdc.Options) {
		o.Targets = []cdc.Target{{Name: "redis", Store: rc}, {Name: "memcached", Store: mc}}
		o.Metrics = metrics
	})
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 })

	// One transaction of 200 rows in 4 categories: 200 record keys and 4
	// id lists, one call per target.
	r0, _ := rc.count()
	m0, _ := mc.count()
	exec(t, f.pg.DSN(), fmt.Sprintf("INSERT INTO %s SELECT g, 'c' || (g %% 4), 0, 'x' FROM generate_series(1, 200) g", f.table))
	waitApplied(t, applied, func(a cdc.Applied) bool { return a.Keys > 0 })
	for _, c := range []struct {
		name string
		got  []int
	}{{"redis", rc.since(r0)}, {"memcached", mc.since(m0)}} {
		if len(c.got) != 1 || c.got[0] != 204 {
			t.Errorf("%s: a 200-row transaction took Invalidate calls of %v keys, want one of 204", c.name, c.got)
		}
	}

	// Behind: memcached holds the first batch of 30 one-row transactions
	// (the first one, and any that queued before delivery took it); the
	// others arrive meanwhile and go out together once it is done.
	const txns = 30
	r0, _ = rc.count()
	m0, _ = mc.count()
	mc.hold()
	for i := 1; i <= txns; i++ {
		exec(t, f.pg.DSN(), fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", f.table, i))
	}
	deadline := time.Now().Add(20 * time.Second)
	for metrics.Pending() < txns {
		if time.Now().After(deadline) {
			t.Fatalf("cdc received %d of %d transactions within 20s", metrics.Pending(), txns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mc.release()
	var batches []int
	for n := 0; n < txns; {
		a := waitApplied(t, applied, func(a cdc.Applied) bool { return a.Txns > 0 })
		batches = append(batches, a.Txns)
		n += a.Txns
	}
	rs, ms := rc.since(r0), mc.since(m0)
	t.Logf("%d transactions behind a held target: batches of %v transactions; Invalidate calls of %v keys (redis), %v (memcached)", txns, batches, rs, ms)
	if len(batches) > 2 || len(rs) > 2 || len(ms) > 2 {
		t.Errorf("%d transactions that queued behind a held target took %d batches and %d/%d calls, want at most 2 (the held one, then the rest together)", txns, len(batches), len(rs), len(ms))
	}
	// Each transaction invalidates its record and its category's list.
	for _, c := range [][]int{rs, ms} {
		if n := sum(c); n < txns {
			t.Errorf("the calls carried %v keys, want the %d records at least", c, txns)
		}
	}
	if _, o := rc.count(); o != 0 {
		t.Errorf("redis: %d writes other than Invalidate", o)
	}
	if _, o := mc.count(); o != 0 {
		t.Errorf("memcached: %d writes other than Invalidate", o)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
