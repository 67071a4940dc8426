package kura_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store"
)

// Profile is the value type used by the suite: a struct, as users cache.
type Profile struct {
	ID    int      `msgpack:"id" json:"id"`
	Name  string   `msgpack:"name" json:"name"`
	Tags  []string `msgpack:"tags" json:"tags"`
	Bio   string   `msgpack:"bio" json:"bio"`
	Score float64  `msgpack:"score" json:"score"`
}

func profile(i int) Profile {
	return Profile{ID: i, Name: fmt.Sprintf("user-%d", i), Tags: []string{"a", "b"},
		Bio: strings.Repeat("likes caches and databases. ", 40), Score: float64(i) / 3}
}

// backend is one store the whole Cache suite runs against.
type backend struct {
	name string
	// open returns a fresh, empty store on a private server (or memory).
	open func(t *testing.T) store.Store
}

// suite is every Cache test; each runs against every backend (see
// backends_test.go), like rueidis runs its tests against every topology.
var suite = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"GetSetDelete", testGetSetDelete},
	{"Many", testMany},
	{"FetchLoadsOnceThenHits", testFetchLoadsOnce},
	{"FetchSingleflight", testFetchSingleflight},
	{"FetchNegative", testFetchNegative},
	{"FetchLoaderError", testFetchLoaderError},
	{"FetchMany", testFetchMany},
	{"CorruptAndForeignBytes", testCorrupt},
	{"ValueTooLarge", testTooLarge},
	{"TTLExpiry", testTTLExpiry},
	{"ContextCancel", testContext},
	{"InvalidInput", testInvalidInput},
	{"NewerWriterNotOverwritten", testNewerWriter},
}

func runSuite(t *testing.T, b backend) {
	for _, tc := range suite {
		t.Run(tc.name, func(t *testing.T) {
			s := b.open(t)
			tc.fn(t, s)
		})
	}
}

func newCache(t *testing.T, s store.Store, opts kura.Options) *kura.Cache[Profile] {
	t.Helper()
	c, err := kura.New[Profile](s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testGetSetDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := newCache(t, s, kura.Options{})
	if _, err := c.Get(ctx, "p:1"); !errors.Is(err, kura.ErrNotFound) {
		t.Fatalf("Get of missing key: err = %v, want ErrNotFound", err)
	}
	want := profile(1)
	if err := c.Set(ctx, "p:1", want, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "p:1")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Get = %+v, want %+v", got, want)
	}
	if err := c.Delete(ctx, "p:1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "p:1"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	if _, err := c.Get(ctx, "p:1"); !errors.Is(err, kura.ErrNotFound) {
		t.Fatalf("Get after Delete: err = %v", err)
	}
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 2 {
		t.Fatalf("stats hits=%d misses=%d, want 1 and 2", st.Hits, st.Misses)
	}
	if st.BytesWritten == 0 || st.BytesWrittenRaw == 0 || st.BytesWritten > st.BytesWrittenRaw+64 {
		t.Fatalf("byte counters look wrong: written %d raw %d", st.BytesWritten, st.BytesWrittenRaw)
	}
	if h := st.Latency[kura.OpGet]; h.Count != 3 {
		t.Fatalf("get latency count = %d, want 3", h.Count)
	}
}

func testMany(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := newCache(t, s, kura.Options{})
	items := map[string]Profile{}
	var keys []string
	for i := 0; i < 300; i++ {
		k := fmt.Sprintf("many:%d", i)
		keys = append(keys, k)
		if i%3 != 0 {
			items[k] = profile(i)
		}
	}
	if err := c.SetMany(ctx, items, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetMany(ctx, append(keys, keys[:10]...)) // duplicates too
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(items) {
		t.Fatalf("GetMany returned %d values, want %d", len(got), len(items))
	}
	for k, v := range items {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Fatalf("GetMany[%s] = %+v, want %+v", k, got[k], v)
		}
	}
	if err := c.DeleteMany(ctx, keys); err != nil {
		t.Fatal(err)
	}
	got, err = c.GetMany(ctx, keys)
	if err != nil || len(got) != 0 {
		t.Fatalf("after DeleteMany: %d values, err %v", len(got), err)
	}
}

