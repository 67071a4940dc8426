package loadgen

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// TestSlowOpenLoopReportsTrueFigures: an open-loop run slower than one
// request per connection in the run's duration (--rate 0.001 for 1 s)
// lasts the duration it was given and says so: it used to end after its
// one request and report a duration of 0.000 s and thousands of ops/s.
// The rate is shown as given, not rounded to 0.
func TestSlowOpenLoopReportsTrueFigures(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	const d = time.Second
	start := time.Now()
	res := mustRun(t, Config{Target: srv.URL(), Rate: 0.001, Connections: 4, Duration: d})
	took := time.Since(start)
	if took < d {
		t.Errorf("the run returned after %v; it was given %v", took, d)
	}
	if res.DurationSeconds < d.Seconds() {
		t.Errorf("reported duration %.3f s; the run was given %v", res.DurationSeconds, d)
	}
	if res.Ops != 1 {
		t.Errorf("%d ops; at 0.001 ops/s one request is due in the first second", res.Ops)
	}
	if res.OpsPerSec > 1.0/d.Seconds() {
		t.Errorf("throughput %.1f ops/s for %d op in %v", res.OpsPerSec, res.Ops, d)
	}
	var text bytes.Buffer
	_ = res.WriteText(&text)
	if !strings.Contains(text.String(), "open loop at 0.001 ops/s") {
		t.Errorf("the text does not show the rate as given:\n%s", text.String())
	}

	// Ctrl-C during the wait for the end still ends the run at once.
	// (Cancelled from the first progress report, so the run has started
	// however slowly this machine dials.)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start = time.Now()
	r, err := Run(ctx, Config{Target: srv.URL(), Rate: 0.001, Connections: 2, Duration: time.Hour,
		Progress: func(Interval) { cancel() }})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Minute || !r.Interrupted {
		t.Errorf("a cancelled slow run took %v, interrupted %v", took, r.Interrupted)
	}
}

// TestCancelIsNotAnError: the requests in flight when the run is
// cancelled (Ctrl-C) are neither errors nor latency samples: a clean run
// stopped by Ctrl-C reported one "i/o timeout" error per connection.
func TestCancelIsNotAnError(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	for _, cfg := range []Config{
		{Target: srv.URL(), Connections: 16, Duration: time.Minute},
		{Target: srv.URL(), Connections: 16, Pipeline: 8, Duration: time.Minute},
		{Target: srv.URL(), Connections: 16, Rate: 50000, Duration: time.Minute},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cfg.Progress = func(Interval) { cancel() } // a second into the run
		res, err := Run(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !res.Interrupted || res.Ops == 0 {
			t.Fatalf("interrupted %v with %d ops", res.Interrupted, res.Ops)
		}
		if res.Errors != 0 {
			t.Errorf("pipeline %d, rate %v: %d errors after Ctrl-C on a healthy server: %v", cfg.Pipeline, cfg.Rate, res.Errors, res.ErrorSamples)
		}
	}
}

// TestAbandonedNoteOnlyWhenAbandoned: the note that latency includes
// requests given up on (timeouts, lost connections) appears when some
// were, with their number, and not for a run whose errors are the
// server's replies (every request answered, with an error).
func TestAbandonedNoteOnlyWhenAbandoned(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	res := mustRun(t, Config{Target: srv.URL(), Connections: 2, Requests: 200, Template: []string{"nosuchcmd", "__key__"}})
	if res.Errors != res.Ops || res.Abandoned != 0 {
		t.Fatalf("errors %d of %d ops, abandoned %d; want every op an answered error", res.Errors, res.Ops, res.Abandoned)
	}
	var text bytes.Buffer
	_ = res.WriteText(&text)
	if strings.Contains(text.String(), "timed out") {
		t.Errorf("the text speaks of timeouts in a run without any:\n%s", text.String())
	}

	// The stall starts at the first progress report, once the run is
	// connected, however slowly this machine dials.
	var once sync.Once
	stall := func(Interval) {
		once.Do(func() {
			go func() {
				_ = srv.Pause()
				time.Sleep(time.Second)
				_ = srv.Resume()
			}()
		})
	}
	res = mustRun(t, Config{Target: srv.URL(), Connections: 2, Duration: 3 * time.Second, Timeout: 200 * time.Millisecond, Progress: stall})
	if res.Abandoned == 0 {
		t.Fatalf("no request was given up on during a 1 s stall with a 200 ms timeout: %+v", res)
	}
	text.Reset()
	_ = res.WriteText(&text)
	if !strings.Contains(text.String(), "timed out") {
		t.Errorf("the text does not say timed-out requests are in the latency figures:\n%s", text.String())
	}
}

// TestOpenLoopEndsAtItsDuration: an open loop far behind its schedule
// (a rate no server reaches) still ends at its duration, below the target
// rate and saying so; it used to send its whole backlog, so --rate 1e9
// --duration 1s ran until it was killed. The context's minute is only a
// bound that turns a hang into a failure.
func TestOpenLoopEndsAtItsDuration(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Target: srv.URL(), Rate: 1e9, Connections: 2, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Interrupted {
		t.Fatalf("the run did not end at its duration: %d ops, %.1f s", res.Ops, res.DurationSeconds)
	}
	var text bytes.Buffer
	_ = res.WriteText(&text)
	if !strings.Contains(text.String(), "below the target rate") {
		t.Errorf("a run at %.0f of 1e9 ops/s does not say it fell behind:\n%s", res.OpsPerSec, text.String())
	}
}
