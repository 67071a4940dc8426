package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/redis/rueidis"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/loadgen"
	"github.com/kuracache/kura/store/redisstore"
)

// pingThreshold is the field report's rule: a PING slower than this means
// "Redis cannot answer quickly", and the request goes to the database.
const pingThreshold = 200 * time.Millisecond

// healthCallers is the number of application goroutines.
const healthCallers = 8

var (
	errMonitorNotBuilt = errors.New("kura's per-node monitor is not built yet")
	errScanNotBuilt    = errors.New("kura scan is not built yet")
)

func healthScenario() scenario {
	return scenario{
		name:    "health",
		title:   "Health checks under load",
		problem: "A service PINGs Redis before every request through its shared connection pool and treats a slow PONG as \"Redis is down\"; under load the PINGs queue behind real traffic, time out, and send healthy requests to the database.",
		answer:  "kura's per-node monitor probes each node on a connection of its own, one probe at a time, so application traffic never waits for a health check; the table shows, under the same background load for both, how many PINGs each sent and how often each judged the busy node down.",
		needs:   []string{"redis"},
		run:     runHealth,
	}
}

// healthPhase is what the application's callers saw in one phase.
type healthPhase struct {
	name        string
	kura        bool
	requests    int64
	pings       int64 // PINGs the server received from the application
	gets        int64 // GETs the server received from the application
	down        int64 // "down" verdicts (per-request: slow PINGs; monitor: entries into Down)
	fallbacks   int64 // requests answered by the loader (the database)
	pingHist    *hdrhistogram.Histogram
	requestHist *hdrhistogram.Histogram
	loadOps     float64
	loadNetMBps float64
}

// healthApp is one way the application checks health and reads.
type healthApp struct {
	name string
	kura bool
	// request serves one request; it reports whether it PINGed (and how
	// long that took), and whether it went to the database.
	request func(ctx context.Context, i int) (pingTook time.Duration, pinged, fellBack bool, err error)
	// downs counts "down" verdicts so far.
	downs func() int64
}