func testFetchLoadsOnce(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := newCache(t, s, kura.Options{})
	var calls atomic.Int32
	load := func(ctx context.Context, key string) (Profile, error) {
		calls.Add(1)
		return profile(7), nil
	}
	for i := 0; i < 3; i++ {
		v, err := c.Fetch(ctx, "fetch:7", time.Minute, load)
		if err != nil || v.ID != 7 {
			t.Fatalf("Fetch = %+v, %v", v, err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("loader ran %d times, want 1", n)
	}
	if st := c.Stats(); st.LoaderCalls != 1 || st.Hits < 2 {
		t.Fatalf("stats: loads %d hits %d", st.LoaderCalls, st.Hits)
	}
}

func testFetchSingleflight(t *testing.T, s store.Store) {
	ctx := context.Background()
	// A generous StoreTimeout: this test is about sharing one load, and
	// on a loaded machine (-race, 100 goroutines) a lease read can outlast
	// the default budget, fail open and load on its own, as documented
	// (Stats.LeaseFailOpen); the budget has its own tests.
	c := newCache(t, s, kura.Options{StoreTimeout: 10 * time.Second})
	const n = 100
	var calls atomic.Int32
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	load := func(ctx context.Context, key string) (Profile, error) {
		calls.Add(1)
		<-release
		return profile(9), nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			v, err := c.Fetch(ctx, "sf:9", time.Minute, load)
			if err == nil && v.ID != 9 {
				err = fmt.Errorf("got %+v", v)
			}
			errs <- err
		}()
	}
	started.Wait()
	// Let the callers reach the flight. Late arrivals are still correct:
	// the flight re-reads the cache before loading.
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("loader ran %d times under %d concurrent Fetches, want 1", got, n)
	}
}

