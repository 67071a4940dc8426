package kura_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/cputime"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// l1ClockResolution is internal/l1's ClockResolution.
const l1ClockResolution = 10 * time.Millisecond

// smallValue is a small struct, as a service caches many of: a hit copies
// it whole (no pointers but the string's).
type smallValue struct {
	ID    int     `msgpack:"id"`
	Name  string  `msgpack:"name"`
	Score float64 `msgpack:"score"`
}

// l1LimitKeys are the warm keys both sides of BenchmarkL1Limit read.
func l1LimitKeys() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = "item:" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkL1Limit: a warm L1 hit against the limit of the machine, the
// bare lookup of the in-process cache the L1 is built on. Both sides read
// the same 10,000 warm keys of a small struct, from 1, 2 and 32
// goroutines, in interleaved rounds (round1/g1/otter, round1/g1/kura,
// round1/g2/otter, ...; in even rounds kura runs first) so a drift of the
// machine touches both alike:
//
//   - otter: GetIfPresent on an otter cache configured as the L1
//     configures its own (weigher, MaximumWeight 256 MiB, expiry after
//     write of L1Options.MaxTTL's default, a CoarseClock of the L1's
//     resolution) holding the same values: the limit;
//   - otter-precise: the same with otter's default clock (the precise
//     time on every read), as a user configures otter by default;
//   - kura: Cache.Fetch served from the L1 (redisstore with Tracking, one
//     private redis-server, Options.L1 256 MiB).
//
// Every goroutine walks the keys from its own offset, with no shared
// counter, so the harness adds no contention of its own. Besides ns/op
// (wall clock) each reports cpu-ns/op, the CPU time of the process per
// read: on a shared machine it does not count the time other processes
// held the cores. Compare within a round; scripts/bench-l1limit.sh takes
// the medians of the per-round ratios. KURA_BENCH_ROUNDS sets the number
// of rounds (default 5).
func BenchmarkL1Limit(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	keys := l1LimitKeys()
	value := func(key string) smallValue {
		i, _ := strconv.Atoi(key[len("item:"):])
		return smallValue{ID: i, Name: "item number " + strconv.Itoa(i), Score: float64(i) / 7}
	}

	st, err := redisstore.NewFromURL(ctx, srv.URL(), redisstore.Options{Tracking: redisstore.Tracking{Enabled: true}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	// No store budget: on a loaded machine a slow warming read would turn
	// into a second load; the benchmark measures warm hits.
	c, err := kura.New[smallValue](st, kura.Options{StoreTimeout: -1, L1: kura.L1Options{MaxBytes: 256 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	var loads atomic.Int64
	load := func(_ context.Context, key string) (smallValue, error) {
		loads.Add(1)
		return value(key), nil
	}
	// A load and write-back, then a read that fills the L1.
	for pass := 0; pass < 2; pass++ {
		for _, k := range keys {
			if _, err := c.Fetch(ctx, k, time.Hour, load); err != nil {
				b.Fatal(err)
			}
		}
	}

	type entry struct {
		v      smallValue
		weight uint32
	}
	bare := func(clock otter.Clock) *otter.Cache[string, entry] {
		oc := otter.Must(&otter.Options[string, entry]{
			Clock:            clock,
			MaximumWeight:    256 << 20,
			Weigher:          func(_ string, e entry) uint32 { return e.weight },
			ExpiryCalculator: otter.ExpiryWriting[string, entry](kura.DefaultL1MaxTTL),
		})
		b.Cleanup(func() { oc.StopAllGoroutines() })
		for _, k := range keys {
			oc.Set(k, entry{v: value(k), weight: 100})
		}
		return oc
	}
	coarse := otter.NewCoarseClock(l1ClockResolution)
	b.Cleanup(coarse.Stop)
	oc, precise := bare(coarse), bare(nil)

	sides := []struct {
		name string
		get  func(key string) (smallValue, bool)
	}{
		{"otter", func(key string) (smallValue, bool) {
			e, ok := oc.GetIfPresent(key)
			return e.v, ok
		}},
		{"otter-precise", func(key string) (smallValue, bool) {
			e, ok := precise.GetIfPresent(key)
			return e.v, ok
		}},
		{"kura", func(key string) (smallValue, bool) {
			v, err := c.Fetch(ctx, key, time.Hour, load)
			return v, err == nil
		}},
	}
	rounds := 5
	if n, err := strconv.Atoi(os.Getenv("KURA_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	hitsBefore, loadsBefore := c.Stats().L1.Hits, loads.Load()
	var ran uint64
	for round := 1; round <= rounds; round++ {
		for _, g := range []int{1, 2, 32} {
			for j := range sides {
				s := sides[j]
				if round%2 == 0 { // which side runs first alternates
					s = sides[len(sides)-1-j]
				}
				b.Run(fmt.Sprintf("round%d/g%d/%s", round, g, s.name), func(b *testing.B) {
					b.ReportAllocs()
					hitParallel(b, g, keys, s.get)
					if s.name == "kura" {
						ran += uint64(b.N)
					}
				})
			}
		}
	}
	if n := loads.Load() - loadsBefore; n != 0 {
		b.Fatalf("%d loads during the rounds: the benchmark would measure the loader", n)
	}
	if got := c.Stats().L1.Hits - hitsBefore; got != ran {
		b.Fatalf("Stats().L1.Hits grew by %d over %d Fetches: some were not L1 hits", got, ran)
	}
}

// hitParallel runs b.N reads of warm keys spread over g goroutines, each
// from its own offset, and fails on a miss.
func hitParallel(b *testing.B, g int, keys []string, get func(string) (smallValue, bool)) {
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu := cputime.Process()
	for w := range g {
		n := b.N / g
		if w < b.N%g {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := (w * len(keys) / g) % len(keys)
			for range n {
				if _, ok := get(keys[i]); !ok {
					b.Errorf("%s missed", keys[i])
					return
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
}
