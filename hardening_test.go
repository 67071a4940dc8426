package kura_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/hexfile"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/redisstore"
)

// waitGoroutines waits (up to 10 s) for the goroutine count to fall back to
// at most n, and fails with a dump otherwise: a leak check, not a timing
// assertion.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines leaked: %d, want <= %d\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLoaderPanicUnderHTTP: a loader that panics (a nil-map write) inside
// Fetch, under a real net/http server with the usual recover middleware,
// costs that request a 500 and nothing else: the process lives, callers
// that shared the load get an error, the next Fetch works, no goroutine is
// left behind. (With x/sync's singleflight the panic was re-raised on a
// goroutine of its own and ended the process.)
func TestLoaderPanicUnderHTTP(t *testing.T) {
	ms, _ := memstore.New(memstore.Options{})
	defer ms.Close()
	c := newCache(t, ms, kura.Options{})
	before := runtime.NumGoroutine()

	release := make(chan struct{})
	var calls atomic.Int32
	loader := func(ctx context.Context, key string) (Profile, error) {
		if calls.Add(1) == 1 {
			<-release
			var m map[string]int
			//lint:ignore SA5000 the nil-map write is the panic under test
			m["boom"]++
		}
		return profile(9), nil
	}
	recoverMW := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if p := recover(); p != nil {
					if !errors.Is(p.(error), kura.ErrLoaderPanicked) {
						t.Errorf("recovered %v; want a value matching ErrLoaderPanicked", p)
					}
					http.Error(w, "internal error", http.StatusInternalServerError)
				}
			}()
			h.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(recoverMW(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := c.Fetch(r.Context(), "p:1", time.Minute, loader)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprint(w, v.Name)
	})))
	defer srv.Close()

	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Error(err)
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	// Joiners: Fetches of the same key while the first load is stuck.
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	var joinedErrs, values atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Fetch(context.Background(), "p:1", time.Minute, loader)
			switch {
			case errors.Is(err, kura.ErrLoaderPanicked):
				joinedErrs.Add(1)
			case err == nil:
				values.Add(1) // started a later load of its own
			default:
				t.Errorf("joiner: %v", err)
			}
		}()
	}
	for c.Stats().Shared < 1 {
		time.Sleep(time.Millisecond) // at least one joiner is waiting on the stuck load
	}
	close(release)
	if code := <-first; code != http.StatusInternalServerError {
		t.Fatalf("request whose loader panicked: status %d, want 500", code)
	}
	wg.Wait()
	if joinedErrs.Load() == 0 {
		t.Fatal("no caller that shared the panicking load got ErrLoaderPanicked")
	}
	// The next request works.
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != profile(9).Name {
		t.Fatalf("after the panic: %d %q", resp.StatusCode, body)
	}
	if st := c.Stats(); st.LoaderPanics != 1 {
		t.Fatalf("LoaderPanics = %d, want 1", st.LoaderPanics)
	}
	srv.Close()
	http.DefaultClient.CloseIdleConnections()
	waitGoroutines(t, before)
}

// TestFetchManyLoaderPanic: FetchMany calls its loader in the caller's
// goroutine, so a panic is the caller's to recover, and the Cache works
// afterwards.
func TestFetchManyLoaderPanic(t *testing.T) {
	ms, _ := memstore.New(memstore.Options{})
	defer ms.Close()
	c := newCache(t, ms, kura.Options{})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the loader's panic did not reach the caller")
			}
		}()
		_, _ = c.FetchMany(context.Background(), []string{"a", "b"}, time.Minute, func(context.Context, []string) (map[string]Profile, error) {
			var m map[string]Profile
			//lint:ignore SA5000 the nil-map write is the panic under test
			m["a"] = profile(1)
			return m, nil
		})
	}()
	got, err := c.FetchMany(context.Background(), []string{"a", "b"}, time.Minute, func(context.Context, []string) (map[string]Profile, error) {
		return map[string]Profile{"a": profile(1), "b": profile(2)}, nil
	})
	if err != nil || len(got) != 2 {
		t.Fatalf("FetchMany after a panic = %v, %v", got, err)
	}
}