func testFetchNegative(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := newCache(t, s, kura.Options{NegativeTTL: time.Minute})
	var calls atomic.Int32
	load := func(ctx context.Context, key string) (Profile, error) {
		calls.Add(1)
		return Profile{}, fmt.Errorf("row %s: %w", key, kura.ErrNotFound)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.Fetch(ctx, "neg:1", time.Minute, load); !errors.Is(err, kura.ErrNotFound) {
			t.Fatalf("Fetch of absent key: err = %v, want ErrNotFound", err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("loader ran %d times for an absent key, want 1 (negative caching)", n)
	}
	if _, err := c.Get(ctx, "neg:1"); !errors.Is(err, kura.ErrNotFound) {
		t.Fatalf("Get of negatively cached key: %v", err)
	}
	if st := c.Stats(); st.NegativeHits < 2 {
		t.Fatalf("negative hits = %d", st.NegativeHits)
	}

	// NegativeTTL < 0 disables it.
	off := newCache(t, s, kura.Options{NegativeTTL: -1})
	calls.Store(0)
	for i := 0; i < 2; i++ {
		_, _ = off.Fetch(ctx, "neg:2", time.Minute, load)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("with negative caching off the loader ran %d times, want 2", n)
	}
}

func testFetchLoaderError(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := newCache(t, s, kura.Options{})
	boom := errors.New("db down")
	var calls atomic.Int32
	load := func(ctx context.Context, key string) (Profile, error) {
		calls.Add(1)
		return Profile{}, boom
	}
	for i := 0; i < 2; i++ {
		if _, err := c.Fetch(ctx, "err:1", time.Minute, load); !errors.Is(err, boom) {
			t.Fatalf("err = %v, want the loader's error", err)
		}
	}
	if calls.Load() != 2 {
		t.Fatal("a loader error must not be cached")
	}
	if st := c.Stats(); st.LoaderErrors != 2 {
		t.Fatalf("loader errors = %d", st.LoaderErrors)
	}
}

func testFetchMany(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := newCache(t, s, kura.Options{})
	var keys []string
	for i := 0; i < 100; i++ {
		keys = append(keys, fmt.Sprintf("fm:%d", i))
	}
	// Half are cached already.
	warm := map[string]Profile{}
	for i := 0; i < 100; i += 2 {
		warm[keys[i]] = profile(i)
	}
	if err := c.SetMany(ctx, warm, time.Minute); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	var asked []string
	load := func(ctx context.Context, missing []string) (map[string]Profile, error) {
		calls.Add(1)
		asked = append([]string(nil), missing...)
		out := map[string]Profile{}
		for _, k := range missing {
			var i int
			fmt.Sscanf(k, "fm:%d", &i)
			if i%10 == 1 { // these rows do not exist
				continue
			}
			out[k] = profile(i)
		}
		return out, nil
	}
	got, err := c.FetchMany(ctx, keys, time.Minute, load)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || len(asked) != 50 {
		t.Fatalf("loader called %d times with %d keys; want once with the 50 misses", calls.Load(), len(asked))
	}
	if len(got) != 90 {
		t.Fatalf("FetchMany returned %d values, want 90 (10 do not exist)", len(got))
	}
	for k, v := range got {
		if k != fmt.Sprintf("fm:%d", v.ID) {
			t.Fatalf("key %s holds record %d", k, v.ID)
		}
	}
	// Everything, including the absent keys, is now cached.
	got, err = c.FetchMany(ctx, keys, time.Minute, load)
	if err != nil || len(got) != 90 || calls.Load() != 1 {
		t.Fatalf("second FetchMany: %d values, err %v, loader calls %d", len(got), err, calls.Load())
	}
}

func testCorrupt(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := newCache(t, s, kura.Options{})
	foreign := map[string][]byte{
		"plain":   []byte("hello world"),
		"json":    []byte(`{"id":1,"name":"x"}`),
		"empty":   {},
		"goredis": {0x01, 0x8a, 0x12, 0x00, 0x00}, // go-redis/cache's s2 marker, then junk
		"binary":  {0xff, 0x00, 0xfe, 0x01, 0x02},
	}
	for name, raw := range foreign {
		key := "corrupt:" + name
		if err := s.Set(ctx, key, raw, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, key); !errors.Is(err, kura.ErrMalformed) {
			t.Fatalf("%s: Get err = %v, want ErrMalformed", name, err)
		}
		v, err := c.Fetch(ctx, key, time.Minute, func(ctx context.Context, key string) (Profile, error) {
			return profile(3), nil
		})
		if err != nil || v.ID != 3 {
			t.Fatalf("%s: Fetch over corrupt bytes = %+v, %v; want the loaded value", name, v, err)
		}
		// The fill overwrote the bad entry.
		if v, err := c.Get(ctx, key); err != nil || v.ID != 3 {
			t.Fatalf("%s: after refill Get = %+v, %v", name, v, err)
		}
	}
	if st := c.Stats(); st.DecodeErrors < uint64(2*len(foreign)) {
		t.Fatalf("decode errors = %d, want >= %d", st.DecodeErrors, 2*len(foreign))
	}
}

func testTooLarge(t *testing.T, s store.Store) {
	ctx := context.Background()
	var warned []string
	c := newCache(t, s, kura.Options{MaxValueSize: 4096, WarnValueSize: 1024,
		OnLargeValue: func(key string, size int) { warned = append(warned, key) }})
	big := profile(1)
	big.Bio = strings.Repeat("x", 1<<20) // compresses well, so make it random-ish
	for i := range 20000 {
		big.Tags = append(big.Tags, fmt.Sprintf("%x", i*2654435761))
	}
	err := c.Set(ctx, "big", big, time.Minute)
	if !errors.Is(err, kura.ErrValueTooLarge) || !strings.Contains(err.Error(), `"big"`) {
		t.Fatalf("Set of a huge value: err = %v, want ErrValueTooLarge naming the key", err)
	}
	if _, err := s.Get(ctx, "big"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused value reached the store: %v", err)
	}
	// Fetch still returns the loaded value; it just is not cached.
	v, err := c.Fetch(ctx, "big", time.Minute, func(context.Context, string) (Profile, error) { return big, nil })
	if err != nil || v.ID != 1 {
		t.Fatalf("Fetch of an uncacheable value: %v", err)
	}
	mid := profile(2)
	mid.Tags = nil
	for i := range 150 {
		mid.Tags = append(mid.Tags, fmt.Sprintf("%x", i*2654435761))
	}
	if err := c.Set(ctx, "mid", mid, time.Minute); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.RejectedValues != 2 || st.LargeValues != 1 || len(warned) != 1 {
		t.Fatalf("rejected=%d large=%d warned=%v", st.RejectedValues, st.LargeValues, warned)
	}
}

func testTTLExpiry(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := newCache(t, s, kura.Options{})
	if err := c.Set(ctx, "ttl:short", profile(1), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "ttl:long", profile(2), time.Hour); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Get(ctx, "ttl:short")
		if errors.Is(err, kura.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a 1s TTL did not expire within 10s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := c.Get(ctx, "ttl:long"); err != nil {
		t.Fatalf("a 1h TTL expired: %v", err)
	}
}

func testContext(t *testing.T, s store.Store) {
	// LoadTimeout ends the loads the callers below give up on.
	c := newCache(t, s, kura.Options{LoadTimeout: 100 * time.Millisecond})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Fetch(cancelled, "ctx:1", time.Minute, func(ctx context.Context, key string) (Profile, error) {
		return profile(1), nil
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch with a cancelled context: err = %v", err)
	}

	// A deadline that ends while the loader runs: the caller gets its
	// context's error; the load itself is bounded by LoadTimeout.
	ctx, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	loadErr := make(chan error, 1)
	_, err := c.Fetch(ctx, "ctx:2", time.Minute, func(ctx context.Context, key string) (Profile, error) {
		<-ctx.Done()
		loadErr <- ctx.Err()
		return Profile{}, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch past its deadline: err = %v", err)
	}
	if err := <-loadErr; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the abandoned load ended with %v, want LoadTimeout's deadline", err)
	}

	// A follower whose leader gives up still gets the shared load's value.
	// Its own Cache: the load below outlives 100 ms on a loaded machine, and
	// LoadTimeout ending it is the part above, not this one.
	c = newCache(t, s, kura.Options{LoadTimeout: time.Minute})
	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	inLoad, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Fetch(leaderCtx, "ctx:3", time.Minute, func(ctx context.Context, key string) (Profile, error) {
			close(inLoad)
			<-release
			return profile(33), ctx.Err()
		})
		done <- err
	}()
	<-inLoad
	follower := make(chan Profile, 1)
	followerErr := make(chan error, 1)
	shared := c.Stats().Shared
	go func() {
		v, err := c.Fetch(context.Background(), "ctx:3", time.Minute, func(ctx context.Context, key string) (Profile, error) {
			return profile(34), nil
		})
		follower <- v
		followerErr <- err
	}()
	for c.Stats().Shared == shared {
		time.Sleep(time.Millisecond)
	}
	cancelLeader()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader err = %v", err)
	}
	close(release)
	if v, err := <-follower, <-followerErr; v.ID != 33 || err != nil {
		t.Fatalf("follower got %+v, %v after its leader was cancelled, want the shared load's value", v, err)
	}
}

func testInvalidInput(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := newCache(t, s, kura.Options{})
	if err := c.Set(ctx, "", profile(1), time.Minute); !errors.Is(err, kura.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	if err := c.Set(ctx, "k", profile(1), -time.Second); err == nil {
		t.Fatal("negative TTL accepted")
	}
	if _, err := c.FetchMany(ctx, []string{"a", ""}, time.Minute, func(context.Context, []string) (map[string]Profile, error) {
		return nil, nil
	}); !errors.Is(err, kura.ErrInvalidKey) {
		t.Fatalf("FetchMany with an empty key: %v", err)
	}
	if _, err := kura.New[Profile](s, kura.Options{TTLJitter: 2}); err == nil || !strings.Contains(err.Error(), "TTLJitter") {
		t.Fatalf("bad TTLJitter: %v", err)
	}
	if _, err := kura.New[Profile](nil, kura.Options{}); err == nil {
		t.Fatal("nil store accepted")
	}
}
