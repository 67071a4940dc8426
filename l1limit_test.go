package kura_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/redisstore"
)

// TestL1HitAllocatesNothing: a warm L1 hit (Fetch and Get) allocates
// nothing, over Redis with Tracking and over a store without reports
// (MaxStaleness), and Stats counts every hit exactly, from parallel
// callers too (the hit counters are striped).
func TestL1HitAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	backends := []struct {
		name string
		s    func(t *testing.T) store.Store
		l1   kura.L1Options
	}{
		{"redis-tracking", func(t *testing.T) store.Store {
			return trackingStore(t, srv.URL(), redisstore.Tracking{})
		}, kura.L1Options{MaxBytes: 1 << 20}},
		{"memstore-maxstaleness", func(t *testing.T) store.Store {
			s, err := memstore.New(memstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}, kura.L1Options{MaxBytes: 1 << 20, MaxStaleness: time.Hour}},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			c, err := kura.New[smallValue](be.s(t), kura.Options{L1: be.l1})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			keys := []string{"hit:a", "hit:b", "hit:c"}
			load := func(_ context.Context, key string) (smallValue, error) {
				return smallValue{ID: len(key), Name: key}, nil
			}
			for pass := 0; pass < 2; pass++ { // load and write back, then fill the L1
				for _, k := range keys {
					if _, err := c.Fetch(ctx, k, time.Hour, load); err != nil {
						t.Fatal(err)
					}
				}
			}
			before := c.Stats()
			const runs = 1000
			i := 0
			fetch := testing.AllocsPerRun(runs, func() {
				i++
				if v, err := c.Fetch(ctx, keys[i%len(keys)], time.Hour, load); err != nil || v.Name != keys[i%len(keys)] {
					t.Fatalf("Fetch = %+v, %v", v, err)
				}
			})
			get := testing.AllocsPerRun(runs, func() {
				i++
				if v, err := c.Get(ctx, keys[i%len(keys)]); err != nil || v.Name != keys[i%len(keys)] {
					t.Fatalf("Get = %+v, %v", v, err)
				}
			})
			if fetch != 0 || get != 0 {
				t.Errorf("allocations per L1 hit: Fetch %v, Get %v; want 0", fetch, get)
			}
			const par, each = 8, 2000
			var wg sync.WaitGroup
			for w := range par {
				wg.Go(func() {
					for j := range each {
						if _, err := c.Fetch(ctx, keys[(w+j)%len(keys)], time.Hour, load); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			// AllocsPerRun makes one warm-up call of each function too.
			want := uint64(2*(runs+1) + par*each)
			after := c.Stats()
			if got := after.L1.Hits - before.L1.Hits; got != want {
				t.Errorf("Stats().L1.Hits grew by %d over %d hits", got, want)
			}
			if got := after.Hits - before.Hits; got != want {
				t.Errorf("Stats().Hits grew by %d over %d hits", got, want)
			}
			if after.L1.Misses != before.L1.Misses || after.LoaderCalls != before.LoaderCalls {
				t.Errorf("L1 misses %d -> %d, loads %d -> %d during hits only", before.L1.Misses, after.L1.Misses, before.LoaderCalls, after.LoaderCalls)
			}
		})
	}
}
