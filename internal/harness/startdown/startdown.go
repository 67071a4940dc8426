// Package startdown is the test harness for a Cache whose store started
// while its servers were down: it checks that Fetch and FetchMany are
// answered by the loader, without an error, and waits until hits resume.
// Used by the tests of redisstore and memcache (issue: "a service starts
// while its cache is down").
package startdown

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
)

// Loader counts its calls and returns "v:"+key.
type Loader struct{ calls atomic.Int64 }

// Calls returns how many keys were loaded.
func (l *Loader) Calls() int64 { return l.calls.Load() }

// Load is a kura.Loader.
func (l *Loader) Load(_ context.Context, key string) (string, error) {
	l.calls.Add(1)
	return "v:" + key, nil
}

// LoadMany is a kura.ManyLoader.
func (l *Loader) LoadMany(_ context.Context, keys []string) (map[string]string, error) {
	l.calls.Add(int64(len(keys)))
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = "v:" + k
	}
	return out, nil
}

// Health puts store/health in front of s when withHealth is set.
func Health(t *testing.T, s store.Store, withHealth bool) store.Store {
	if !withHealth {
		return s
	}
	hs, err := health.New(s, health.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hs.Close() })
	return hs
}

// ServesFromLoader checks that a Cache on s, whose servers are not
// reachable, answers Fetch and FetchMany with the loader's values and no
// error.
func ServesFromLoader(t *testing.T, c *kura.Cache[string], l *Loader) {
	t.Helper()
	ctx := context.Background()
	v, err := c.Fetch(ctx, "k1", time.Minute, l.Load)
	if err != nil || v != "v:k1" {
		t.Fatalf("Fetch with the server down = %q, %v; want the loader's value and no error", v, err)
	}
	m, err := c.FetchMany(ctx, []string{"k2", "k3"}, time.Minute, l.LoadMany)
	if err != nil || m["k2"] != "v:k2" || m["k3"] != "v:k3" {
		t.Fatalf("FetchMany with the server down = %v, %v; want the loader's values and no error", m, err)
	}
}

// WaitHits waits until a Fetch of a fresh key is answered by the store on
// its second call (the first one loaded and wrote it).
func WaitHits(t *testing.T, c *kura.Cache[string], l *Loader) {
	t.Helper()
	ctx := context.Background()
	n := 0
	servertest.Eventually(t, "hits after the server came up", func() error {
		n++
		key := "after:" + strconv.Itoa(n)
		if _, err := c.Fetch(ctx, key, time.Minute, l.Load); err != nil {
			return err
		}
		before := l.calls.Load()
		v, err := c.Fetch(ctx, key, time.Minute, l.Load)
		if err != nil {
			return err
		}
		if l.calls.Load() != before || v != "v:"+key {
			return fmt.Errorf("second Fetch of %s loaded again (%q)", key, v)
		}
		return nil
	})
}

// Cache returns a Cache of strings on s with zero-valued options.
func Cache(t *testing.T, s store.Store) *kura.Cache[string] {
	t.Helper()
	c, err := kura.New[string](s, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Result is what Measure saw.
type Result struct {
	// Fetches and Errors count the callers' Fetch calls and those that
	// returned an error (the target is 0).
	Fetches, Errors int64
	// FetchesDown and LoadsDown count Fetch calls and loader calls made
	// before the server came up.
	FetchesDown, LoadsDown int64
	// FirstHit is the time from the server's first answer (up returned)
	// to the first Fetch answered by the store without the loader.
	FirstHit time.Duration
}

// Measure runs callers goroutines that each Fetch one of keys keys every
// interval from c, whose store's server is down, for down; then calls up
// (which returns once the server answers) and runs until the first hit
// plus a little, or a minute at most.
func Measure(c *kura.Cache[string], callers, keys int, interval, down time.Duration, up func() error) (Result, error) {
	var (
		res          Result
		loads        atomic.Int64
		fetches      atomic.Int64
		errs         atomic.Int64
		isUp         atomic.Bool
		upAt         atomic.Int64 // unix nanos
		firstHit     atomic.Int64 // unix nanos
		stop         = make(chan struct{})
		wg           sync.WaitGroup
		loadsAtUp    int64
		fetchesAtUp  int64
		hitSeen      = make(chan struct{})
		hitSeenOnce  sync.Once
		ctx          = context.Background()
		upErr        error
		measureLimit = time.Minute
	)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "measure:" + strconv.Itoa(i%keys)
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				loaded := false
				_, err := c.Fetch(ctx, key, time.Minute, func(context.Context, string) (string, error) {
					loaded = true
					loads.Add(1)
					return "v:" + key, nil
				})
				fetches.Add(1)
				if err != nil {
					errs.Add(1)
				}
				if !loaded && err == nil && isUp.Load() {
					if firstHit.CompareAndSwap(0, time.Now().UnixNano()) {
						hitSeenOnce.Do(func() { close(hitSeen) })
					}
				}
			}
		}()
	}
	time.Sleep(down)
	loadsAtUp, fetchesAtUp = loads.Load(), fetches.Load()
	if upErr = up(); upErr == nil {
		upAt.Store(time.Now().UnixNano())
		isUp.Store(true)
		select {
		case <-hitSeen:
			time.Sleep(100 * time.Millisecond)
		case <-time.After(measureLimit):
		}
	}
	close(stop)
	wg.Wait()
	res.Fetches, res.Errors = fetches.Load(), errs.Load()
	res.FetchesDown, res.LoadsDown = fetchesAtUp, loadsAtUp
	if h := firstHit.Load(); h != 0 {
		res.FirstHit = time.Duration(h - upAt.Load())
	} else if upErr == nil {
		upErr = fmt.Errorf("no hit within %v of the server coming up", measureLimit)
	}
	return res, upErr
}

