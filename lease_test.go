package kura_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
)

// leaseBackends are the stores with the lease capability, each on its own
// real server(s). Two Caches over one store stand for two processes: they
// share nothing but the server (each Cache has its own flight group).
func leaseBackends(t *testing.T) map[string]func(t *testing.T) store.Store {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	cl := servertest.RedisCluster(t)
	pool := servertest.MemcachedPool(t, 3, servers.MemcachedConfig{})
	addrs := servertest.Addrs(pool)
	return map[string]func(t *testing.T) store.Store{
		"redis":         redisBackend(r.URL),
		"redis-cluster": redisBackend(cl.URL),
		"memcached":     memcachedBackend(addrs...),
	}
}

var leaseSeq atomic.Int64

// leaseKey returns a key no other test (or earlier run on a reused server)
// has used.
func leaseKey(name string) string {
	return fmt.Sprintf("lease:%d:%d:%s", time.Now().UnixNano(), leaseSeq.Add(1), name)
}

func TestLeaseGuarantee(t *testing.T) {
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if st := newCache(t, mem, kura.Options{}).Stats(); st.Coordination != kura.CoordinationProcess {
		t.Fatalf("in-process store: Coordination %q, want %q", st.Coordination, kura.CoordinationProcess)
	}
	if _, err := kura.New[Profile](mem, kura.Options{Leases: kura.LeasesRequired}); err == nil {
		t.Fatal("LeasesRequired on a store without leases must fail")
	}
	for name, open := range leaseBackends(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			if st := newCache(t, s, kura.Options{}).Stats(); st.Coordination != kura.CoordinationLeases {
				t.Fatalf("Coordination %q, want %q by default", st.Coordination, kura.CoordinationLeases)
			}
			if st := newCache(t, s, kura.Options{Leases: kura.LeasesOff}).Stats(); st.Coordination != kura.CoordinationProcess {
				t.Fatalf("LeasesOff: Coordination %q", st.Coordination)
			}
			if _, err := kura.New[Profile](s, kura.Options{Leases: kura.LeasesOff, StaleWhileRevalidate: time.Second}); err == nil {
				t.Fatal("StaleWhileRevalidate without leases must fail")
			}
		})
	}
}

// TestLeaseHiddenFromCallers: while one Cache holds a lease, another sees
// a miss through Get and GetMany, never the placeholder; a Fetch that
// waits past LeaseWait loads for itself and writes nothing; the holder's
// fill then serves everyone.
func TestLeaseHiddenFromCallers(t *testing.T) {
	for name, open := range leaseBackends(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			holder := newCache(t, s, kura.Options{})
			other := newCache(t, s, kura.Options{LeaseWait: 50 * time.Millisecond})
			key := leaseKey("hidden")
			loading, release := make(chan struct{}), make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := holder.Fetch(ctx, key, time.Minute, func(context.Context, string) (Profile, error) {
					close(loading)
					<-release
					return profile(1), nil
				})
				done <- err
			}()
			<-loading
			if _, err := other.Get(ctx, key); !errors.Is(err, kura.ErrNotFound) {
				t.Fatalf("Get of a key under lease = %v, want ErrNotFound", err)
			}
			if m, err := other.GetMany(ctx, []string{key}); err != nil || len(m) != 0 {
				t.Fatalf("GetMany of a key under lease = %v, %v; want nothing", m, err)
			}
			v, err := other.Fetch(ctx, key, time.Minute, func(context.Context, string) (Profile, error) { return profile(2), nil })
			if err != nil || v.ID != 2 {
				t.Fatalf("Fetch past LeaseWait = %+v, %v; want its own load", v, err)
			}
			m, err := other.FetchMany(ctx, []string{key}, time.Minute, func(_ context.Context, keys []string) (map[string]Profile, error) {
				return map[string]Profile{keys[0]: profile(3)}, nil
			})
			if err != nil || m[key].ID != 3 {
				t.Fatalf("FetchMany past LeaseWait = %v, %v", m, err)
			}
			if st := other.Stats(); st.LeaseFailOpen != 2 || st.LeaseWaits != 2 || st.DecodeErrors != 0 {
				t.Fatalf("stats after two fail-open loads: %+v", st)
			}
			if _, err := other.Get(ctx, key); !errors.Is(err, kura.ErrNotFound) {
				t.Fatalf("a fail-open load wrote back: Get = %v", err)
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if v, err := other.Get(ctx, key); err != nil || v.ID != 1 {
				t.Fatalf("after the holder's fill: Get = %+v, %v", v, err)
			}
		})
	}
}

