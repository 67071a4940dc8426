package health_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	goredis "github.com/redis/go-redis/v9"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/loadgen"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/redisstore"
)

// benchSeconds is the length of each measured phase; KURA_HEALTH_BENCH_SECONDS
// changes it (the figures in BENCHMARKS.md used the default).
func benchSeconds() time.Duration {
	if n, err := strconv.Atoi(os.Getenv("KURA_HEALTH_BENCH_SECONDS")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 20 * time.Second
}

// pin runs pid on CPU 0 only.
func pin(b *testing.B, pid int) {
	out, err := exec.Command("taskset", "-pc", "0", strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		b.Fatalf("taskset: %v: %s", err, out)
	}
}

// timedProber records the latency of every probe the monitor sends.
type timedProber struct {
	*redisstore.Store
	mu   sync.Mutex
	hist *hdrhistogram.Histogram
}

func (p *timedProber) ProbeNode(ctx context.Context, addr string) error {
	start := time.Now()
	err := p.Store.ProbeNode(ctx, addr)
	if err == nil {
		p.mu.Lock()
		_ = p.hist.RecordValue(time.Since(start).Microseconds())
		p.mu.Unlock()
	}
	return err
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) }

func ms(h *hdrhistogram.Histogram, q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }

// BenchmarkSeedPing is the situation of a service that pinged Redis before
// every command: one redis-server pinned to one core and saturated by the
// kura bench engine (50 connections, pipeline 16, GET of 1 KB values), and
// 64 application goroutines that each check health before every GET.
//
//   - seed-ping-per-command: the original design, a PING through the
//     shared connection pool (go-redis, pool of at most 100) before every
//     command with a 200 ms timeout; a PING that fails or times out is a
//     "down" verdict, all of them false (the server never stopped).
//   - kura-monitor: the check is the monitor's state (an atomic load); the
//     monitor probes on its own connection every 100 ms with the default
//     200 ms timeout (kura-monitor-50ms: with a 50 ms timeout); a
//     transition to Down is a false down.
//
// Run with -benchtime=1x; each phase lasts benchSeconds().
func BenchmarkSeedPing(b *testing.B) {
	r := servertest.Redis(b, servers.RedisConfig{})
	pin(b, r.Pid())
	ctx := context.Background()
	d := benchSeconds()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	type loadResult struct {
		res *loadgen.Result
		err error
	}
	loadDone := make(chan loadResult, 1)
	go func() {
		res, err := loadgen.Run(loadCtx, loadgen.Config{Target: r.URL(), Command: loadgen.CmdGet, Connections: 50,
			Pipeline: 16, DataSize: "1000", Keys: 10000, Prefill: true, Duration: 3*d + 10*time.Second})
		loadDone <- loadResult{res, err}
	}()
	time.Sleep(5 * time.Second) // prefill and ramp-up
	key := "key:000000000001"

	b.Run("seed-ping-per-command", func(b *testing.B) {
		// ContextTimeoutEnabled: go-redis ignores context deadlines on the
		// socket otherwise; the seed's service did enforce its 200 ms.
		rdb := goredis.NewClient(&goredis.Options{Addr: r.Addr, PoolSize: 100, MaxRetries: -1,
			ContextTimeoutEnabled: true})
		defer rdb.Close()
		hist := newHist()
		var mu sync.Mutex
		var downs, checks atomic.Int64
		run64(d, func() {
			start := time.Now()
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			err := rdb.Ping(pctx).Err()
			cancel()
			lat := time.Since(start)
			checks.Add(1)
			mu.Lock()
			_ = hist.RecordValue(lat.Microseconds())
			mu.Unlock()
			if err != nil || lat > 200*time.Millisecond {
				downs.Add(1)
				return
			}
			_ = rdb.Get(ctx, key).Err()
		})
		b.ReportMetric(ms(hist, 50), "check-p50-ms")
		b.ReportMetric(ms(hist, 99), "check-p99-ms")
		b.ReportMetric(float64(downs.Load())/d.Minutes(), "false-downs/min")
		b.ReportMetric(float64(checks.Load())/d.Seconds(), "checks/s")
	})

	for _, pt := range []struct {
		name    string
		timeout time.Duration
	}{{"kura-monitor", 0}, {"kura-monitor-50ms", 50 * time.Millisecond}} {
		b.Run(pt.name, func(b *testing.B) {
			rs, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{r.Addr}, FailFast: true})
			if err != nil {
				b.Fatal(err)
			}
			defer rs.Close()
			tp := &timedProber{Store: rs, hist: newHist()}
			var causes sync.Map // why the node went down, for the log
			hs, err := health.New(tp, health.Options{ProbeTimeout: pt.timeout, OnStateChange: func(tr health.Transition) {
				if tr.To == health.Down || tr.To == health.Suspect {
					v, _ := causes.LoadOrStore(fmt.Sprintf("%v (probe %v): %v", tr.To, tr.Probe, tr.Cause), new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
				}
			}})
			if err != nil {
				b.Fatal(err)
			}
			defer hs.Close()
			var checkDowns, checks atomic.Int64
			run64(d, func() {
				checks.Add(1)
				if st, _ := hs.State(r.Addr); st == health.Down {
					checkDowns.Add(1)
				}
				_, _ = hs.Get(ctx, key)
			})
			st := nodeStats(hs, r.Addr)
			causes.Range(func(k, v any) bool {
				b.Logf("%d× %s", v.(*atomic.Int64).Load(), k)
				return true
			})
			tp.mu.Lock()
			b.ReportMetric(float64(tp.hist.Max())/1000, "probe-max-ms")
			b.ReportMetric(ms(tp.hist, 50), "probe-p50-ms")
			b.ReportMetric(ms(tp.hist, 99), "probe-p99-ms")
			tp.mu.Unlock()
			b.ReportMetric(float64(st.Transitions[health.Down])/d.Minutes(), "false-downs/min")
			b.ReportMetric(float64(st.ProbeFailures)/d.Minutes(), "failed-probes/min")
			b.ReportMetric(float64(checkDowns.Load())/d.Minutes(), "checks-seeing-down/min")
			b.ReportMetric(float64(checks.Load())/d.Seconds(), "checks/s")
		})
	}
	stopLoad()
	lr := <-loadDone
	if lr.err != nil {
		b.Fatalf("load: %v", lr.err)
	}
	// A parent of sub-benchmarks prints no metrics: log the load.
	b.Logf("load (kura bench engine, GET 1 KB, 50 connections, pipeline 16): %.0f ops/s, p99 %.2f ms, %d errors, server CPU on one core",
		lr.res.OpsPerSec, lr.res.Latency.P99, lr.res.Errors)
}

