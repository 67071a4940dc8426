package kura_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// BenchmarkReadPath: 64 goroutines read a warm set of 10,000 keys of a ~1
// KB struct from one private redis-server, each contender on its own keys,
// in interleaved rounds (round1/a, round1/b, ..., round2/a, ...) so a drift
// of the machine touches every one alike. Compare ops/s within a round;
// take medians over the rounds (scripts/bench-readpath.sh):
//
//   - kura: Fetch with zero-valued kura.Options over
//     redisstore.NewFromURL(ctx, url, redisstore.Options{}) (leases on, the
//     StoreTimeout budget on, no L1): the default read path;
//   - kura-no-budget: the same with StoreTimeout -1;
//   - kura-rueidis-conns: kura with rueidis's default number of pipelined
//     connections (PipelineMultiplex 0: 2 on 2 CPUs) instead of the
//     Store's one;
//   - rueidisaside-nocache: rueidisaside with DisableCache (no client-side
//     cache: a round trip per read, as kura without an L1), typed with the
//     same serializer (msgpack).
//
// KURA_BENCH_ROUNDS sets the number of rounds (default 5).
func BenchmarkReadPath(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	const conc = 64
	cs := []contender{
		kuraContender(b, ctx, srv.URL(), "kura", kura.Options{}, redisstore.Options{}),
		kuraContender(b, ctx, srv.URL(), "kura-no-budget", kura.Options{StoreTimeout: -1}, redisstore.Options{}),
		// The Store's connections as before it chose one per server:
		// rueidis's default (2 on 2 CPUs).
		kuraContender(b, ctx, srv.URL(), "kura-rueidis-conns", kura.Options{}, rueidisConns),
	}
	cs = append(cs, asideContender(b, ctx, "rueidisaside-nocache", srv.Addr, true))
	rounds := 5
	if n, err := strconv.Atoi(os.Getenv("KURA_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	raceContenders(b, cs, conc, 1, rounds)
}

// rueidisConns are Store options with rueidis's default number of
// pipelined connections per server instead of the Store's one.
var rueidisConns = redisstore.Options{Configure: func(co *rueidis.ClientOption) { co.PipelineMultiplex = 0 }}

// kuraContender is a Cache over its own Store on the server at url as a
// contender of the read-path benchmarks: keys "<name>:<i>", loads counted.
func kuraContender(b *testing.B, ctx context.Context, url, name string, opts kura.Options, ropts redisstore.Options) contender {
	st, err := redisstore.NewFromURL(ctx, url, ropts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	c, err := kura.New[benchValue](st, opts)
	if err != nil {
		b.Fatal(err)
	}
	prefix := name + ":"
	load := func(_ context.Context, key string) (benchValue, error) {
		i, _ := strconv.Atoi(key[len(prefix):])
		return newBenchValue(i), nil
	}
	return contender{name, func(i int) error {
		_, err := c.Fetch(ctx, prefix+strconv.Itoa(i), time.Hour, load)
		return err
	}, func() uint64 { return c.Stats().LoaderCalls }}
}

// BenchmarkFetchHitBudget is one warm Fetch at a time (default options, leases
// on, no L1) with the StoreTimeout budget and without it, for a caller
// context of context.Background and for a cancellable one (as every
// net/http request's is), for benchstat over -count=10 (BENCHMARKS.md,
// "One read path"):
//
//	go test -run '^$' -bench '^BenchmarkFetchHitBudget$' -count 10 . > hit.txt
//	benchstat -col /budget -row /ctx hit.txt
//
// The Store's connection is in rueidis's pipelined mode from the start
// (where a call waits on its context's Done channel), as under any load:
// otherwise the first variant with a Done channel and no deadline would
// switch it half-way through.
var fetchHitBudgetRuns atomic.Int64

func BenchmarkFetchHitBudget(b *testing.B) {
	hb := newHitBudgetBench(b)
	order := []*hitCache{hb.on, hb.off}
	if fetchHitBudgetRuns.Add(1)%2 == 0 { // -count: every other run the other way round
		order[0], order[1] = order[1], order[0]
	}
	for _, hc := range order {
		for _, cc := range hb.ctxs {
			b.Run("ctx="+cc.name+"/budget="+hc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					hc.fetch(b, cc.ctx)
				}
				hc.checkHits(b)
			})
		}
	}
}

// BenchmarkFetchHitBudgetInterleaved measures the same two Caches as
// BenchmarkFetchHitBudget in one loop, alternating blocks of 32 warm
// Fetches between the budget and no budget, so that both see the same
// moments of a noisy machine; it reports each one's time per hit and the
// budget's cost in percent (budget-%). Drift between runs, which is ±2 to
// 13 % here, cancels out: the figure is the one to compare (BENCHMARKS.md,
// "One read path").
//
//	go test -run '^$' -bench '^BenchmarkFetchHitBudgetInterleaved$' -benchtime 4s -count 6 .
func BenchmarkFetchHitBudgetInterleaved(b *testing.B) {
	hb := newHitBudgetBench(b)
	const block = 32
	for _, cc := range hb.ctxs {
		b.Run("ctx="+cc.name, func(b *testing.B) {
			var took [2]time.Duration
			var hits [2]int
			for i := 0; b.Loop(); i++ {
				side := i % 2
				hc := hb.on
				if side == 1 {
					hc = hb.off
				}
				start := time.Now()
				for range block {
					hc.fetch(b, cc.ctx)
				}
				took[side] += time.Since(start)
				hits[side] += block
			}
			hb.on.checkHits(b)
			hb.off.checkHits(b)
			on := float64(took[0]) / float64(max(hits[0], 1))
			off := float64(took[1]) / float64(max(hits[1], 1))
			b.ReportMetric(on, "budget-ns/hit")
			b.ReportMetric(off, "nobudget-ns/hit")
			b.ReportMetric(100*(on/off-1), "budget-%")
		})
	}
}

// hitBudgetBench is one redis-server and Store, a Cache with the default
// budget (on) and one without (off), each with its warm key, and the two
// caller contexts of the budget benchmarks.
type hitBudgetBench struct {
	on, off *hitCache
	ctxs    []struct {
		name string
		ctx  context.Context
	}
}

// hitCache is a Cache of the budget benchmarks and its warm key.
type hitCache struct {
	name string
	c    *kura.Cache[benchValue]
	key  string
	load kura.Loader[benchValue]
}

func (h *hitCache) fetch(b *testing.B, ctx context.Context) {
	if _, err := h.c.Fetch(ctx, h.key, time.Hour, h.load); err != nil {
		b.Fatal(err)
	}
}

func (h *hitCache) checkHits(b *testing.B) {
	if h.c.Stats().LoaderCalls != 1 {
		b.Fatal("not a hit benchmark")
	}
}

// newHitCache is a Cache with opts over st, its key "hit:"+name warm.
func newHitCache(b *testing.B, st store.Store, name string, opts kura.Options) *hitCache {
	c, err := kura.New[benchValue](st, opts)
	if err != nil {
		b.Fatal(err)
	}
	load := func(context.Context, string) (benchValue, error) { return newBenchValue(1), nil }
	h := &hitCache{name: name, c: c, key: "hit:" + name, load: load}
	if _, err := c.Fetch(context.Background(), h.key, time.Hour, load); err != nil {
		b.Fatal(err)
	}
	return h
}

func newHitBudgetBench(b *testing.B) *hitBudgetBench {
	srv := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	st, err := redisstore.NewFromURL(ctx, srv.URL(), redisstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	cancellable, cancel := context.WithCancel(ctx)
	b.Cleanup(cancel)
	if _, err := st.Get(cancellable, "pipelined"); err != nil && !errors.Is(err, store.ErrNotFound) {
		b.Fatal(err)
	}
	hb := &hitBudgetBench{
		on:  newHitCache(b, st, "on", kura.Options{}),
		off: newHitCache(b, st, "off", kura.Options{StoreTimeout: -1}),
	}
	hb.ctxs = []struct {
		name string
		ctx  context.Context
	}{{"background", ctx}, {"with-cancel", cancellable}}
	return hb
}
