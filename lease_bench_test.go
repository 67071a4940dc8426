package kura_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/redisstore"
)

// BenchmarkLeaseHitPath measures warm Fetch (every key cached) with leases
// on and off on the same server at the same time: 64 callers, half of them
// on a Cache with leases and half on one without, interleaved, so both
// see the same machine load. It reports each side's mean latency and
// their ratio. With leases a hit is still one plain read (GET on Redis;
// on memcached an mg whose lease flags write nothing on a hit).
func BenchmarkLeaseHitPath(b *testing.B) {
	r := servertest.Redis(b, servers.RedisConfig{})
	mc := servertest.Memcached(b, servers.MemcachedConfig{})
	ctx := context.Background()
	opens := []struct {
		name string
		open func() (store.Store, error)
	}{
		{"redis", func() (store.Store, error) { return redisstore.NewFromURL(ctx, r.URL(), redisstore.Options{}) }},
		{"memcached", func() (store.Store, error) {
			return memcache.New(ctx, memcache.Options{Servers: []string{mc.Addr}, MaxIdleConns: 128})
		}},
	}
	const nkeys = 1000
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("leasebench:%d", i)
	}
	loader := func(_ context.Context, key string) (benchValue, error) { return newBenchValue(len(key)), nil }
	for _, o := range opens {
		b.Run(o.name, func(b *testing.B) {
			s, err := o.open()
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var caches [2]*kura.Cache[benchValue] // 0: leases off, 1: on
			for i, mode := range []kura.LeaseMode{kura.LeasesOff, kura.LeasesAuto} {
				if caches[i], err = kura.New[benchValue](s, kura.Options{Leases: mode}); err != nil {
					b.Fatal(err)
				}
			}
			for _, k := range keys {
				if _, err := caches[0].Fetch(ctx, k, time.Hour, loader); err != nil {
					b.Fatal(err)
				}
			}
			var spent [2]atomic.Int64
			var ops [2]atomic.Int64
			var next atomic.Int64
			b.SetParallelism(32) // 64 callers with GOMAXPROCS 2
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				side := int(next.Add(1) % 2)
				c := caches[side]
				i := int(next.Load() * 7919)
				for pb.Next() {
					start := time.Now()
					if _, err := c.Fetch(ctx, keys[i%nkeys], time.Hour, loader); err != nil {
						b.Error(err)
						return
					}
					spent[side].Add(int64(time.Since(start)))
					ops[side].Add(1)
					i += 7
				}
			})
			b.StopTimer()
			for i, c := range caches {
				if st := c.Stats(); st.LoaderCalls > 0 && i == 1 {
					b.Fatalf("%d loads on a warm key set", st.LoaderCalls)
				}
			}
			off := float64(spent[0].Load()) / float64(max(ops[0].Load(), 1))
			on := float64(spent[1].Load()) / float64(max(ops[1].Load(), 1))
			b.ReportMetric(off/1e3, "µs/fetch-leases-off")
			b.ReportMetric(on/1e3, "µs/fetch-leases-on")
			b.ReportMetric(on/off, "on/off")
		})
	}
}