// TestInvalidateDropsRacingFill: a load that read the old row before an
// Invalidate does not cache it after; without leases it does (the hole
// leases close).
func TestInvalidateDropsRacingFill(t *testing.T) {
	for name, open := range leaseBackends(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			for _, mode := range []kura.LeaseMode{kura.LeasesAuto, kura.LeasesOff} {
				ctx := context.Background()
				reader := newCache(t, s, kura.Options{Leases: mode})
				writer := newCache(t, s, kura.Options{Leases: mode})
				key := leaseKey("race")
				loaded, invalidated := make(chan struct{}), make(chan struct{})
				go func() {
					<-loaded
					if err := writer.Invalidate(ctx, key); err != nil {
						t.Error(err)
					}
					close(invalidated)
				}()
				v, err := reader.Fetch(ctx, key, time.Minute, func(context.Context, string) (Profile, error) {
					old := profile(1) // read before the writer's change
					close(loaded)
					<-invalidated
					return old, nil
				})
				if err != nil || v.ID != 1 {
					t.Fatalf("Fetch = %+v, %v", v, err)
				}
				_, err = reader.Get(ctx, key)
				switch mode {
				case kura.LeasesAuto:
					if !errors.Is(err, kura.ErrNotFound) {
						t.Fatalf("with leases, the fill that raced Invalidate was cached: Get = %v", err)
					}
					if st := reader.Stats(); st.LeaseFillsLost != 1 {
						t.Fatalf("LeaseFillsLost = %d, want 1", st.LeaseFillsLost)
					}
				case kura.LeasesOff:
					if err != nil {
						t.Fatalf("control: without leases the racing fill should land (the stale value), Get = %v", err)
					}
				}
			}
		})
	}
}

// TestLeaseReleasedOnLoaderError: a holder whose loader fails gives the
// lease up at once, so the next caller loads without waiting.
func TestLeaseReleasedOnLoaderError(t *testing.T) {
	for name, open := range leaseBackends(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			a := newCache(t, s, kura.Options{})
			b := newCache(t, s, kura.Options{LeaseWait: time.Minute})
			key := leaseKey("err")
			boom := errors.New("database down")
			if _, err := a.Fetch(ctx, key, time.Minute, func(context.Context, string) (Profile, error) { return Profile{}, boom }); !errors.Is(err, boom) {
				t.Fatalf("Fetch = %v, want the loader's error", err)
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("the loader's panic did not reach the caller")
					}
				}()
				_, _ = a.Fetch(ctx, key, time.Minute, func(context.Context, string) (Profile, error) { panic("bug") })
			}()
			v, err := b.Fetch(ctx, key, time.Minute, func(context.Context, string) (Profile, error) { return profile(7), nil })
			if err != nil || v.ID != 7 {
				t.Fatalf("Fetch after a failed holder = %+v, %v", v, err)
			}
			if st := b.Stats(); st.LeaseWaits != 0 || st.LoaderCalls != 1 {
				t.Fatalf("the next caller waited for a released lease: %+v", st)
			}
			// Not found is cached negatively under the lease.
			nk := leaseKey("absent")
			if _, err := a.Fetch(ctx, nk, time.Minute, func(context.Context, string) (Profile, error) { return Profile{}, kura.ErrNotFound }); !errors.Is(err, kura.ErrNotFound) {
				t.Fatal(err)
			}
			if _, err := b.Fetch(ctx, nk, time.Minute, func(context.Context, string) (Profile, error) { return profile(1), nil }); !errors.Is(err, kura.ErrNotFound) {
				t.Fatalf("a negative fill under lease was not served: %v", err)
			}
		})
	}
}

// TestFetchManyLeases: two callers (two Caches: two processes) fetch
// overlapping batches of cold keys at once; every key is loaded exactly
// once, each loader gets only keys it holds, and both get every value.
func TestFetchManyLeases(t *testing.T) {
	for name, open := range leaseBackends(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			base := leaseKey("many")
			keys := make([]string, 40)
			for i := range keys {
				keys[i] = fmt.Sprintf("%s:%d", base, i)
			}
			var mu sync.Mutex
			loads := map[string]int{}
			loader := func(_ context.Context, ks []string) (map[string]Profile, error) {
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				defer mu.Unlock()
				out := map[string]Profile{}
				for _, k := range ks {
					loads[k]++
					if k != keys[len(keys)-1] { // the last key does not exist
						out[k] = Profile{ID: len(k), Name: k}
					}
				}
				return out, nil
			}
			var wg sync.WaitGroup
			for i, part := range [][]string{keys[:30], keys[10:]} {
				c := newCache(t, s, kura.Options{LeaseWait: time.Minute})
				wg.Add(1)
				go func() {
					defer wg.Done()
					m, err := c.FetchMany(ctx, part, time.Minute, loader)
					if err != nil {
						t.Errorf("caller %d: %v", i, err)
						return
					}
					for _, k := range part {
						if _, ok := m[k]; ok == (k == keys[len(keys)-1]) || (ok && m[k].Name != k) {
							t.Errorf("caller %d: key %s: %+v present=%v", i, k, m[k], ok)
						}
					}
				}()
			}
			wg.Wait()
			for _, k := range keys {
				if loads[k] != 1 {
					t.Fatalf("key %s loaded %d times, want exactly 1", k, loads[k])
				}
			}
		})
	}
}

