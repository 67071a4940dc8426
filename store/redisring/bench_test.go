package redisring_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisring"
)

// benchFixture is 3 loopback shards holding 1,000 warm keys of 200 bytes,
// a kura store and a go-redis Ring over the same servers (shard names are
// the addresses, kura's default identity for the go-redis ring).
type benchFixture struct {
	s     *redisring.Store
	cache *kura.Cache[[]byte]
	// the same over a Store that runs each shard's MGET on a new
	// goroutine (redisring.NoWorkers): both ways in one run
	s2     *redisring.Store
	cache2 *kura.Cache[[]byte]
	rg     *redis.Ring
	keys   [][]string // batches of 100 keys
	ckeys  [][]string // the same through the Cache (its own keys)
}

func newBenchFixture(tb testing.TB) *benchFixture {
	ctx := context.Background()
	addrs := shards(tb, 3)
	s := open(tb, redisring.Options{Servers: addrs})
	ra := map[string]string{}
	for _, a := range addrs {
		ra[a] = a
	}
	rg := redis.NewRing(&redis.RingOptions{Addrs: ra, HeartbeatFrequency: time.Hour})
	tb.Cleanup(func() { _ = rg.Close() })
	c, err := kura.New[[]byte](s, kura.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	s2 := open(tb, redisring.Options{Servers: addrs})
	redisring.NoWorkers(s2)
	c2, err := kura.New[[]byte](s2, kura.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	f := &benchFixture{s: s, cache: c, s2: s2, cache2: c2, rg: rg}
	val := bytes.Repeat([]byte("v"), 200)
	for b := 0; b < 10; b++ {
		var ks, cks []string
		var items []store.Item
		for i := 0; i < 100; i++ {
			k := fmt.Sprintf("bench:%d:%d", b, i)
			ks = append(ks, k)
			items = append(items, store.Item{Key: k, Value: val})
			ck := "c" + k
			cks = append(cks, ck)
			if err := c.Set(ctx, ck, val, 0); err != nil {
				tb.Fatal(err)
			}
		}
		if err := s.SetMany(ctx, items); err != nil {
			tb.Fatal(err)
		}
		f.keys, f.ckeys = append(f.keys, ks), append(f.ckeys, cks)
	}
	return f
}

func (f *benchFixture) kuraGetMany(ctx context.Context, i int) ([][]byte, error) {
	return f.s.GetMany(ctx, f.keys[i%len(f.keys)])
}

func (f *benchFixture) kuraFetchMany(ctx context.Context, i int) (map[string][]byte, error) {
	return f.cache.FetchMany(ctx, f.ckeys[i%len(f.ckeys)], time.Hour, func(context.Context, []string) (map[string][]byte, error) {
		return nil, fmt.Errorf("the keys are warm: no load expected")
	})
}

func (f *benchFixture) kuraGetManyNoWorkers(ctx context.Context, i int) ([][]byte, error) {
	return f.s2.GetMany(ctx, f.keys[i%len(f.keys)])
}

func (f *benchFixture) kuraFetchManyNoWorkers(ctx context.Context, i int) (map[string][]byte, error) {
	return f.cache2.FetchMany(ctx, f.ckeys[i%len(f.ckeys)], time.Hour, func(context.Context, []string) (map[string][]byte, error) {
		return nil, fmt.Errorf("the keys are warm: no load expected")
	})
}

func (f *benchFixture) ringPipeline(ctx context.Context, i int) ([][]byte, error) {
	ks := f.keys[i%len(f.keys)]
	cmds := make([]*redis.StringCmd, len(ks))
	_, err := f.rg.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, k := range ks {
			cmds[j] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(ks))
	for j, c := range cmds {
		out[j], _ = c.Bytes()
	}
	return out, nil
}

// BenchmarkGetMany100 reads 100 warm keys per call from 3 shards.
func BenchmarkGetMany100(b *testing.B) {
	f := newBenchFixture(b)
	ctx := context.Background()
	for _, sub := range []struct {
		name string
		fn   func(i int) error
	}{
		{"kura-GetMany", func(i int) error { _, err := f.kuraGetMany(ctx, i); return err }},
		{"kura-FetchMany", func(i int) error { _, err := f.kuraFetchMany(ctx, i); return err }},
		{"kura-GetMany-new-goroutines", func(i int) error { _, err := f.kuraGetManyNoWorkers(ctx, i); return err }},
		{"kura-FetchMany-new-goroutines", func(i int) error { _, err := f.kuraFetchManyNoWorkers(ctx, i); return err }},
		{"go-redis-Ring-pipeline", func(i int) error { _, err := f.ringPipeline(ctx, i); return err }},
	} {
		b.Run(sub.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if err := sub.fn(i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRatioVsGoRedisRing prints, for kura GetMany, kura LeaseGet
// (FetchMany's store call), kura FetchMany, GetMany and FetchMany over a
// Store that runs each shard's MGET on a new goroutine instead of one of
// its workers (redisring.NoWorkers: the way before workers.go), and a
// go-redis Ring pipeline of 100 GETs on the same 3 shards, the median
// time per call and the median ratio to go-redis over short interleaved
// rounds, after checking that they all return the same values. It times nothing it asserts: run it
// with KURA_BENCH=1 (command in BENCHMARKS.md).
func TestRatioVsGoRedisRing(t *testing.T) {
	if os.Getenv("KURA_BENCH") == "" {
		t.Skip("a measurement: KURA_BENCH=1 runs it")
	}
	ctx := context.Background()
	f := newBenchFixture(t)
	for i := range f.keys {
		bs, ms := must[[][]byte](t), must[map[string][]byte](t)
		a, b, a2 := bs(f.kuraGetMany(ctx, i)), bs(f.ringPipeline(ctx, i)), bs(f.kuraGetManyNoWorkers(ctx, i))
		m, m2 := ms(f.kuraFetchMany(ctx, i)), ms(f.kuraFetchManyNoWorkers(ctx, i))
		for j := range a {
			if !bytes.Equal(a[j], b[j]) || len(a[j]) != 200 || !bytes.Equal(m[f.ckeys[i][j]], a[j]) ||
				!bytes.Equal(a2[j], a[j]) || !bytes.Equal(m2[f.ckeys[i][j]], a[j]) {
				t.Fatalf("kura and go-redis Ring disagree on %s", f.keys[i][j])
			}
		}
	}
	// Short rounds, in a rotating order, and the ratio taken per round:
	// on a shared machine the load drifts over seconds, and a ratio of two
	// neighbouring 200-call runs sees the same load.
	const rounds, calls = 45, 200
	run := func(fn func(int) error) time.Duration {
		start := time.Now()
		for i := 0; i < calls; i++ {
			if err := fn(i); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start) / calls
	}
	// The store call FetchMany makes (leases are on by default): what the
	// Cache adds is FetchMany's time minus this.
	lopts := store.LeaseOptions{TTL: time.Second, Placeholder: []byte("\x00bench-placeholder")}
	subjects := []struct {
		name string
		fn   func(int) error
	}{
		{"go-redis Ring pipeline of 100 GETs", func(i int) error { _, err := f.ringPipeline(ctx, i); return err }},
		{"kura redisring GetMany", func(i int) error { _, err := f.kuraGetMany(ctx, i); return err }},
		{"kura redisring LeaseGet (warm)", func(i int) error {
			_, err := f.s.LeaseGet(ctx, f.ckeys[i%len(f.ckeys)], lopts)
			return err
		}},
		{"kura Cache.FetchMany", func(i int) error { _, err := f.kuraFetchMany(ctx, i); return err }},
		{"kura GetMany, new goroutines", func(i int) error { _, err := f.kuraGetManyNoWorkers(ctx, i); return err }},
		{"kura FetchMany, new goroutines", func(i int) error { _, err := f.kuraFetchManyNoWorkers(ctx, i); return err }},
	}
	times := make([][]time.Duration, len(subjects))
	ratios := make([][]float64, len(subjects))
	// CPU per call, this process (the client, every goroutine) and the
	// three redis-servers (INFO cpu): what the load of the machine does
	// not change.
	clientCPU := make([]time.Duration, len(subjects))
	serverCPU := make([]time.Duration, len(subjects))
	infos := make([]*redis.Client, 0, 3)
	for _, a := range f.s.Nodes() {
		c := redis.NewClient(&redis.Options{Addr: a})
		defer c.Close()
		infos = append(infos, c)
	}
	serverNow := func() time.Duration {
		var d time.Duration
		for _, c := range infos {
			d += redisCPU(t, c)
		}
		return d
	}
	for r := 0; r < rounds; r++ {
		got := make([]time.Duration, len(subjects))
		for j := range subjects {
			k := (j + r) % len(subjects)
			c0, s0 := processCPU(t), serverNow()
			got[k] = run(subjects[k].fn)
			clientCPU[k] += processCPU(t) - c0
			serverCPU[k] += serverNow() - s0
		}
		for k := range subjects {
			times[k] = append(times[k], got[k])
			ratios[k] = append(ratios[k], float64(got[0])/float64(got[k]))
		}
	}
	q := func(xs []float64, p float64) float64 { slices.Sort(xs); return xs[int(p*float64(len(xs)-1))] }
	t.Logf("100 warm keys per call, 3 shards, %d interleaved rounds of %d calls each (order rotating);", rounds, calls)
	t.Logf("per call: median; vs go-redis: median of the per-round ratios [25th-75th percentile]:")
	n := time.Duration(rounds * calls)
	for k, sj := range subjects {
		slices.Sort(times[k])
		t.Logf("%-36s %9v/call  %.2fx [%.2f-%.2f]", sj.name+":", times[k][len(times[k])/2],
			q(ratios[k], 0.5), q(ratios[k], 0.25), q(ratios[k], 0.75))
	}
	t.Logf("CPU per call (client process + the 3 redis-servers), and go-redis's total over kura's:")
	for k, sj := range subjects {
		t.Logf("%-36s client %7v  servers %7v  total %7v  %.2fx", sj.name+":", clientCPU[k]/n, serverCPU[k]/n,
			(clientCPU[k]+serverCPU[k])/n, float64(clientCPU[0]+serverCPU[0])/float64(clientCPU[k]+serverCPU[k]))
	}
}

// must[T](t)(v, err) is v, failing t on err.
func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// processCPU is the user and system CPU time of this process so far.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is a redis-server's used_cpu_user + used_cpu_sys so far.
func redisCPU(t *testing.T, c *redis.Client) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var d time.Duration
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			d += time.Duration(f * float64(time.Second))
		}
	}
	return d
}