// TestFetchCallerCancelDoesNotCancelSharedLoad: the first caller gives up;
// the load it started goes on, on a context that was not cancelled, and
// the caller that joined gets the value.
func TestFetchCallerCancelDoesNotCancelSharedLoad(t *testing.T) {
	ms, _ := memstore.New(memstore.Options{})
	defer ms.Close()
	c := newCache(t, ms, kura.Options{})
	release := make(chan struct{})
	started := make(chan struct{})
	var loadCtxErr atomic.Value
	loader := func(ctx context.Context, key string) (Profile, error) {
		close(started)
		<-release
		loadCtxErr.Store(fmt.Sprint(ctx.Err()))
		return profile(3), nil
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() {
		_, err := c.Fetch(ctxA, "k", time.Minute, loader)
		errA <- err
	}()
	<-started
	resB := make(chan error, 1)
	go func() {
		v, err := c.Fetch(context.Background(), "k", time.Minute, loader)
		if err == nil && v.ID != 3 {
			err = fmt.Errorf("got %+v", v)
		}
		resB <- err
	}()
	for c.Stats().Shared < 1 {
		time.Sleep(time.Millisecond)
	}
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v, want context.Canceled", err)
	}
	close(release)
	if err := <-resB; err != nil {
		t.Fatalf("caller that joined: %v", err)
	}
	if got := loadCtxErr.Load(); got != "<nil>" {
		t.Fatalf("the shared load's context was %v when the first caller cancelled", got)
	}
	if v, err := c.Get(context.Background(), "k"); err != nil || v.ID != 3 {
		t.Fatalf("the shared load's value was not cached: %+v, %v", v, err)
	}
}

// TestInterfaceValueNilLoader: a Cache of an interface type whose loader
// returns (nil, nil) caches and returns nil instead of panicking.
func TestInterfaceValueNilLoader(t *testing.T) {
	ms, _ := memstore.New(memstore.Options{})
	defer ms.Close()
	ctx := context.Background()
	ca, err := kura.New[any](ms, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kura.New[fmt.Stringer](ms, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // a miss, then a hit
		v, err := ca.Fetch(ctx, "any", time.Minute, func(context.Context, string) (any, error) { return nil, nil })
		if err != nil || v != nil {
			t.Fatalf("round %d: Cache[any].Fetch = %v, %v", i, v, err)
		}
		s, err := cs.Fetch(ctx, "stringer", time.Minute, func(context.Context, string) (fmt.Stringer, error) { return nil, nil })
		if err != nil || s != nil {
			t.Fatalf("round %d: Cache[fmt.Stringer].Fetch = %v, %v", i, s, err)
		}
	}
	m, err := ca.FetchMany(ctx, []string{"x", "y"}, time.Minute, func(context.Context, []string) (map[string]any, error) {
		return map[string]any{"x": nil}, nil
	})
	if err != nil || len(m) != 1 || m["x"] != nil {
		t.Fatalf("Cache[any].FetchMany = %v, %v", m, err)
	}
}

// TestDefaultsFailFastOnStalledServer: with Options{} (the README quick
// start), a redis-server stopped with SIGSTOP does not hold a Fetch: the
// loader's value comes back before the server is resumed, and the
// write-back does not wait a second time (the call's store budget is
// spent, so it is skipped and counted).
func TestDefaultsFailFastOnStalledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	c := newCache(t, redisBackend(srv.URL)(t), kura.Options{})
	ctx := context.Background()
	if _, err := c.Fetch(ctx, "warm", time.Hour, func(context.Context, string) (Profile, error) { return profile(1), nil }); err != nil {
		t.Fatal(err)
	}
	stalled(t, srv, func() {
		start := time.Now()
		v, err := c.Fetch(ctx, "stalled", time.Hour, func(context.Context, string) (Profile, error) { return profile(2), nil })
		took := time.Since(start)
		if err != nil || v.ID != 2 {
			t.Fatalf("Fetch against a stalled server = %+v, %v; want the loader's value", v, err)
		}
		if bound := 10 * kura.DefaultStoreTimeout; took > bound {
			t.Fatalf("Fetch took %v against a stalled server; the default budget is %v (bound %v)", took, kura.DefaultStoreTimeout, bound)
		}
		if st := c.Stats(); st.BudgetSkips == 0 {
			t.Fatalf("the write-back was not skipped after the read spent the budget: %+v", st)
		}
		got, err := c.FetchMany(ctx, []string{"s:1", "s:2"}, time.Hour, func(_ context.Context, keys []string) (map[string]Profile, error) {
			return map[string]Profile{"s:1": profile(1), "s:2": profile(2)}, nil
		})
		if err != nil || len(got) != 2 {
			t.Fatalf("FetchMany against a stalled server = %v, %v", got, err)
		}
	})
}

