package health_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/redisstore"
)

// TestL1ReadsGoThroughTheBreaker: an L1 over the breaker over a tracking
// Redis finds the tracking capability on the breaker itself, not around
// it, so once the node is Down its tracked reads fail fast (counted in
// FailFast) and reach no server; before, every tracked read skipped the
// breaker.
func TestL1ReadsGoThroughTheBreaker(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	p := servertest.Proxy(t, r.Addr, faults.ProxyOptions{Protocol: faults.RESP, DialTimeout: time.Second})
	ctx := context.Background()
	inner, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{p.Addr()}, Tracking: redisstore.Tracking{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	hs, err := health.New(inner, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	if tr, ok := store.Find[store.Tracker](hs); !ok || tr != store.Tracker(hs) || !tr.Tracking() {
		t.Fatalf("Find[Tracker] through the breaker = %T, %v; want the breaker itself", tr, ok)
	}
	c, err := kura.New[string](hs, kura.Options{L1: kura.L1Options{MaxBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "k", "v", time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k"); err != nil || v != "v" {
		t.Fatalf("tracked Get = %q, %v", v, err)
	}
	// The probe client is dialled in the background from New: let one
	// probe answer first, so the node is Up by a probe and the probe's
	// connection is an open one that ResetConns below cuts.
	waitFor(t, "a first probe to answer", func() bool {
		st := nodeStats(hs, p.Addr())
		return st.Probes > st.ProbeFailures
	})
	must(t, p.Refuse())
	p.ResetConns()
	waitFor(t, "the node to be Down", func() bool {
		st, _ := hs.State(p.Addr())
		return st == health.Down
	})
	before := nodeStats(hs, p.Addr()).FailFast
	const reads = 6
	for i := range reads {
		_, err := c.Get(ctx, "cold"+string(rune('a'+i)))
		if !errors.Is(err, health.ErrNodeDown) {
			t.Fatalf("tracked read %d of a Down node: %v; want ErrNodeDown from the breaker", i, err)
		}
	}
	if n := nodeStats(hs, p.Addr()).FailFast - before; n != reads {
		t.Fatalf("%d of %d tracked reads went through the breaker", n, reads)
	}
	must(t, p.Admit())
}
