package redisring_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
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
	rg    *redis.Ring
	keys  [][]string // batches of 100 keys
	ckeys [][]string // the same through the Cache (its own keys)
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
	f := &benchFixture{s: s, cache: c, rg: rg}
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
	b.Run("kura-GetMany", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := f.kuraGetMany(ctx, i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kura-FetchMany", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := f.kuraFetchMany(ctx, i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-redis-Ring-pipeline", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := f.ringPipeline(ctx, i); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRatioVsGoRedisRing prints the medians of interleaved rounds (kura
// GetMany, kura FetchMany, a go-redis Ring pipeline of 100 GETs, in turn,
// on the same 3 shards) after checking that all three return the same
// values. It times nothing it asserts: run it with KURA_BENCH=1 (command
// in BENCHMARKS.md).
func TestRatioVsGoRedisRing(t *testing.T) {
	if os.Getenv("KURA_BENCH") == "" {
		t.Skip("a measurement: KURA_BENCH=1 runs it")
	}
	ctx := context.Background()
	f := newBenchFixture(t)
	for i := range f.keys {
		a, err := f.kuraGetMany(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		b, err := f.ringPipeline(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		m, err := f.kuraFetchMany(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		for j := range a {
			if !bytes.Equal(a[j], b[j]) || len(a[j]) != 200 || !bytes.Equal(m[f.ckeys[i][j]], a[j]) {
				t.Fatalf("kura and go-redis Ring disagree on %s", f.keys[i][j])
			}
		}
	}
	const rounds, calls = 9, 2000
	run := func(fn func(int) error) time.Duration {
		start := time.Now()
		for i := 0; i < calls; i++ {
			if err := fn(i); err != nil {
				t.Fatal(err)
			}
		}
		return time.Since(start) / calls
	}
	var get, fetch, ring []time.Duration
	for r := 0; r < rounds; r++ {
		ring = append(ring, run(func(i int) error { _, err := f.ringPipeline(ctx, i); return err }))
		get = append(get, run(func(i int) error { _, err := f.kuraGetMany(ctx, i); return err }))
		fetch = append(fetch, run(func(i int) error { _, err := f.kuraFetchMany(ctx, i); return err }))
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	mr, mg, mf := med(ring), med(get), med(fetch)
	t.Logf("100 warm keys per call, 3 shards, medians of %d interleaved rounds of %d calls:", rounds, calls)
	t.Logf("go-redis Ring pipeline of 100 GETs: %v/call (1.00x)", mr)
	t.Logf("kura redisring GetMany:             %v/call (%.2fx)", mg, float64(mr)/float64(mg))
	t.Logf("kura Cache.FetchMany:               %v/call (%.2fx)", mf, float64(mr)/float64(mf))
}
