package kuraotel_test

import (
	"context"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/kuraotel"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/storetest"
)

// TestWrappedStoreConformance: a store wrapped with spans (every call
// recorded: RootSpans) keeps the store contract, leases included, on
// Redis and on memcached.
func TestWrappedStoreConformance(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		rs := servertest.Redis(t, servers.RedisConfig{})
		r := newRecorder(t)
		storetest.Run(t, func(t *testing.T) store.Store {
			return kuraotel.WrapStore(redisStore(t, rs.Addr), kuraotel.StoreOptions{TracerProvider: r.tp, RootSpans: true})
		})
		if len(r.named("MGET")) == 0 {
			t.Error("no MGET server batch was recorded")
		}
	})
	t.Run("memcached", func(t *testing.T) {
		pool := servertest.MemcachedPool(t, 2, servers.MemcachedConfig{MaxItemSize: 2 << 20})
		r := newRecorder(t)
		storetest.RunWithOptions(t, func(t *testing.T) store.Store {
			s, err := memcache.New(context.Background(), memcache.Options{Servers: servertest.Addrs(pool)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return kuraotel.WrapStore(s, kuraotel.StoreOptions{TracerProvider: r.tp, RootSpans: true})
		}, storetest.Options{LargeValue: 1 << 20})
		if len(r.named("mg")) == 0 {
			t.Error("no mg server batch was recorded")
		}
	})
}
