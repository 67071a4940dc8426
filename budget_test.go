package kura_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
)

// TestBudgetCostsNothingOnAHit: the StoreTimeout budget adds no allocation
// to a warm Fetch (default options, leases on) against the same Fetch with
// no budget (StoreTimeout -1): the first store call of a read is bounded
// by a deadline shared between reads (no timer, no context per call).
// After the calls, no goroutine of the Cache is left (goleak), so nothing
// the budget made outlives a call.
func TestBudgetCostsNothingOnAHit(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	m := servertest.Memcached(t, servers.MemcachedConfig{})
	backends := map[string]func(t *testing.T) store.Store{
		"redis":     redisBackend(r.URL),
		"memcached": memcachedBackend(m.Addr),
	}
	ctx := context.Background()
	load := func(context.Context, string) (Profile, error) { return profile(7), nil }
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ignore := goleak.IgnoreCurrent() // the store's own connections
			allocs := map[time.Duration]float64{}
			for _, timeout := range []time.Duration{-1, 0} {
				c := newCache(t, s, kura.Options{StoreTimeout: timeout})
				key := leaseKey("budget")
				if _, err := c.Fetch(ctx, key, time.Hour, load); err != nil {
					t.Fatal(err)
				}
				allocs[timeout] = allocsPerFetch(2000, func() {
					if _, err := c.Fetch(ctx, key, time.Hour, load); err != nil {
						t.Fatal(err)
					}
				})
				if st := c.Stats(); st.LoaderCalls != 1 || st.BudgetSkips != 0 {
					t.Fatalf("StoreTimeout %v: %d loads, %d budget skips: not a hit path", timeout, st.LoaderCalls, st.BudgetSkips)
				}
			}
			t.Logf("allocations per warm Fetch: %.2f with the budget, %.2f without", allocs[0], allocs[-1])
			// The shared deadline tick is renewed every StoreTimeout/8 and
			// its few allocations are spread over every read in that time:
			// a fraction of one per hit (more under -race, where a read is
			// slower, and on a loaded machine, where fewer reads share a
			// tick: 1.06 was seen at load 20). What this test refuses is a
			// context or timer per call, which costs 3 or more allocations
			// (the timerCtx, its timer, its Done channel, the cancel func).
			if allocs[0]-allocs[-1] >= 2 {
				t.Errorf("the budget costs %.2f allocations per hit", allocs[0]-allocs[-1])
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// allocsPerFetch is testing.AllocsPerRun without its rounding down to a
// whole number: the mean number of allocations per call of f over runs
// calls, after one warm-up call.
func allocsPerFetch(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
}
