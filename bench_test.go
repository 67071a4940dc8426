package kura_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gocache "github.com/go-redis/cache/v9"
	"github.com/redis/go-redis/v9"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// benchKeys is the warm key set of the read-through benchmark.
const benchKeys = 10000

// benchValue is a 1 KB record: a struct, as a service caches.
type benchValue struct {
	ID      int      `msgpack:"id"`
	Name    string   `msgpack:"name"`
	Email   string   `msgpack:"email"`
	Tags    []string `msgpack:"tags"`
	Payload []byte   `msgpack:"payload"`
}

func newBenchValue(i int) benchValue {
	// Payload bytes are pseudo-random so neither side wins by compression:
	// the benchmark measures the read path, not the codec.
	p := make([]byte, 900)
	x := uint32(i*2654435761 + 1)
	for j := range p {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[j] = byte(x)
	}
	return benchValue{ID: i, Name: "user " + strconv.Itoa(i), Email: fmt.Sprintf("u%d@example.com", i),
		Tags: []string{"go", "redis", "cache"}, Payload: p}
}

// BenchmarkReadThrough measures Fetch on a warm key set with 64 concurrent
// callers against one private redis-server, side by side with go-redis/cache
// Once (same data, same server, same concurrency), and reports
// redis-benchmark -t get -d 1024 -P 16 -c 64 on the same server as the
// ceiling. Compare the ops/s metric across sub-benchmarks.
func BenchmarkReadThrough(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	const conc = 64

	kuraFetch := func(opts redisstore.Options) func(b *testing.B) {
		return func(b *testing.B) {
			st, err := redisstore.NewFromURL(ctx, srv.URL(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			c, err := kura.New[benchValue](st, kura.Options{})
			if err != nil {
				b.Fatal(err)
			}
			load := func(ctx context.Context, key string) (benchValue, error) {
				i, _ := strconv.Atoi(strings.TrimPrefix(key, "kura:"))
				return newBenchValue(i), nil
			}
			warmHits(b, conc, func(i int) error {
				_, err := c.Fetch(ctx, "kura:"+strconv.Itoa(i), time.Hour, load)
				return err
			}, func() uint64 { return c.Stats().LoaderCalls })
		}
	}
	b.Run("kura", kuraFetch(redisstore.Options{}))
	// The same with rueidis' flush delay off, to show what the 20µs
	// default (redisstore.DefaultMaxFlushDelay) is worth.
	b.Run("kura-flush-delay-off", kuraFetch(redisstore.Options{MaxFlushDelay: -1}))

	b.Run("go-redis-cache", func(b *testing.B) {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: conc})
		defer rdb.Close()
		cd := gocache.New(&gocache.Options{Redis: rdb}) // no local cache: same job as kura here
		var loads atomic.Uint64
		warmHits(b, conc, func(i int) error {
			var v benchValue
			return cd.Once(&gocache.Item{Ctx: ctx, Key: "goredis:" + strconv.Itoa(i), Value: &v, TTL: time.Hour,
				Do: func(*gocache.Item) (any, error) { loads.Add(1); return newBenchValue(i), nil }})
		}, loads.Load)
	})

	b.Run("redis-benchmark-ceiling", func(b *testing.B) {
		bin, err := servers.LookPath("redis-benchmark")
		if err != nil {
			b.Skip(err)
		}
		// Write the keys redis-benchmark reads, with 1 KB values, so its
		// GETs move what Fetch moves instead of nil replies.
		if out, err := exec.Command(bin, "-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port()),
			"-t", "set", "-d", "1024", "-P", "16", "-c", strconv.Itoa(conc), "-n", strconv.Itoa(4*benchKeys),
			"-r", strconv.Itoa(benchKeys), "-q").CombinedOutput(); err != nil {
			b.Fatalf("redis-benchmark prefill: %v: %s", err, out)
		}
		// One benchmark op is one GET, so the framework sizes the run as
		// it does for the Go clients.
		n := max(b.N, 10000)
		b.ResetTimer()
		out, err := exec.Command(bin, "-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port()),
			"-t", "get", "-d", "1024", "-P", "16", "-c", strconv.Itoa(conc), "-n", strconv.Itoa(n),
			"-r", strconv.Itoa(benchKeys), "--csv").CombinedOutput()
		if err != nil {
			b.Fatalf("redis-benchmark: %v: %s", err, out)
		}
		rps, err := parseRedisBenchmarkCSV(out)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(rps, "ops/s")
	})
}

// warmHits fills keys 0..benchKeys-1 through get, then times get on them
// from conc goroutines and reports ops/s. loads counts loader calls: if it
// moves during the timed part, the benchmark measured the loader, not hits,
// and fails.
func warmHits(b *testing.B, conc int, get func(i int) error, loads func() uint64) {
	for i := 0; i < benchKeys; i++ {
		if err := get(i); err != nil {
			b.Fatal(err)
		}
	}
	before := loads()
	var n atomic.Int64
	b.SetParallelism(conc / min(conc, max(1, runtime.GOMAXPROCS(0))))
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

// parseRedisBenchmarkCSV returns the requests per second of the GET row.
func parseRedisBenchmarkCSV(out []byte) (float64, error) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		f := strings.Split(strings.ReplaceAll(string(line), `"`, ""), ",")
		if len(f) >= 2 && f[0] == "GET" {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("no GET row in redis-benchmark output: %s", out)
}

// BenchmarkFetchSerial is one caller doing one Fetch at a time: the latency
// a lone request sees, with redisstore's default 20µs MaxFlushDelay and
// with the delay off, to show the delay costs nothing when nobody queues.
func BenchmarkFetchSerial(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	for _, v := range []struct {
		name  string
		delay time.Duration
	}{{"flush-delay-20us", 0}, {"flush-delay-off", -1}} {
		b.Run(v.name, func(b *testing.B) {
			st, err := redisstore.NewFromURL(ctx, srv.URL(), redisstore.Options{MaxFlushDelay: v.delay})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			c, err := kura.New[benchValue](st, kura.Options{})
			if err != nil {
				b.Fatal(err)
			}
			load := func(ctx context.Context, key string) (benchValue, error) { return newBenchValue(1), nil }
			if _, err := c.Fetch(ctx, "serial", time.Hour, load); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Fetch(ctx, "serial", time.Hour, load); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
