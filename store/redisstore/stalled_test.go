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
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// TestStalledServerUnderTraffic: against a redis-server stopped with
// SIGSTOP, every call still ends at its own deadline, however many calls
// ran out of time before it. rueidis keeps each abandoned command's slot
// in its connection's ring (1,024 slots) until the server answers, and a
// command that finds the ring full waits for a slot without looking at
// its context: once about a thousand reads had timed out, every caller
// waited until rueidis closed the connection (10 s later) instead of its
// 250 ms budget. One connection per server (this Store's default) filled
// it twice as fast as rueidis's own default on 2 CPUs; at a production
// rate either fills in well under a second. After SIGCONT the values are
// read again.
func TestStalledServerUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	for _, tc := range []struct {
		name      string
		configure func(*rueidis.ClientOption)
	}{
		{"default", nil},
		{"rueidis-multiplex", func(co *rueidis.ClientOption) { co.PipelineMultiplex = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := servertest.Redis(t, servers.RedisConfig{})
			s := open(t, srv.URL(), redisstore.Options{Configure: tc.configure})
			ctx := context.Background()
			if err := s.Set(ctx, "k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			// Concurrent reads first, as a service under traffic has: they
			// put the connection in rueidis's pipelined mode (its ring and
			// background writer), which a lone caller never starts.
			var warm sync.WaitGroup
			for range 64 {
				warm.Add(1)
				go func() {
					defer warm.Done()
					for range 50 {
						if _, err := s.Get(ctx, "k"); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			warm.Wait()
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			resumed := false
			defer func() {
				if !resumed {
					_ = srv.Resume()
				}
			}()
			// More abandoned reads than four connections' rings hold,
			// from 64 callers with a short deadline each.
			const callers, perCaller = 64, 80
			const deadline = 5 * time.Millisecond
			var mu sync.Mutex
			var slowest time.Duration
			var wg sync.WaitGroup
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range perCaller {
						cctx, cancel := context.WithTimeout(ctx, deadline)
						start := time.Now()
						_, err := s.Get(cctx, "k")
						took := time.Since(start)
						cancel()
						if err == nil {
							t.Error("Get answered by a stopped server")
							return
						}
						mu.Lock()
						slowest = max(slowest, took)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			cctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
			start := time.Now()
			_, err := s.Get(cctx, "k")
			last := time.Since(start)
			cancel()
			if err == nil {
				t.Fatal("Get answered by a stopped server")
			}
			// A bound far above the deadlines and far below rueidis's
			// 10 s connection timeout, which is what held the callers.
			const bound = 3 * time.Second
			t.Logf("slowest %v, last %v: %v", slowest, last, err)
			if slowest > bound || last > bound {
				t.Fatalf("against a stopped server, calls with a %v deadline took up to %v and one with 250ms took %v (bound %v): %v",
					deadline, slowest, last, bound, err)
			}
			if errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a stalled server's error reads as a miss: %v", err)
			}
			if err := srv.Resume(); err != nil {
				t.Fatal(err)
			}
			resumed = true
			servertest.Eventually(t, "the value read again after SIGCONT", func() error {
				cctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
				defer cancel()
				v, err := s.Get(cctx, "k")
				if err != nil {
					return err
				}
				if string(v) != "v" {
					return errors.New("read " + string(v))
				}
				return nil
			})
		})
	}
}
