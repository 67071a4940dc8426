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
	"github.com/kuracache/kura/store/memstore"
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

// perKeyDeadline is a lease store whose LeaseGet waits out the call's
// deadline and then reports it per key, in a *store.BatchError, as a
// Redis pipeline whose replies did not come back in time may.
type perKeyDeadline struct{ store.Store }

var _ store.Leaser = perKeyDeadline{}

func (s perKeyDeadline) LeaseGet(ctx context.Context, keys []string, _ store.LeaseOptions) ([]store.LeaseResult, error) {
	<-ctx.Done()
	be := &store.BatchError{Op: "get"}
	for _, k := range keys {
		be.Errors = append(be.Errors, store.KeyError{Key: k, Addr: "127.0.0.1:1", Err: store.NodeErr("127.0.0.1:1", ctx.Err())})
	}
	return make([]store.LeaseResult, len(keys)), be
}

// Fill, Release and Invalidate are never reached with a lease this store
// gave (it gives none); they are here to make it a store.Leaser.
func (perKeyDeadline) Fill(context.Context, []store.Fill) error     { return nil }
func (perKeyDeadline) Release(context.Context, []store.Lease) error { return nil }
func (s perKeyDeadline) Invalidate(ctx context.Context, keys []string, _ time.Duration) error {
	for _, k := range keys {
		if err := s.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// TestBudgetSpentPerKeyIsCounted: a lease read whose keys fail one by one
// because the budget ran out (not the caller's context) counts each in
// BudgetSkips, as a whole-call deadline does; the caller still gets the
// loader's values. Before, only a whole-call failure was counted, and the
// count depended on how the Redis client happened to report the timeout.
func TestBudgetSpentPerKeyIsCounted(t *testing.T) {
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	c, err := kura.New[string](perKeyDeadline{ms}, kura.Options{StoreTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v, err := c.Fetch(ctx, "a", time.Minute, func(context.Context, string) (string, error) { return "A", nil })
	if err != nil || v != "A" {
		t.Fatalf("Fetch = %q, %v", v, err)
	}
	if st := c.Stats(); st.BudgetSkips != 1 || st.StoreErrors != 1 {
		t.Fatalf("one key, budget spent: %d budget skips, %d store errors; want 1, 1", st.BudgetSkips, st.StoreErrors)
	}
	m, err := c.FetchMany(ctx, []string{"b", "c"}, time.Minute, func(_ context.Context, keys []string) (map[string]string, error) {
		return map[string]string{"b": "B", "c": "C"}, nil
	})
	if err != nil || len(m) != 2 {
		t.Fatalf("FetchMany = %v, %v", m, err)
	}
	if st := c.Stats(); st.BudgetSkips != 3 {
		t.Fatalf("after two more keys: %d budget skips; want 3", st.BudgetSkips)
	}
	// The caller's own deadline is not the budget's: not counted.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	_, _ = c.Fetch(cctx, "d", time.Minute, func(context.Context, string) (string, error) { return "D", nil })
	if st := c.Stats(); st.BudgetSkips != 3 {
		t.Fatalf("the caller's deadline was counted as the budget's: %d budget skips; want 3", st.BudgetSkips)
	}
}

// laggingDeadline is a caller's context whose deadline has passed but
// whose timer has not marked it done yet, as a loaded runtime leaves it
// for a moment: memcache reports its connection's deadline as
// context.DeadlineExceeded as soon as the socket's deadline passes, which
// can be before that.
type laggingDeadline struct {
	context.Context
	dl time.Time
}

func (c laggingDeadline) Deadline() (time.Time, bool) { return c.dl, true }

// earlyDeadline is a lease store that reports the call's deadline per key
// once it has passed, without waiting for the context to be marked done.
type earlyDeadline struct{ perKeyDeadline }

func (s earlyDeadline) LeaseGet(ctx context.Context, keys []string, _ store.LeaseOptions) ([]store.LeaseResult, error) {
	if dl, ok := ctx.Deadline(); ok {
		time.Sleep(time.Until(dl))
	}
	be := &store.BatchError{Op: "get"}
	for _, k := range keys {
		be.Errors = append(be.Errors, store.KeyError{Key: k, Addr: "127.0.0.1:1", Err: store.NodeErr("127.0.0.1:1", context.DeadlineExceeded)})
	}
	return make([]store.LeaseResult, len(keys)), be
}

// TestCallerDeadlineBeforeItsTimerIsNotTheBudgets: a caller whose own
// deadline (shorter than StoreTimeout) passed while the store read, but
// whose context's timer has not fired yet, did not spend the budget:
// leaseErr asked only ctx.Err(), so it counted such keys in BudgetSkips.
func TestCallerDeadlineBeforeItsTimerIsNotTheBudgets(t *testing.T) {
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	c, err := kura.New[string](earlyDeadline{perKeyDeadline{ms}}, kura.Options{StoreTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := laggingDeadline{Context: context.Background(), dl: time.Now().Add(5 * time.Millisecond)}
	v, err := c.Fetch(ctx, "a", time.Minute, func(context.Context, string) (string, error) { return "A", nil })
	if err != nil || v != "A" {
		t.Fatalf("Fetch = %q, %v", v, err)
	}
	m, err := c.FetchMany(ctx, []string{"b", "c"}, time.Minute, func(_ context.Context, keys []string) (map[string]string, error) {
		return map[string]string{"b": "B", "c": "C"}, nil
	})
	if err != nil || len(m) != 2 {
		t.Fatalf("FetchMany = %v, %v", m, err)
	}
	if st := c.Stats(); st.BudgetSkips != 0 {
		t.Fatalf("the caller's passed deadline was counted as the budget's: %d budget skips; want 0", st.BudgetSkips)
	}
}
