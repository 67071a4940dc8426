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
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/redisstore"
)

// missRuns numbers the runs of BenchmarkMissWrite's FetchMiss.
var missRuns atomic.Int64

// BenchmarkMissWrite measures what a write costs the Cache in allocations
// and bytes: a Fetch miss (load, encode, write back: plain on memstore,
// under a lease on Redis), a Set, and a SetMany of 100, with the 1 KB
// benchValue. The encode buffer is what issue 26 reuses; the rest is the
// read path and the store (memstore copies the value; rueidis builds the
// command). Compare B/op and allocs/op before and after.
func BenchmarkMissWrite(b *testing.B) {
	v := newBenchValue(1)
	backends := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"memstore", func(b *testing.B) store.Store {
			s, err := memstore.New(memstore.Options{MaxBytes: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"redis", func(b *testing.B) store.Store {
			rs := servertest.Redis(b, servers.RedisConfig{})
			s, err := redisstore.New(context.Background(), redisstore.Options{Addrs: []string{rs.Addr}, FailFast: true})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			c, err := kura.New[benchValue](s, kura.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close(); _ = s.Close() })
			ctx := context.Background()
			load := func(context.Context, string) (benchValue, error) { return v, nil }
			b.Run("FetchMiss", func(b *testing.B) {
				// Keys no earlier run (-count, the b.N ramp) has filled.
				run := missRuns.Add(1)
				keys := make([]string, b.N)
				for i := range keys {
					keys[i] = fmt.Sprintf("miss:%d:%d", run, i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := c.Fetch(ctx, keys[i], time.Hour, load); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("Set", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := c.Set(ctx, "set", v, time.Hour); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("SetMany100", func(b *testing.B) {
				items := make(map[string]benchValue, 100)
				for i := range 100 {
					items[fmt.Sprintf("many:%d", i)] = v
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := c.SetMany(ctx, items, time.Hour); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