// TestStaleWhileRevalidate (memcached): after Invalidate, readers get the
// old value at once while exactly one reloads it in the background.
func TestStaleWhileRevalidate(t *testing.T) {
	open := leaseBackends(t)["memcached"]
	s := open(t)
	ctx := context.Background()
	c := newCache(t, s, kura.Options{StaleWhileRevalidate: 30 * time.Second})
	key := leaseKey("swr")
	if err := c.Set(ctx, key, profile(1), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.Invalidate(ctx, key); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	loader := func(context.Context, string) (Profile, error) { calls.Add(1); return profile(2), nil }
	for i := 0; i < 5; i++ {
		v, err := c.Fetch(ctx, key, time.Minute, loader)
		if err != nil || (v.ID != 1 && v.ID != 2) {
			t.Fatalf("Fetch after Invalidate = %+v, %v", v, err)
		}
	}
	waitFor(t, "the background refresh", func() bool { v, err := c.Get(ctx, key); return err == nil && v.ID == 2 })
	if st := c.Stats(); st.StaleServed == 0 || calls.Load() != 1 {
		t.Fatalf("stale served %d, loader calls %d; want >0 and exactly 1", st.StaleServed, calls.Load())
	}
}

// TestEarlyRefresh (memcached R flag): a key with less than EarlyRefresh
// left is refreshed by exactly one reader while everyone gets the cached
// value.
func TestEarlyRefresh(t *testing.T) {
	open := leaseBackends(t)["memcached"]
	s := open(t)
	ctx := context.Background()
	c := newCache(t, s, kura.Options{EarlyRefresh: 2 * time.Hour})
	key := leaseKey("early")
	// One hour left is inside the refresh window; the refresh writes a
	// TTL of 3 hours, outside it.
	if err := c.Set(ctx, key, profile(1), time.Hour); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	for i := 0; i < 5; i++ {
		v, err := c.Fetch(ctx, key, 3*time.Hour, func(context.Context, string) (Profile, error) { calls.Add(1); return profile(2), nil })
		if err != nil || (v.ID != 1 && v.ID != 2) {
			t.Fatalf("Fetch = %+v, %v", v, err)
		}
	}
	waitFor(t, "the early refresh", func() bool { v, err := c.Get(ctx, key); return err == nil && v.ID == 2 })
	if st := c.Stats(); st.EarlyRefreshes == 0 || calls.Load() != 1 {
		t.Fatalf("early refreshes %d, loader calls %d; want >0 and exactly 1", st.EarlyRefreshes, calls.Load())
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 20s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestXFetchRedis: on Redis, early refresh is probabilistic (XFetch from
// the envelope's write time, TTL and load cost): a key read often enough
// is reloaded by one reader before it expires, under the condition that
// it did not change.
func TestXFetchRedis(t *testing.T) {
	open := leaseBackends(t)["redis"]
	s := open(t)
	ctx := context.Background()
	c := newCache(t, s, kura.Options{EarlyRefresh: time.Hour})
	key := leaseKey("xfetch")
	var calls atomic.Int64
	loader := func(context.Context, string) (Profile, error) {
		n := calls.Add(1)
		time.Sleep(50 * time.Millisecond) // the cost XFetch weighs
		return profile(int(n)), nil
	}
	if _, err := c.Fetch(ctx, key, 2*time.Second, loader); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an early refresh", func() bool {
		v, err := c.Fetch(ctx, key, 2*time.Second, loader)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
		return v.ID >= 2
	})
	if st := c.Stats(); st.EarlyRefreshes == 0 {
		t.Fatalf("the value changed without an early refresh: %+v", st)
	}
}

// TestKeyedInvalidate: a Keyed view invalidates its own keys through the
// Cache (leases included).
func TestKeyedInvalidate(t *testing.T) {
	s := leaseBackends(t)["redis"](t)
	ctx := context.Background()
	c := newCache(t, s, kura.Options{TTL: time.Hour})
	k, err := kura.NewKeyed[int, Profile](c, kura.KeyedOptions[int]{Prefix: leaseKey("keyed") + ":"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{1, 2} {
		if err := k.Set(ctx, id, profile(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Invalidate(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{1, 2} {
		if _, err := k.Get(ctx, id); !errors.Is(err, kura.ErrNotFound) {
			t.Fatalf("id %d after Invalidate: %v", id, err)
		}
	}
}