// run64 runs fn in a loop on 64 goroutines for d, 1 ms apart.
func run64(d time.Duration, fn func()) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				fn()
				// Each caller then does the rest of its request: 1 ms of
				// other work. Without it a caller whose check says "down"
				// would spin on the fail-fast path and starve the machine.
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
}

// call is one Fetch as a caller saw it.
type call struct {
	start, end time.Time
	loaded     bool
}

// BenchmarkFailOpen measures, for callers arriving at 2,000 Fetch/s over
// a standalone redis-server (1,000 warm keys), the time from SIGSTOP of the server to the
// first caller served by the loader without waiting out StoreTimeout, the
// callers' p99 during the stall, the time from SIGCONT to the first hit
// and the time from a restart after SIGKILL to the first hit: with the
// breaker (kura-breaker) and without it (store-timeout-only: every call
// waits StoreTimeout, today's behaviour without package health).
//
// Run with -benchtime=1x.
func BenchmarkFailOpen(b *testing.B) {
	b.Run("kura-breaker", func(b *testing.B) { failOpen(b, &health.Options{}, 0) })
	b.Run("kura-breaker-fast-probes", func(b *testing.B) {
		failOpen(b, &health.Options{ProbeInterval: 50 * time.Millisecond, ProbeTimeout: 75 * time.Millisecond}, 0)
	})
	b.Run("kura-breaker-storetimeout-100ms", func(b *testing.B) { failOpen(b, &health.Options{}, 100*time.Millisecond) })
	b.Run("store-timeout-only", func(b *testing.B) { failOpen(b, nil, 0) })
}