// TestRefusedConnectionIsNotRetried: while Redis refuses connections, a
// Fetch costs one dial for its read, not a retry loop with back-off, and
// serves the loader's value.
func TestRefusedConnectionIsNotRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	var dials atomic.Int64
	ctx := context.Background()
	st, err := redisstore.NewFromURL(ctx, srv.URL(), redisstore.Options{Configure: func(co *rueidis.ClientOption) {
		co.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, "tcp", addr)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := newCache(t, st, kura.Options{NegativeTTL: -1})
	srv.Stop() // the port now refuses connections
	before := dials.Load()
	const n = 20
	for i := range n {
		v, err := c.Fetch(ctx, fmt.Sprintf("refused:%d", i), time.Hour, func(context.Context, string) (Profile, error) { return profile(i), nil })
		if err != nil || v.ID != i {
			t.Fatalf("Fetch %d against a refused port = %+v, %v", i, v, err)
		}
	}
	perFetch := float64(dials.Load()-before) / n
	t.Logf("dials per Fetch against a refused port: %.2f", perFetch)
	if perFetch > 3 { // read + write-back, one dial each; retries would add 2 per call
		t.Fatalf("%.1f dials per Fetch against a refused port: reads are being retried", perFetch)
	}
}

// TestHostileValuesOnRedis: every value of testdata/hostile, written under
// a key of a real redis-server, is a miss for readers of every kind (Get
// says ErrMalformed, Fetch serves the loader) and the process survives.
func TestHostileValuesOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	st := redisBackend(srv.URL)(t)
	ctx := context.Background()
	files, _ := filepath.Glob("testdata/hostile/*-bomb.hex")
	if len(files) == 0 {
		t.Fatal("no hostile corpus")
	}
	ca, _ := kura.New[any](st, kura.Options{})
	cm, _ := kura.New[map[string]any](st, kura.Options{})
	ci, _ := kura.New[[]int](st, kura.Options{})
	for _, f := range files {
		b, err := hexfile.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		key := "hostile:" + filepath.Base(f)
		if err := st.Set(ctx, key, b, time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.Get(ctx, key); !errors.Is(err, kura.ErrMalformed) {
			t.Errorf("%s: Cache[any].Get = %v, want ErrMalformed", key, err)
		}
		if _, err := cm.Get(ctx, key); !errors.Is(err, kura.ErrMalformed) {
			t.Errorf("%s: Cache[map[string]any].Get = %v, want ErrMalformed", key, err)
		}
		v, err := ci.Fetch(ctx, key, time.Hour, func(context.Context, string) ([]int, error) { return []int{1, 2}, nil })
		if err != nil || len(v) != 2 {
			t.Errorf("%s: Cache[[]int].Fetch = %v, %v; want the loader's value", key, v, err)
		}
	}
}