func runHealth(ctx context.Context, env *Env, res *Result) error {
	size := env.cfg.Size
	proxy, err := faults.NewProxy(env.redis.Addr, faults.ProxyOptions{Protocol: faults.RESP})
	if err != nil {
		return err
	}
	defer proxy.Close()
	const keys = 500
	value := strings.Repeat("cached page fragment ", 500) // ~10 KB
	loader := func(fellBack *bool) kura.Loader[string] {
		return func(context.Context, string) (string, error) { *fellBack = true; return value, nil }
	}

	// Before: a PING through the shared client before every request.
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{proxy.Addr()},
		DisableCache: true, ForceSingleClient: true})
	if err != nil {
		return err
	}
	defer client.Close()
	shared, err := kura.New[string](redisstore.NewFromClient(client), kura.Options{Name: "health-ping", TTL: time.Hour})
	if err != nil {
		return err
	}
	for i := range keys {
		if err := shared.Set(ctx, fmt.Sprintf("page:%d", i), value, 0); err != nil {
			return err
		}
	}
	var slowPings atomic.Int64
	apps := []healthApp{{name: "PING before every request, shared pool",
		request: func(ctx context.Context, i int) (time.Duration, bool, bool, error) {
			t0 := time.Now()
			pctx, cancel := context.WithTimeout(ctx, pingThreshold)
			perr := client.Do(pctx, client.B().Ping().Build()).Error()
			cancel()
			took := time.Since(t0)
			if perr != nil || took > pingThreshold {
				slowPings.Add(1)
				return took, true, true, nil // "Redis is down": the database answers
			}
			var fellBack bool
			_, err := shared.Fetch(ctx, fmt.Sprintf("page:%d", i%keys), 0, loader(&fellBack))
			return took, true, fellBack, err
		},
		downs: slowPings.Load,
	}}

	// After: kura's per-node monitor, no PING on the request path.
	mon, err := newMonitored(ctx, proxy.Addr())
	switch {
	case errors.Is(err, errMonitorNotBuilt):
		res.Missing = append(res.Missing, "kura's per-node monitor (one probe at a time on a dedicated connection; up/suspect/down with a circuit breaker) is not built yet, so its half of the comparison (monitor probes, false \"down\" verdicts, what callers see when the server stalls) is not shown")
	case err != nil:
		return err
	default:
		defer mon.Close()
		monCache, err := kura.New[string](mon, kura.Options{Name: "health-monitor", TTL: time.Hour})
		if err != nil {
			return err
		}
		apps = append(apps, healthApp{name: "kura per-node monitor", kura: true,
			request: func(ctx context.Context, i int) (time.Duration, bool, bool, error) {
				var fellBack bool
				_, err := monCache.Fetch(ctx, fmt.Sprintf("page:%d", i%keys), 0, loader(&fellBack))
				return 0, false, fellBack, err
			},
			downs: mon.downs,
		})
	}

	// Both rows run under the same background load: an open loop at a
	// fixed rate, half of what the load generator reaches alone on this
	// machine, rather than a closed loop whose rate depends on how much
	// CPU the application under test leaves it.
	fmt.Fprintf(env.progress, "  measuring what the load generator reaches alone (1s) ...\n")
	cal, err := loadgen.Run(ctx, healthLoad(env, time.Second, 0))
	if err != nil {
		return fmt.Errorf("load generator: %w", err)
	}
	rate := 0.5 * cal.OpsPerSec
	var loaded, stalled []*healthPhase
	for _, app := range apps {
		fmt.Fprintf(env.progress, "  %s: %v with a load generator sending %.0f GET/s of 10 KB to the redis-server ...\n", app.name, size.LoadDuration, rate)
		p, err := runHealthPhase(ctx, env, proxy, app, size.LoadDuration, rate)
		if err != nil {
			return err
		}
		loaded = append(loaded, p)
	}
	for i, app := range apps {
		if i > 0 {
			time.Sleep(time.Second) // let the monitor see the node up again
		}
		fmt.Fprintf(env.progress, "  %s: the server stops answering for %v ...\n", app.name, size.StallDuration)
		proxy.Stall()
		p, err := runHealthPhase(ctx, env, proxy, app, size.StallDuration, 0)
		proxy.Unstall()
		if err != nil {
			return err
		}
		stalled = append(stalled, p)
	}

	t := Table{Title: fmt.Sprintf("Under the same load: a load generator sends %.0f GET/s of 10 KB (half of what it reached alone) while the application serves requests", rate),
		Columns: []string{"health check", "requests", "PINGs sent", "PING p50", "PING p99", "PING max",
			"judged down", "request p99", "load on the server"}}
	pingChart := Chart{Title: "PINGs the application sent, under load", Unit: "PINGs"}
	downChart := Chart{Title: "False \"down\" verdicts, under load", Unit: "verdicts"}
	for _, p := range loaded {
		pings := []string{"-", "-", "-"}
		if p.pingHist.TotalCount() > 0 {
			pings = []string{usRound(p.pingHist.ValueAtQuantile(50)), usRound(p.pingHist.ValueAtQuantile(99)), usRound(p.pingHist.Max())}
		}
		t.Rows = append(t.Rows, []string{p.name, fmt.Sprint(p.requests), fmt.Sprint(p.pings), pings[0], pings[1], pings[2],
			fmt.Sprint(p.down), usRound(p.requestHist.ValueAtQuantile(99)),
			fmt.Sprintf("%.0f GET/s, %.0f MB/s out", p.loadOps, p.loadNetMBps)})
		pingChart.Bars = append(pingChart.Bars, Bar{Label: shortHealth(p.name), Value: float64(p.pings), Kura: p.kura})
		downChart.Bars = append(downChart.Bars, Bar{Label: shortHealth(p.name), Value: float64(p.down), Kura: p.kura})
		key := "per_request"
		if p.kura {
			key = "monitor"
		}
		res.count(key+".requests", p.requests)
		res.count(key+".pings", p.pings)
		res.count(key+".gets", p.gets)
		res.count(key+".false_down", p.down)
	}
	st := Table{Title: fmt.Sprintf("The server stalls for %v (nothing answers): what callers saw", size.StallDuration),
		Columns: []string{"health check", "requests", "request p50", "request p99", "answered by the fallback loader", "judged down"}}
	stallChart := Chart{Title: "Stalled server: request p99", Unit: "ms"}
	for _, p := range stalled {
		st.Rows = append(st.Rows, []string{p.name, fmt.Sprint(p.requests), usRound(p.requestHist.ValueAtQuantile(50)),
			usRound(p.requestHist.ValueAtQuantile(99)), fmt.Sprint(p.fallbacks), fmt.Sprint(p.down)})
		stallChart.Bars = append(stallChart.Bars, Bar{Label: shortHealth(p.name), Value: float64(p.requestHist.ValueAtQuantile(99)) / 1000, Kura: p.kura})
		key := "per_request"
		if p.kura {
			key = "monitor"
		}
		res.count(key+".stall.requests", p.requests)
		res.count(key+".stall.fallbacks", p.fallbacks)
	}
	res.Tables = append(res.Tables, t, st)
	res.Charts = append(res.Charts, pingChart, downChart, stallChart)
	res.Headline = fmt.Sprintf("PING before every request: %d PINGs for %d requests, PING p99 %s under load; server stalled (fallback: an in-process loader, no database): request p99 %s",
		loaded[0].pings, loaded[0].requests, usRound(loaded[0].pingHist.ValueAtQuantile(99)), usRound(stalled[0].requestHist.ValueAtQuantile(99)))
	if len(loaded) == 2 {
		res.Headline += fmt.Sprintf("; kura's monitor: %d PINGs, %d false \"down\" (per-request PINGs: %d), stalled p99 %s",
			loaded[1].pings, loaded[1].down, loaded[0].down, usRound(stalled[1].requestHist.ValueAtQuantile(99)))
		before, after := loaded[0], loaded[1]
		res.note("%s", healthVerdict(before, after))
		res.Checks = append(res.Checks,
			Check{What: "PINGs the server answered for the application, under load", Before: before.pings, After: after.pings, Want: "less"},
			Check{What: "requests answered while the server stalled (same time, same callers; the fallback is an in-process loader)", Before: stalled[0].requests, After: stalled[1].requests, Want: "more"},
		)
		if after.down > 0 {
			res.note("Why the monitor declared the node down: %s. The load generator runs in the same process and on the same cores as the application, so a probe can miss its deadline because the client itself is starved of CPU.",
				strings.Join(mon.downCauses(), "; "))
		}
	}
	res.note("The application: %d callers; each request Fetches a ~10 KB value. Per-request checking PINGs through the shared client first (the same pipeline as the GETs) and treats a PING over %v as \"down\", sending the request to the database.", healthCallers, pingThreshold)
	res.note("PINGs and GETs are counted by a proxy between the application and the server; the stall is the proxy holding all traffic, as a server that stops answering.")
	res.note("The fallback is not a database: when the cache is judged down or does not answer, the request is answered by an in-process function that returns the ~10 KB value at once. The stalled table measures what the health check costs callers, not a database's speed; with a real database behind it, every fallback would also cost a query.")
	if loaded[0].down == 0 {
		res.note("On loopback the server answers far faster than across a network: a PING over %v needs the server busier than this run made it, so no false verdicts in the per-request row is this machine's limit, not a fix (runs on a busier machine do show them).", pingThreshold)
	}
	res.Commands = append(res.Commands, "kura demo --only health",
		fmt.Sprintf("kura bench redis://HOST:PORT --command get --data-size 10000 --prefill --keys 1000 --connections 32 --pipeline 8 --rate %.0f --duration %v   # the background load", rate, size.LoadDuration))
	return nil
}