// failOpen runs the scenario with the breaker (hopts not nil) or without,
// and a Cache with StoreTimeout storeTimeout (0: the default).
func failOpen(b *testing.B, hopts *health.Options, storeTimeout time.Duration) {
	withBreaker := hopts != nil
	r := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	rs, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{r.Addr}, FailFast: true})
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	var st store.Store = rs
	var downAt atomic.Int64
	var upMu sync.Mutex
	var ups []time.Time
	if withBreaker {
		o := *hopts
		o.OnStateChange = func(tr health.Transition) {
			switch tr.To {
			case health.Down:
				downAt.CompareAndSwap(0, tr.At.UnixNano())
			case health.Up:
				upMu.Lock()
				ups = append(ups, tr.At)
				upMu.Unlock()
			}
		}
		hs, err := health.New(rs, o)
		if err != nil {
			b.Fatal(err)
		}
		defer hs.Close()
		st = hs
	}
	c, err := kura.New[string](st, kura.Options{StoreTimeout: storeTimeout})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("failopen:%d", i)
	}
	var mu sync.Mutex
	var calls []call
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Open loop: a new Fetch every 500µs (2,000/s), each on its own
	// goroutine, as requests arrive at a service. With a closed loop every
	// caller would be stuck in a request sent before the node was found
	// down, and the first fail-open could never come before StoreTimeout.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				loaded := false
				start := time.Now()
				_, _ = c.Fetch(ctx, keys[i%len(keys)], 0, func(context.Context, string) (string, error) {
					loaded = true
					return "v", nil
				})
				end := time.Now()
				mu.Lock()
				calls = append(calls, call{start, end, loaded})
				mu.Unlock()
			}()
		}
	}()
	time.Sleep(2 * time.Second) // warm: every key filled
	tStop := time.Now()
	if err := r.Pause(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	tCont := time.Now()
	if err := r.Resume(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	r.Kill()
	time.Sleep(time.Second)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = r.Restart(rctx)
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	tRestart := time.Now()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	slices.SortFunc(calls, func(x, y call) int { return x.end.Compare(y.end) })
	timeout := kura.DefaultStoreTimeout
	if storeTimeout > 0 {
		timeout = storeTimeout
	}
	firstOpen, firstHitCont, firstHitRestart := time.Duration(-1), time.Duration(-1), time.Duration(-1)
	stall := newHist()
	for _, cl := range calls {
		dur := cl.end.Sub(cl.start)
		if !cl.start.Before(tStop) && cl.start.Before(tCont) {
			_ = stall.RecordValue(dur.Microseconds())
			if firstOpen < 0 && cl.loaded && dur < timeout/5 {
				firstOpen = cl.end.Sub(tStop)
			}
		}
		if firstHitCont < 0 && !cl.start.Before(tCont) && !cl.loaded {
			firstHitCont = cl.end.Sub(tCont)
		}
		if firstHitRestart < 0 && !cl.start.Before(tRestart) && !cl.loaded {
			firstHitRestart = cl.end.Sub(tRestart)
		}
	}
	report := func(d time.Duration, unit string) {
		if d < 0 {
			b.ReportMetric(-1, unit) // never happened in the window
			return
		}
		b.ReportMetric(float64(d.Microseconds())/1000, unit)
	}
	report(firstOpen, "sigstop-to-fail-open-ms")
	if withBreaker {
		report(time.Unix(0, downAt.Load()).Sub(tStop), "sigstop-to-down-ms")
		upMu.Lock()
		upAfter := func(t time.Time) time.Duration {
			for _, u := range ups {
				if u.After(t) {
					return u.Sub(t)
				}
			}
			return -1
		}
		report(upAfter(tCont), "sigcont-to-up-ms")
		report(upAfter(tRestart), "restart-to-up-ms")
		upMu.Unlock()
	}
	b.ReportMetric(ms(stall, 50), "stall-p50-ms")
	b.ReportMetric(ms(stall, 99), "stall-p99-ms")
	report(firstHitCont, "sigcont-to-hit-ms")
	report(firstHitRestart, "restart-to-hit-ms")
}
