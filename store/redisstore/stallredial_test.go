package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// TestStalledServerDeadlineAfterConnectionClosed: on a redis-server
// stopped with SIGSTOP, callers keep their deadline after rueidis gave
// up on the stalled connection (its PING unanswered for
// ConnWriteTimeout) while a call with a longer budget redials it. The
// close failed the call in flight with a network error, and the stall
// guard took that for an answer: it stopped detaching calls, so the
// next ones went straight to rueidis, which made them wait for the other
// call's dial (its HELLO unanswered until ConnWriteTimeout, DialTimeout
// or that call's context) instead of their own deadline: 40 ms callers
// took about 1.2 s here.
func TestStalledServerDeadlineAfterConnectionClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	const (
		// rueidis closes a connection whose PING, sent keepAlive after
		// the last answer, goes unanswered for writeTimeout; a redial's
		// HELLO waits as long.
		keepAlive    = 200 * time.Millisecond
		writeTimeout = 1200 * time.Millisecond
		deadline     = 40 * time.Millisecond
		longCall     = 5 * time.Second
		bound        = 600 * time.Millisecond
	)
	srv := servertest.Redis(t, servers.RedisConfig{})
	s := open(t, srv.URL(), redisstore.Options{Configure: func(co *rueidis.ClientOption) {
		co.ConnWriteTimeout, co.Dialer.KeepAlive = writeTimeout, keepAlive
	}})
	ctx := context.Background()
	if err := s.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	warmUp(t, s, "k")
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Resume() }()
	// A call ends by its context: the guard detaches the next ones.
	first, cancel := context.WithTimeout(ctx, deadline)
	_, err := s.Get(first, "k")
	cancel()
	if err == nil {
		t.Fatal("Get answered by a stopped server")
	}
	// A call with a longer budget is in flight when rueidis closes the
	// connection: it ends with a network error, not by its context.
	long, cancel := context.WithTimeout(ctx, longCall)
	_, err = s.Get(long, "k")
	cancel()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the call in flight did not end by the connection's close: %v", err)
	}
	// Another long call redials the stalled server while short callers
	// read.
	redial := make(chan struct{})
	go func() {
		defer close(redial)
		cctx, cancel := context.WithTimeout(ctx, longCall)
		defer cancel()
		_ = s.Set(cctx, "k", []byte("w"), time.Hour)
	}()
	time.Sleep(20 * time.Millisecond)
	var mu sync.Mutex
	var worst time.Duration
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			start := time.Now()
			_, _ = s.Get(cctx, "k")
			took := time.Since(start)
			mu.Lock()
			worst = max(worst, took)
			mu.Unlock()
		})
	}
	wg.Wait()
	<-redial
	t.Logf("slowest of 50 callers with a %v deadline: %v", deadline, worst)
	if worst > bound {
		t.Fatalf("callers with a %v deadline took up to %v (bound %v) on a stalled server once its connection had closed: they waited for another call's redial", deadline, worst, bound)
	}
}
