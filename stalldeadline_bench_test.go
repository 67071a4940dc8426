package kura_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/overshoot"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// BenchmarkStalledDeadline is TestStalledServerDeadlineWhateverHistory
// as a benchmark: each iteration is one run of 201 callers with a 40 ms
// deadline (and one without) against a SIGSTOPped redis-server, on a
// fresh Store whose connection had run one call at a time (lone) or
// overlapping calls (warm), leases off and on; it reports the overshoot
// past the deadline over all iterations' callers (p50, p99, max, in ms)
// and the longest the process went without running (lag-ms), which a
// busy machine adds to the max (docs/benchmarks/deadline.md):
//
//	go test -run '^$' -bench '^BenchmarkStalledDeadline$' -benchtime 10x -count 3 .
func BenchmarkStalledDeadline(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	for _, history := range []string{"lone", "warm"} {
		for _, leases := range []kura.LeaseMode{kura.LeasesOff, kura.LeasesRequired} {
			name := "leases-off"
			if leases == kura.LeasesRequired {
				name = "leases-on"
			}
			b.Run("history="+history+"/"+name, func(b *testing.B) {
				var all []time.Duration
				var lag time.Duration
				for b.Loop() {
					r, _ := stalledFetches(b, srv, history == "warm", kura.Options{Leases: leases})
					all = append(all, r.Over...)
					lag = max(lag, r.Lag)
				}
				r := overshoot.NewRun(all, lag)
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(ms(r.Quantile(0.5)), "p50-ms")
				b.ReportMetric(ms(r.Quantile(0.99)), "p99-ms")
				b.ReportMetric(ms(r.Max()), "max-ms")
				b.ReportMetric(ms(r.Lag), "lag-ms")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkFetchHitPipelining is what pipelining from the first call
// (rueidis's AlwaysPipelining, the first fix tried for a stalled
// server's deadlines) would cost a one-caller Redis hit: two Caches
// (default options, leases on, the budget on, no L1) over two Stores on
// one redis-server, one as the Store opens it (synchronous until two
// calls overlap, which one caller never does) and one with
// AlwaysPipelining, in one loop alternating blocks of 32 warm Fetches,
// so both see the same moments of a noisy machine. It reports each
// one's time per hit and the cost in percent (always-%), for a caller
// context of context.Background and for one with a deadline
// (docs/benchmarks/deadline.md):
//
//	go test -run '^$' -bench '^BenchmarkFetchHitPipelining$' -benchtime 3s -count 6 .
func BenchmarkFetchHitPipelining(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	cache := func(name string, ropts redisstore.Options) *hitCache {
		st, err := redisstore.NewFromURL(ctx, srv.URL(), ropts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return newHitCache(b, st, name, kura.Options{})
	}
	always := cache("always", redisstore.Options{Configure: func(co *rueidis.ClientOption) { co.AlwaysPipelining = true }})
	lone := cache("lone", redisstore.Options{})
	withDeadline, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	const block = 32
	for _, cc := range []struct {
		name string
		ctx  context.Context
	}{{"background", ctx}, {"deadline", withDeadline}} {
		b.Run("ctx="+cc.name, func(b *testing.B) {
			var took [2]time.Duration
			var hits [2]int
			for i := 0; b.Loop(); i++ {
				side := i % 2
				hc := always
				if side == 1 {
					hc = lone
				}
				start := time.Now()
				for range block {
					hc.fetch(b, cc.ctx)
				}
				took[side] += time.Since(start)
				hits[side] += block
			}
			always.checkHits(b)
			lone.checkHits(b)
			on := float64(took[0]) / float64(max(hits[0], 1))
			off := float64(took[1]) / float64(max(hits[1], 1))
			b.ReportMetric(on, "always-ns/hit")
			b.ReportMetric(off, "sync-ns/hit")
			b.ReportMetric(100*(on/off-1), "always-%")
		})
	}
}
