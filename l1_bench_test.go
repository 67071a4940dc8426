package kura_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocache "github.com/go-redis/cache/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidisaside"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// clonedValue is benchValue with a Clone method: a Cache with an L1
// returns a deep copy on every hit.
type clonedValue benchValue

// Clone copies the value and the slices it holds.
func (v clonedValue) Clone() clonedValue {
	v.Tags = slices.Clone(v.Tags)
	v.Payload = slices.Clone(v.Payload)
	return v
}

// BenchmarkL1WarmHits: 64 goroutines read a warm set of 10,000 keys of a
// ~1 KB struct from one private redis-server. Contenders, each on its own
// keys, run in interleaved rounds (round1/a, round1/b, ..., round2/a, ...)
// so a drift of the machine touches every one alike:
//
//   - kura-l1: Fetch with the L1 on (redisstore Tracking), shared values;
//   - kura-l1-clone: the same with a Clone() on every hit;
//   - rueidisaside: rueidisaside@v1.0.78 as users run it (client-side
//     caching on), typed with the same serializer (msgpack);
//   - go-redis-cache-tinylfu: go-redis/cache Once with its TinyLFU local
//     cache (no invalidation: see BenchmarkL1Invalidation);
//   - kura: Fetch without an L1 (a round trip and a decode per hit).
func BenchmarkL1WarmHits(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	const conc = 64
	var cs []contender

	kuraL1 := func(name string, l1 bool) {
		st, err := redisstore.NewFromURL(ctx, srv.URL(), redisstore.Options{Tracking: redisstore.Tracking{Enabled: l1}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		// No store budget: on a loaded machine a slow read would turn into
		// a loader call, and the benchmark measures warm hits.
		opts := kura.Options{StoreTimeout: -1}
		if l1 {
			opts.L1 = kura.L1Options{MaxBytes: 64 << 20}
		}
		c, err := kura.New[benchValue](st, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		load := func(ctx context.Context, key string) (benchValue, error) {
			i, _ := strconv.Atoi(key[strings.IndexByte(key, ':')+1:])
			return newBenchValue(i), nil
		}
		cs = append(cs, contender{name, func(i int) error {
			_, err := c.Fetch(ctx, name+":"+strconv.Itoa(i), time.Hour, load)
			return err
		}, func() uint64 { return c.Stats().LoaderCalls }})
	}
	kuraL1("kura-l1", true)
	{
		st, err := redisstore.NewFromURL(ctx, srv.URL(), redisstore.Options{Tracking: redisstore.Tracking{Enabled: true}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		c, err := kura.New[clonedValue](st, kura.Options{StoreTimeout: -1, L1: kura.L1Options{MaxBytes: 64 << 20}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		load := func(ctx context.Context, key string) (clonedValue, error) {
			i, _ := strconv.Atoi(strings.TrimPrefix(key, "kura-l1-clone:"))
			return clonedValue(newBenchValue(i)), nil
		}
		cs = append(cs, contender{"kura-l1-clone", func(i int) error {
			_, err := c.Fetch(ctx, "kura-l1-clone:"+strconv.Itoa(i), time.Hour, load)
			return err
		}, func() uint64 { return c.Stats().LoaderCalls }})
	}
	cs = append(cs, asideContender(b, ctx, "rueidisaside", srv.Addr, false))
	{
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: conc})
		b.Cleanup(func() { rdb.Close() })
		cd := gocache.New(&gocache.Options{Redis: rdb, LocalCache: gocache.NewTinyLFU(2*benchKeys, time.Minute)})
		var loads atomic.Uint64
		cs = append(cs, contender{"go-redis-cache-tinylfu", func(i int) error {
			var v benchValue
			return cd.Once(&gocache.Item{Ctx: ctx, Key: "goredis:" + strconv.Itoa(i), Value: &v, TTL: time.Hour,
				Do: func(*gocache.Item) (any, error) { loads.Add(1); return newBenchValue(i), nil }})
		}, loads.Load})
	}
	kuraL1("kura", false)

	// Warm every contender: a load and write-back, then (for the tiers
	// that fill on a read) a read.
	raceContenders(b, cs, conc, 2, 3)
}

// raceContenders warms every contender's keys (passes reads of each; an
// L1 needs a second to serve from memory), then runs them in interleaved
// rounds (round1/a, round1/b, ..., round2/b, round2/c, ..., round2/a, ...:
// each round starts with the next contender, so no one always runs first
// or right after the same neighbour) of conc goroutines, so a drift of the
// machine touches every one alike.
func raceContenders(b *testing.B, cs []contender, conc, passes, rounds int) {
	warmContenders(b, cs, passes)
	for round := 1; round <= rounds; round++ {
		for i := range cs {
			c := cs[(round-1+i)%len(cs)]
			b.Run(fmt.Sprintf("round%d/%s", round, c.name), func(b *testing.B) {
				warmHitsOnly(b, conc, c.get, c.loads)
			})
		}
	}
}

// warmContenders reads every contender's keys passes times.
func warmContenders(b *testing.B, cs []contender, passes int) {
	for _, c := range cs {
		for pass := 0; pass < passes; pass++ {
			for i := 0; i < benchKeys; i++ {
				if err := c.get(i); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// warmHitsOnly is warmHits on a set already warm.
func warmHitsOnly(b *testing.B, conc int, get func(i int) error, loads func() uint64) {
	before := loads()
	var n atomic.Int64
	b.SetParallelism(conc / 2)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := get(int(n.Add(1)) % benchKeys); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if loads() != before {
		b.Fatal("the warm set missed: the benchmark would measure the loader")
	}
}

// BenchmarkL1Invalidation: process B (its own connection) writes a key
// that A holds in its L1; measures the delay from the start of B's write
// to A's L1 dropping the key (p50/p99 over the rounds), and, on the same
// rounds, counts the reads of go-redis/cache's TinyLFU local cache that
// returned the old value once kura's A had dropped it (it has no
// invalidation: it serves the old value until its local TTL).
func BenchmarkL1Invalidation(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	sa, err := redisstore.NewFromURL(ctx, srv.URL(), redisstore.Options{Tracking: redisstore.Tracking{Enabled: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer sa.Close()
	a, err := kura.New[benchValue](sa, kura.Options{L1: kura.L1Options{MaxBytes: 16 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	var dropped atomic.Int64 // unix ns of the last report handled
	cancel := sa.Subscribe(func([]string) { dropped.Store(time.Now().UnixNano()) })
	defer cancel()
	sb, err := redisstore.NewFromURL(ctx, srv.URL(), redisstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	w, err := kura.New[benchValue](sb, kura.Options{})
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ga := gocache.New(&gocache.Options{Redis: rdb, LocalCache: gocache.NewTinyLFU(1000, time.Minute)})
	gb := gocache.New(&gocache.Options{Redis: rdb})

	var delays []time.Duration
	var kuraStale, goStale int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := newBenchValue(i)
		t0 := time.Now().UnixNano()
		if err := w.Set(ctx, "inv", v, time.Hour); err != nil {
			b.Fatal(err)
		}
		// A read the key last round: let that report arrive, so the reads
		// below go to the server and track the key again.
		for i > 0 && dropped.Load() < t0 {
			time.Sleep(time.Microsecond)
		}
		if err := gb.Set(&gocache.Item{Ctx: ctx, Key: "goinv", Value: &v, TTL: time.Hour}); err != nil {
			b.Fatal(err)
		}
		// Both readers hold value i.
		for j := 0; j < 2; j++ {
			if got, err := a.Get(ctx, "inv"); err != nil || got.ID != i {
				b.Fatalf("kura A: %d, %v", got.ID, err)
			}
		}
		var gv benchValue
		if err := ga.Get(ctx, "goinv", &gv); err != nil {
			b.Fatal(err)
		}
		next := newBenchValue(i + 1)
		start := time.Now()
		if err := w.Set(ctx, "inv", next, time.Hour); err != nil {
			b.Fatal(err)
		}
		if err := gb.Set(&gocache.Item{Ctx: ctx, Key: "goinv", Value: &next, TTL: time.Hour}); err != nil {
			b.Fatal(err)
		}
		for dropped.Load() < start.UnixNano() {
			time.Sleep(time.Microsecond)
		}
		delays = append(delays, time.Duration(dropped.Load()-start.UnixNano()))
		if got, err := a.Get(ctx, "inv"); err != nil || got.ID != i+1 {
			kuraStale++
		}
		if err := ga.Get(ctx, "goinv", &gv); err != nil || gv.ID != i+1 {
			goStale++
		}
	}
	b.StopTimer()
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(kuraStale), "kura-stale-reads")
	b.ReportMetric(float64(goStale), "go-redis-cache-stale-reads")
}

// BenchmarkL1Zipf: zipf-distributed reads (s=1.1) over 1,000,000 keys of
// small values with 64 goroutines, for several L1 sizes: hit ratio and
// throughput. The keys are written once (the fill is not timed).
func BenchmarkL1Zipf(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{Args: []string{"--maxmemory", "0"}})
	ctx := context.Background()
	const keys = 1_000_000
	type small struct {
		ID   int    `msgpack:"id"`
		Name string `msgpack:"name"`
	}
	sw, err := redisstore.NewFromURL(ctx, srv.URL(), redisstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer sw.Close()
	w, err := kura.New[small](sw, kura.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for lo := 0; lo < keys; lo += 10000 {
		items := make(map[string]small, 10000)
		for i := lo; i < lo+10000; i++ {
			items["z:"+strconv.Itoa(i)] = small{i, "user " + strconv.Itoa(i)}
		}
		if err := w.SetMany(ctx, items, 0); err != nil {
			b.Fatal(err)
		}
	}
	for _, size := range []int64{256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("l1-%dKiB", size>>10), func(b *testing.B) {
			st, err := redisstore.NewFromURL(ctx, srv.URL(), redisstore.Options{Tracking: redisstore.Tracking{Enabled: true}})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			c, err := kura.New[small](st, kura.Options{L1: kura.L1Options{MaxBytes: size}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var seed atomic.Uint64
			var mu sync.Mutex
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				mu.Lock()
				z := rand.NewZipf(rand.New(rand.NewPCG(seed.Add(1), 7)), 1.1, 1, keys-1)
				mu.Unlock()
				for pb.Next() {
					if _, err := c.Get(ctx, "z:"+strconv.FormatUint(z.Uint64(), 10)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			st1 := c.Stats().L1
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			b.ReportMetric(float64(st1.Hits)/float64(st1.Hits+st1.Misses), "hit-ratio")
		})
	}
}

// contender is one client of a side-by-side read-path benchmark: its read
// of key i, and how many loads it has made.
type contender struct {
	name  string
	get   func(i int) error
	loads func() uint64
}

// asideContender is rueidisaside's cache-aside client over the server at
// addr as a contender of the read-path benchmarks: msgpack values, loads
// counted, keys "aside:<i>". disableCache turns off its client-side cache.
func asideContender(b *testing.B, ctx context.Context, name, addr string, disableCache bool) contender {
	ac, err := rueidisaside.NewClient(rueidisaside.ClientOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: disableCache}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ac.Close)
	tc := rueidisaside.NewTypedCacheAsideClient[benchValue](ac,
		func(v *benchValue) (string, error) { p, err := msgpack.Marshal(v); return string(p), err },
		func(s string) (*benchValue, error) {
			var v benchValue
			return &v, msgpack.Unmarshal([]byte(s), &v)
		})
	var loads atomic.Uint64
	return contender{name, func(i int) error {
		_, err := tc.Get(ctx, time.Hour, "aside:"+strconv.Itoa(i), func(context.Context, string) (*benchValue, error) {
			loads.Add(1)
			v := newBenchValue(i)
			return &v, nil
		})
		return err
	}, loads.Load}
}
