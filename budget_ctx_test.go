package kura_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/redisstore"
)

// callerContexts are the kinds of context a service passes to Fetch: none
// (Background), one that carries values only, one that can be cancelled
// (every net/http request's), and one with a deadline later than the
// store-time budget.
func callerContexts(t *testing.T) map[string]context.Context {
	bg := context.Background()
	cancellable, cancel := context.WithCancel(context.WithValue(bg, budgetCtxKey{}, 1))
	t.Cleanup(cancel)
	late, cancelLate := context.WithTimeout(bg, time.Hour)
	t.Cleanup(cancelLate)
	return map[string]context.Context{
		"background":  bg,
		"with-value":  context.WithValue(bg, budgetCtxKey{}, 1),
		"with-cancel": cancellable,
		"deadline-1h": late,
	}
}

// TestBudgetHitAllocsAnyCallerContext: a warm Fetch hit allocates no more
// with the default StoreTimeout budget than with none (StoreTimeout -1),
// whatever the caller's context: the first store call of a read is
// bounded by a shared tick and, for a caller that can cancel, a pooled
// context the Cache's clock watches (no context.WithTimeout, no timer, no
// goroutine). Before, a cancellable caller or one with a deadline later
// than the budget cost 4 more allocations per hit (a context.WithTimeout),
// and a context with values 1 (a tickCtx). After the calls no goroutine
// of the Cache is left (goleak). Under the race detector, which drops
// pooled objects at random, the counts are logged, not compared.
func TestBudgetHitAllocsAnyCallerContext(t *testing.T) {
	backends := map[string]func(t *testing.T) store.Store{
		"memstore": memstoreBackend,
	}
	if !testing.Short() {
		r := servertest.Redis(t, servers.RedisConfig{})
		m := servertest.Memcached(t, servers.MemcachedConfig{})
		backends["redis"] = redisBackend(r.URL)
		backends["memcached"] = memcachedBackend(m.Addr)
	}
	load := func(context.Context, string) (Profile, error) { return profile(7), nil }
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			if name == "redis" {
				pipelined(t, s) // its reader and writer goroutines start now
			}
			ignore := goleak.IgnoreCurrent() // the store's own connections
			ctxs := callerContexts(t)
			allocs := map[string]map[time.Duration]float64{}
			for _, timeout := range []time.Duration{-1, 0} {
				c := newCache(t, s, kura.Options{StoreTimeout: timeout})
				key := leaseKey("budget-ctx")
				if _, err := c.Fetch(context.Background(), key, time.Hour, load); err != nil {
					t.Fatal(err)
				}
				for kind, ctx := range ctxs {
					if allocs[kind] == nil {
						allocs[kind] = map[time.Duration]float64{}
					}
					allocs[kind][timeout] = testing.AllocsPerRun(500, func() {
						if _, err := c.Fetch(ctx, key, time.Hour, load); err != nil {
							t.Fatal(err)
						}
					})
				}
				if st := c.Stats(); st.LoaderCalls != 1 || st.BudgetSkips != 0 || st.StoreErrors != 0 {
					t.Fatalf("StoreTimeout %v: %d loads, %d budget skips, %d store errors: not a hit path", timeout, st.LoaderCalls, st.BudgetSkips, st.StoreErrors)
				}
				c.Close()
			}
			for kind, a := range allocs {
				t.Logf("%s: %v allocations per warm Fetch with the budget, %v without", kind, a[0], a[-1])
				if a[0] > a[-1] && !raceEnabled {
					t.Errorf("%s caller context: the budget costs %v allocations per hit (%v with, %v without)", kind, a[0]-a[-1], a[0], a[-1])
				}
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// pipelined puts s's Redis connection into rueidis's pipelined mode, the
// one it is in whenever two calls overlap (so in any service under load):
// there a call waits on its context's Done channel. A connection that
// never had two calls at once runs each call alone and watches only the
// deadline, where no caller's cancellation can reach it (rueidis's
// pipe.syncDo); a call with a Done channel and no deadline switches it.
func pipelined(t *testing.T, s store.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := s.Get(ctx, "pipelined"); err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
}

// stalled runs fn against a SIGSTOPped server and fails t if fn returns
// only after the server was resumed (a minute later). The test's budget
// is longer than that wait where the caller's context must be what ends
// the store call.
func stalled(t *testing.T, srv interface {
	Pause() error
	Resume() error
}, fn func()) {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := make(chan struct{})
	timer := time.AfterFunc(time.Minute, func() { _ = srv.Resume(); close(resumed) })
	defer func() {
		if timer.Stop() {
			_ = srv.Resume()
		}
	}()
	fn()
	select {
	case <-resumed:
		t.Fatal("the call returned only after the server was resumed")
	default:
	}
}

// stallBackends are the real servers a stalled-store test runs against,
// each with the store over it, ready for a stalled call.
func stallBackends(t *testing.T) map[string]struct {
	srv interface {
		Pause() error
		Resume() error
	}
	open func(t *testing.T) store.Store
} {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	m := servertest.Memcached(t, servers.MemcachedConfig{})
	return map[string]struct {
		srv interface {
			Pause() error
			Resume() error
		}
		open func(t *testing.T) store.Store
	}{
		"redis": {r, func(t *testing.T) store.Store {
			s, err := redisstore.NewFromURL(context.Background(), r.URL(), redisstore.Options{Configure: func(co *rueidis.ClientOption) {
				co.ConnWriteTimeout = slowStore
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			pipelined(t, s)
			return s
		}},
		"memcached": {m, func(t *testing.T) store.Store {
			s, err := memcache.New(context.Background(), memcache.Options{Servers: []string{m.Addr}, ReadTimeout: slowStore, WriteTimeout: slowStore})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	}
}

// slowStore is the stores' own I/O timeout in the stalled-store tests
// (rueidis's ConnWriteTimeout, memcache's Read/WriteTimeout; 10 s and 3 s
// by default): longer than the stall, so that only the context kura hands
// the store can end a call before the server resumes.
const slowStore = 10 * time.Minute

// TestCallerCancelEndsStalledStoreCall: a caller that cancels while its
// Fetch waits on a stalled server gets its context's error as soon as the
// clock's poll sees the cancellation (within about 5 ms,
// readthrough.cancelPoll), not when the budget runs out: the budget here
// is two minutes and the server resumes after one. Documented in
// Cache.Fetch: a caller whose ctx ends gets ctx's error at once.
func TestCallerCancelEndsStalledStoreCall(t *testing.T) {
	for name, b := range stallBackends(t) {
		t.Run(name, func(t *testing.T) {
			c := newCache(t, b.open(t), kura.Options{StoreTimeout: 2 * time.Minute})
			var loads int
			load := func(context.Context, string) (Profile, error) { loads++; return profile(2), nil }
			stalled(t, b.srv, func() {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(50*time.Millisecond, cancel)
				v, err := c.Fetch(ctx, leaseKey("cancel"), time.Hour, load)
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Fetch canceled during a stalled store call = %+v, %v; want context.Canceled", v, err)
				}
			})
		})
	}
}

// TestBudgetEndsStalledCallForCancellableCaller: for a caller whose
// context can be cancelled but is not, or has a deadline later than the
// budget, the budget still ends a read on a stalled server, and the
// loader's value is served (the write-back, with no budget left, is
// skipped and counted).
func TestBudgetEndsStalledCallForCancellableCaller(t *testing.T) {
	for name, b := range stallBackends(t) {
		t.Run(name, func(t *testing.T) {
			c := newCache(t, b.open(t), kura.Options{})
			ctxs := callerContexts(t)
			stalled(t, b.srv, func() {
				for _, kind := range []string{"with-cancel", "deadline-1h"} {
					v, err := c.Fetch(ctxs[kind], leaseKey("budget"), time.Hour, func(context.Context, string) (Profile, error) { return profile(2), nil })
					if err != nil || v.ID != 2 {
						t.Fatalf("%s: Fetch against a stalled server = %+v, %v; want the loader's value", kind, v, err)
					}
				}
			})
			if st := c.Stats(); st.BudgetSkips < 2 {
				t.Fatalf("the write-backs were not skipped after the reads spent the budget: %+v", st)
			}
		})
	}
}
