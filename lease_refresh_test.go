package kura_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// refreshWindow is Options.EarlyRefresh in the FetchMany early-refresh
// tests: hot keys are written due for refresh on every backend (memcached:
// a server TTL below it, so the R flag hands out a lease; Redis: an
// envelope whose logical expiry has come, so XFetch always says yes), cold
// keys far outside it.
const refreshWindow = 2 * time.Hour

// seedRefresh writes profile(i) under hot[i] and cold[i] as a Cache of
// codec cd would, with the envelope fields XFetch reads.
func seedRefresh(t *testing.T, s store.Store, cd *codec.Codec, hot, cold []string) {
	t.Helper()
	ctx := context.Background()
	fp := cd.Fingerprint(reflect.TypeFor[Profile]())
	now := time.Now()
	put := func(key string, v Profile, written time.Time, ttl time.Duration) {
		b, _, err := cd.EncodeWith(nil, v, codec.Fields{Schema: fp, HasSchema: true, Written: written, TTL: ttl, Cost: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Set(ctx, key, b, ttl); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range hot {
		// One hour left on the server (inside the window); the envelope
		// says written an hour ago for an hour (due now).
		put(k, profile(i), now.Add(-time.Hour), time.Hour)
	}
	for i, k := range cold {
		put(k, profile(100+i), now, 3*time.Hour)
	}
}

// TestFetchManyEarlyRefresh: a FetchMany of hot keys inside the refresh
// window returns the cached values without waiting for the loader, and
// refreshes exactly those keys in the background with one loader call and
// one conditional fill; keys outside the window are left alone.
func TestFetchManyEarlyRefresh(t *testing.T) {
	for name, open := range leaseBackends(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			cd, err := codec.New(codec.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c := newCache(t, s, kura.Options{Codec: cd, EarlyRefresh: refreshWindow})
			var hot, cold []string
			for i := 0; i < 8; i++ {
				hot = append(hot, leaseKey("fm-hot"))
			}
			for i := 0; i < 4; i++ {
				cold = append(cold, leaseKey("fm-cold"))
			}
			seedRefresh(t, s, cd, hot, cold)
			next := make(map[string]int, len(hot))
			for i, k := range hot {
				next[k] = 1000 + i
			}

			gate := make(chan struct{})
			var mu sync.Mutex
			var calls [][]string
			loader := func(ctx context.Context, keys []string) (map[string]Profile, error) {
				mu.Lock()
				calls = append(calls, slices.Clone(keys))
				mu.Unlock()
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				out := make(map[string]Profile, len(keys))
				for _, k := range keys {
					out[k] = profile(next[k])
				}
				return out, nil
			}
			keys := append(slices.Clone(hot), cold...)
			type result struct {
				m   map[string]Profile
				err error
			}
			done := make(chan result, 1)
			go func() {
				m, err := c.FetchMany(ctx, keys, 3*time.Hour, loader)
				done <- result{m, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				close(gate)
				t.Fatal("FetchMany waited for the background refresh's loader")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			for i, k := range hot {
				if r.m[k].ID != i {
					t.Fatalf("hot key %d: got %+v, want the cached profile %d", i, r.m[k].ID, i)
				}
			}
			for i, k := range cold {
				if r.m[k].ID != 100+i {
					t.Fatalf("cold key %d: got %d, want the cached %d", i, r.m[k].ID, 100+i)
				}
			}
			if st := c.Stats(); st.EarlyRefreshes != uint64(len(hot)) {
				t.Fatalf("EarlyRefreshes %d, want %d (the hot keys)", st.EarlyRefreshes, len(hot))
			}
			// A second FetchMany while the refresh runs (memcached: the
			// win was handed out already; Redis: XFetch says yes again,
			// but this process refreshes those keys already) is served
			// from the cache and starts no second refresh.
			go func() {
				m, err := c.FetchMany(ctx, keys, 3*time.Hour, loader)
				done <- result{m, err}
			}()
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				close(gate)
				t.Fatal("a second FetchMany waited for the running refresh")
			}
			if r.err != nil || len(r.m) != len(keys) {
				t.Fatalf("second FetchMany during the refresh = %d values, %v", len(r.m), r.err)
			}
			if st := c.Stats(); st.EarlyRefreshes != uint64(len(hot)) {
				t.Fatalf("a FetchMany during the refresh started another: EarlyRefreshes %d, want %d", st.EarlyRefreshes, len(hot))
			}
			close(gate)
			waitFor(t, "the background fill", func() bool {
				for _, k := range hot {
					v, err := c.Get(ctx, k)
					if err != nil || v.ID != next[k] {
						return false
					}
				}
				return true
			})
			mu.Lock()
			got := slices.Clone(calls)
			mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("loader called %d times (%v), want once", len(got), got)
			}
			want := slices.Clone(hot)
			slices.Sort(want)
			slices.Sort(got[0])
			if !slices.Equal(got[0], want) {
				t.Fatalf("loader got keys %v, want exactly the hot keys %v", got[0], want)
			}
			for i, k := range cold {
				if v, err := c.Get(ctx, k); err != nil || v.ID != 100+i {
					t.Fatalf("cold key %d after the refresh: %+v, %v; want the untouched %d", i, v.ID, err, 100+i)
				}
			}
			// The refreshed keys now live 3 hours, outside the window:
			// reading them again starts no refresh.
			m, err := c.FetchMany(ctx, keys, 3*time.Hour, loader)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range hot {
				if m[k].ID != next[k] {
					t.Fatalf("second FetchMany: %q = %d, want the refreshed %d", k, m[k].ID, next[k])
				}
			}
			if st := c.Stats(); st.EarlyRefreshes != uint64(len(hot)) {
				t.Fatalf("second FetchMany started a refresh: EarlyRefreshes %d, want %d", st.EarlyRefreshes, len(hot))
			}
		})
	}
}

// TestFetchManyEarlyRefreshPanic: a loader that panics in a background
// refresh is recovered and counted, and its leases are released, so the
// next FetchMany is not left waiting and loads the keys again.
func TestFetchManyEarlyRefreshPanic(t *testing.T) {
	for name, open := range leaseBackends(t) {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			cd, err := codec.New(codec.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c := newCache(t, s, kura.Options{Codec: cd, EarlyRefresh: refreshWindow, LeaseWait: time.Minute})
			hot := []string{leaseKey("fm-panic"), leaseKey("fm-panic")}
			seedRefresh(t, s, cd, hot, nil)
			m, err := c.FetchMany(ctx, hot, 3*time.Hour, func(context.Context, []string) (map[string]Profile, error) {
				panic("loader bug")
			})
			if err != nil || m[hot[0]].ID != 0 || m[hot[1]].ID != 1 {
				t.Fatalf("FetchMany = %v, %v; want the cached values", m, err)
			}
			// Releasing a lease that came with a value removes the value
			// (its version still matched), so the next reader takes a
			// lease and loads instead of being served a value nobody
			// refreshes.
			waitFor(t, "the leases to be released", func() bool {
				for _, k := range hot {
					if _, err := c.Get(ctx, k); !errors.Is(err, kura.ErrNotFound) {
						return false
					}
				}
				return true
			})
			if st := c.Stats(); st.LoaderPanics != 1 {
				t.Fatalf("LoaderPanics %d, want 1", st.LoaderPanics)
			}
			var mu sync.Mutex
			var loaded []string
			m, err = c.FetchMany(ctx, hot, 3*time.Hour, func(_ context.Context, keys []string) (map[string]Profile, error) {
				mu.Lock()
				loaded = append(loaded, keys...)
				mu.Unlock()
				out := make(map[string]Profile, len(keys))
				for _, k := range keys {
					out[k] = profile(7)
				}
				return out, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range hot {
				if m[k].ID != 7 {
					t.Fatalf("FetchMany after the panic: %q = %+v, want the loaded 7", k, m[k])
				}
				if v, err := c.Get(ctx, k); err != nil || v.ID != 7 {
					t.Fatalf("Get %q after the reload = %+v, %v; want 7", k, v.ID, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			slices.Sort(loaded)
			want := slices.Clone(hot)
			slices.Sort(want)
			if !slices.Equal(loaded, want) {
				t.Fatalf("loaded %v after the panic, want each key once: %v", loaded, want)
			}
		})
	}
}