// healthLoad is the background load: 10 KB GETs over 32 connections,
// open loop at rate when rate > 0.
func healthLoad(env *Env, d time.Duration, rate float64) loadgen.Config {
	return loadgen.Config{Target: env.redis.URL(), Command: loadgen.CmdGet,
		Keys: 1000, DataSize: "10000", Prefill: true, Connections: 32, Pipeline: 8, Duration: d, Rate: rate}
}

// healthVerdict says in one sentence what the two rows under load show,
// and no more: whether the load was the same, and who gave more false
// "down" verdicts.
func healthVerdict(before, after *healthPhase) string {
	var load string
	if lo, hi := min(before.loadOps, after.loadOps), max(before.loadOps, after.loadOps); hi > 0 && lo/hi >= 0.9 {
		load = fmt.Sprintf("Both rows ran under the same background load (%.0f and %.0f GET/s).", before.loadOps, after.loadOps)
	} else {
		load = fmt.Sprintf("The background load differed between the rows (%.0f vs %.0f GET/s): their latencies do not compare.", before.loadOps, after.loadOps)
	}
	var verdict string
	switch {
	case after.down < before.down:
		verdict = fmt.Sprintf("kura's monitor judged the busy node down %s, per-request PINGs %s.", times(after.down), times(before.down))
	case after.down == 0 && before.down == 0:
		verdict = fmt.Sprintf("Neither judged the busy node down; the monitor's gain here is the %d PINGs it kept off the application's connections.", before.pings-after.pings)
	case after.down == before.down:
		verdict = fmt.Sprintf("Both judged the busy node down %s: on this run the monitor did no better there; its gain is the %d PINGs it kept off the application's connections.", times(after.down), before.pings-after.pings)
	default:
		verdict = fmt.Sprintf("kura's monitor judged the busy node down %s, more than per-request PINGs (%s): on this run it did worse there.", times(after.down), times(before.down))
	}
	return load + " " + verdict
}