// Scenarios are the three starts the measurements cover.
var Scenarios = []string{"refused", "stalled", "unresolvable"}

// BenchAll runs Bench for every scenario, without and with store/health:
// open makes a store created while its server is down as scenario says,
// and returns the function that brings the server up.
func BenchAll(b *testing.B, open func(b *testing.B, scenario string) (store.Store, func() error)) {
	for _, scenario := range Scenarios {
		for _, withHealth := range []bool{false, true} {
			name := scenario + "/plain"
			if withHealth {
				name = scenario + "/health"
			}
			b.Run(name, func(b *testing.B) {
				Bench(b, withHealth, func(b *testing.B) (store.Store, func() error) { return open(b, scenario) })
			})
		}
	}
}

// Bench runs Measure b.N times, each on a fresh store made by open with
// its server down as scenario says (open returns the store and the
// function that brings the server up), and reports the errors callers
// saw, the share of Fetch calls that loaded while the server was down,
// and the median time from the server's first answer to the first hit.
func Bench(b *testing.B, withHealth bool, open func(b *testing.B) (store.Store, func() error)) {
	var errs, fetchesDown, loadsDown int64
	var hits []time.Duration
	for i := 0; i < b.N; i++ {
		s, up := open(b)
		var st store.Store = s
		if withHealth {
			hs, err := health.New(s, health.Options{})
			if err != nil {
				b.Fatal(err)
			}
			st = hs
		}
		c, err := kura.New[string](st, kura.Options{})
		if err != nil {
			b.Fatal(err)
		}
		r, err := Measure(c, 64, 16, 10*time.Millisecond, 500*time.Millisecond, up)
		if err != nil {
			b.Fatal(err)
		}
		errs += r.Errors
		fetchesDown += r.FetchesDown
		loadsDown += r.LoadsDown
		hits = append(hits, r.FirstHit)
		if hs, ok := st.(*health.Store); ok {
			_ = hs.Close()
		}
		_ = s.Close()
	}
	slices.Sort(hits)
	b.ReportMetric(float64(errs), "errors")
	b.ReportMetric(float64(fetchesDown)/float64(b.N), "fetches-down/run")
	b.ReportMetric(float64(loadsDown)/float64(b.N), "loads-down/run")
	b.ReportMetric(float64(hits[len(hits)/2])/float64(time.Millisecond), "ms-to-first-hit")
	b.ReportMetric(0, "ns/op")
}

// Down takes the server p down as scenario says ("refused": killed;
// "stalled": SIGSTOP; "unresolvable": its name, the returned addr,
// resolves to nothing through the returned resolver) and returns the
// address to give the store, its resolver, and the function that brings
// the server up (returning once it answers).
func Down(tb testing.TB, scenario string, p *servers.Proc) (addr string, res *servertest.Resolver, up func() error) {
	_, port, _ := net.SplitHostPort(p.Addr)
	const name = "cache.kura.test"
	addr = net.JoinHostPort(name, port)
	res = servertest.NewResolver()
	res.Set(name, "127.0.0.1")
	switch scenario {
	case "refused":
		p.Kill()
		up = func() error { return p.Restart(context.Background()) }
	case "stalled":
		if err := p.Pause(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = p.Resume() })
		up = p.Resume
	case "unresolvable":
		res.Unset(name)
		up = func() error { res.Set(name, "127.0.0.1"); return nil }
	default:
		tb.Fatalf("unknown scenario %q", scenario)
	}
	return addr, res, up
}
