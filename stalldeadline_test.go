package kura_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/overshoot"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// TestStalledServerDeadlineWhateverHistory: 200 callers, each with a
// 40 ms deadline, Fetch from a redis-server stopped with SIGSTOP, on a
// connection that had run one call at a time ("lone") and on one warmed
// by overlapping calls ("warm"), with leases off and on. Every caller
// returns within its deadline + 25 ms: none waits on another caller's
// store call.
//
// The order is set on purpose: one caller's read runs out of time, then
// a caller without a deadline (bounded by the 250 ms StoreTimeout) reads
// and, with leases off, the first caller's write-back goes out with the
// rest of its budget; then the 200 call. rueidis runs a lone
// connection's read synchronously and closes the connection when its
// deadline passes; the next store call redials it on its own context,
// and before the Store waited for calls apart from rueidis after a
// timeout (redisstore's stall guard), every other caller waited for that
// dial (rueidis's mux._pipe): 160-205 ms past their deadline in every
// run. store/redisstore has the same test on the Store's calls
// alone; the overshoot's p50/p99/max is a benchmark
// (BenchmarkStalledDeadline, docs/benchmarks/deadline.md), only logged
// here.
//
// On a busy machine the whole process can go without a core for longer
// than the bound (an overshoot.Probe measures it): an attempt whose late
// callers that explains is run again, up to stallAttempts times.
func TestStalledServerDeadlineWhateverHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	for _, history := range []string{"lone", "warm"} {
		for _, leases := range []kura.LeaseMode{kura.LeasesOff, kura.LeasesRequired} {
			name := history + "/leases-off"
			if leases == kura.LeasesRequired {
				name = history + "/leases-on"
			}
			t.Run(name, func(t *testing.T) {
				srv := servertest.Redis(t, servers.RedisConfig{})
				for attempt := 1; ; attempt++ {
					r, long := stalledFetches(t, srv, history == "warm", kura.Options{Leases: leases})
					t.Logf("attempt %d: past the %v deadline: %v; the caller without a deadline returned %v past the StoreTimeout",
						attempt, stallDeadline, r, long)
					late := r.Late(stallSlack)
					if late == 0 {
						return
					}
					if !r.Starved(stallSlack) || attempt == stallAttempts {
						t.Fatalf("%d of %d callers returned more than %v past their %v deadline (max %v over, the process went without running for up to %v): they waited on another caller's store call",
							late, len(r.Over), stallSlack, stallDeadline, r.Max(), r.Lag)
					}
				}
			})
		}
	}
}

// The deadline of each stalled caller, the generous bound past it that
// TestStalledServerDeadlineWhateverHistory allows, how many callers, and
// how many attempts a starved machine gets.
const (
	stallDeadline = 40 * time.Millisecond
	stallSlack    = 25 * time.Millisecond
	stallCallers  = 200
	stallAttempts = 4
)

// stalledFetches opens a Cache over a new Store on srv, runs 20 Fetches
// one at a time (and with warm, 32 callers' overlapping Fetches), stops
// srv and runs the order TestStalledServerDeadlineWhateverHistory
// describes, then resumes srv. It returns how far past their deadline
// the callers with one returned, and how far past the StoreTimeout the
// caller without one did.
func stalledFetches(tb testing.TB, srv *servers.Redis, warm bool, opts kura.Options) (overshoot.Run, time.Duration) {
	tb.Helper()
	ctx := context.Background()
	st := redisBackendTB(tb, srv.URL())
	c, err := kura.New[Profile](st, opts)
	if err != nil {
		tb.Fatal(err)
	}
	load := func(context.Context, string) (Profile, error) { return profile(5), nil }
	for range 20 { // one call at a time
		if _, err := c.Fetch(ctx, "w", time.Hour, load); err != nil {
			tb.Fatal(err)
		}
	}
	if warm {
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for range 20 {
					_, _ = c.Fetch(ctx, "w", time.Hour, load)
				}
			})
		}
		wg.Wait()
	}
	if err := srv.Pause(); err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = srv.Resume() }()
	fetch := func(ctx context.Context) time.Duration {
		start := time.Now()
		_, _ = c.Fetch(ctx, "k", time.Hour, load)
		return time.Since(start)
	}
	withDeadline := func() time.Duration {
		cctx, cancel := context.WithTimeout(ctx, stallDeadline)
		defer cancel()
		return fetch(cctx) - stallDeadline
	}
	lag := overshoot.Start()
	first := make(chan time.Duration, 1)
	go func() { first <- withDeadline() }()
	time.Sleep(stallDeadline + time.Millisecond) // the first caller's read ran out of time
	long := make(chan time.Duration, 1)
	go func() { long <- fetch(ctx) - kura.DefaultStoreTimeout }()
	time.Sleep(5 * time.Millisecond)
	over := make([]time.Duration, stallCallers, stallCallers+1)
	var wg sync.WaitGroup
	for i := range over {
		wg.Go(func() { over[i] = withDeadline() })
	}
	wg.Wait()
	over = append(over, <-first)
	l := <-long
	return overshoot.NewRun(over, lag.Stop()), l
}