func times(n int64) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func shortHealth(name string) string {
	if strings.HasPrefix(name, "PING") {
		return "PING per request"
	}
	return "kura monitor"
}

// runHealthPhase runs the application's callers for d, with a load
// generator sending rate GET/s to the demo's redis-server when rate > 0.
func runHealthPhase(ctx context.Context, env *Env, proxy *faults.Proxy, app healthApp, d time.Duration, rate float64) (*healthPhase, error) {
	withLoad := rate > 0
	type loadResult struct {
		r   *loadgen.Result
		err error
	}
	loadDone := make(chan loadResult, 1)
	runFor := d
	if withLoad {
		loadCtx, stopLoad := context.WithCancel(ctx)
		defer stopLoad()
		go func() {
			r, err := loadgen.Run(loadCtx, healthLoad(env, d, rate))
			loadDone <- loadResult{r, err}
		}()
		// Let the prefill finish and the load reach the server first.
		time.Sleep(300 * time.Millisecond)
		runFor = d - 300*time.Millisecond
	}

	p := &healthPhase{name: app.name, kura: app.kura,
		pingHist:    hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3),
		requestHist: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3),
	}
	before := proxy.Stats()
	downs0 := app.downs()
	var mu sync.Mutex
	var firstErr error
	var n atomic.Int64
	deadline := time.Now().Add(runFor)
	var wg sync.WaitGroup
	for range healthCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				i := int(n.Add(1))
				t0 := time.Now()
				took, pinged, fellBack, err := app.request(ctx, i)
				total := time.Since(t0)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				p.requests++
				if pinged {
					_ = p.pingHist.RecordValue(took.Microseconds())
				}
				if fellBack {
					p.fallbacks++
				}
				_ = p.requestHist.RecordValue(total.Microseconds())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	p.down = app.downs() - downs0
	if withLoad {
		lr := <-loadDone
		if lr.err != nil {
			return nil, fmt.Errorf("load generator: %w", lr.err)
		}
		p.loadOps = lr.r.OpsPerSec
		if lr.r.Server != nil && lr.r.DurationSeconds > 0 {
			p.loadNetMBps = float64(lr.r.Server.NetOutBytes) / lr.r.DurationSeconds / 1e6
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	// In a stall the proxy holds the requests: counted as they arrive, so
	// count what reached it before the traffic flows again.
	d2 := proxy.Stats().Sub(before)
	p.pings, p.gets = d2.Commands["ping"], d2.Commands["get"]
	return p, nil
}

func usRound(us int64) string {
	return round(time.Duration(us) * time.Microsecond)
}
