package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/overshoot"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// TestStalledServerDeadlineWhateverHistory: on a redis-server stopped
// with SIGSTOP, 200 callers each with a 40 ms deadline return within
// their deadline + 25 ms while another caller's store call with a longer
// budget (a write-back holding the rest of a 250 ms StoreTimeout) is in
// flight: none waits on that call. Both histories of the connection:
// "lone", which had only ever run one call at a time, and "warm", which
// overlapping calls had put in rueidis's pipelined mode.
//
// The sequence is the one a Fetch makes on a stalled server, in order on
// purpose: a read with the caller's 40 ms deadline runs out of time, then
// the write-back (210 ms) is sent, then the other callers read. Before
// the Store pipelined from the first call, rueidis ran the lone
// connection's read synchronously, bound by its deadline alone, closed
// the connection when that passed, and the write-back redialled it on
// its own context: the 200 readers waited for that dial (rueidis's
// mux._pipe) until the write-back's 210 ms ran out, about 170 ms past
// their deadline. A warm connection never closed, and none waited.
func TestStalledServerDeadlineWhateverHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	for _, history := range []string{"lone", "warm"} {
		t.Run(history, func(t *testing.T) {
			srv := servertest.Redis(t, servers.RedisConfig{})
			for attempt := 1; ; attempt++ {
				s := open(t, srv.URL(), redisstore.Options{})
				r := stalledCallers(t, srv, s, history == "warm")
				t.Logf("attempt %d: past the %v deadline: %v", attempt, stallDeadline, r)
				late := r.Late(stallSlack)
				if late == 0 {
					return
				}
				if !r.Starved(stallSlack) || attempt == stallAttempts {
					t.Fatalf("%s: %d of %d callers returned more than %v past their %v deadline (max %v over, the process went without running for up to %v): they waited on another caller's store call",
						history, late, len(r.Over), stallSlack, stallDeadline, r.Max(), r.Lag)
				}
			}
		})
	}
}

// The deadline of each stalled caller, the generous bound past it that
// TestStalledServerDeadlineWhateverHistory allows, how many callers,
// the budget left to the write-back in flight while they call, and how
// many attempts a starved machine gets (see overshoot.Run.Starved).
const (
	stallDeadline  = 40 * time.Millisecond
	stallSlack     = 25 * time.Millisecond
	stallCallers   = 200
	stallWriteBack = 210 * time.Millisecond
	stallAttempts  = 4
)

// warmUp puts s's connection in rueidis's pipelined mode, as a service
// under traffic has it: overlapping reads of key.
func warmUp(tb testing.TB, s *redisstore.Store, key string) {
	tb.Helper()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 20 {
				if _, err := s.Get(context.Background(), key); err != nil && !errors.Is(err, store.ErrNotFound) {
					tb.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// stalledCallers writes key and reads it 20 times one call at a time
// through s (with warm, overlapping reads too), stops srv and runs the
// calls a Fetch makes there: a read of key with a stallDeadline that runs
// out, a write-back with stallWriteBack, and, once that has been sent,
// stallCallers reads of key with a stallDeadline each. It returns how far
// past its deadline each of those returned, waits for the write-back and
// resumes srv.
func stalledCallers(tb testing.TB, srv *servers.Redis, s *redisstore.Store, warm bool) overshoot.Run {
	tb.Helper()
	const key = "k"
	ctx := context.Background()
	if err := s.Set(ctx, key, []byte("v"), 0); err != nil {
		tb.Fatal(err)
	}
	for range 20 { // one call at a time
		if _, err := s.Get(ctx, key); err != nil {
			tb.Fatal(err)
		}
	}
	if warm {
		warmUp(tb, s, key)
	}
	if err := srv.Pause(); err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = srv.Resume() }()
	lag := overshoot.Start()
	first, cancel := context.WithTimeout(ctx, stallDeadline)
	_, err := s.Get(first, key)
	cancel()
	if err == nil {
		tb.Fatal("Get answered by a stopped server")
	}
	wb := make(chan struct{})
	go func() {
		defer close(wb)
		wctx, cancel := context.WithTimeout(ctx, stallWriteBack)
		defer cancel()
		_ = s.Set(wctx, key, []byte("loaded"), time.Hour)
	}()
	// The write-back leaves first: before the fix it then held the
	// redial every other caller waited for.
	time.Sleep(5 * time.Millisecond)
	over := make([]time.Duration, stallCallers)
	var wg sync.WaitGroup
	for i := range over {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, stallDeadline)
			defer cancel()
			start := time.Now()
			_, _ = s.Get(cctx, key)
			over[i] = time.Since(start) - stallDeadline
		})
	}
	wg.Wait()
	<-wb
	return overshoot.NewRun(over, lag.Stop())
}
