package kura_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/slot"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/redisstore"
)

func TestCacheMemory(t *testing.T) {
	runSuite(t, backend{name: "memory", open: memstoreBackend})
}

// memstoreBackend opens an in-process store, closed when the test ends.
func memstoreBackend(t *testing.T) store.Store {
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func redisBackend(url func() string) func(t *testing.T) store.Store {
	return func(t *testing.T) store.Store {
		s, err := redisstore.NewFromURL(context.Background(), url(), redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// memcachedBackend opens a memcached store over the servers at addrs for
// each test that asks, closed when the test ends.
func memcachedBackend(addrs ...string) func(t *testing.T) store.Store {
	return func(t *testing.T) store.Store {
		s, err := memcache.New(context.Background(), memcache.Options{Servers: addrs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

func TestCacheRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	runSuite(t, backend{name: "redis", open: func(t *testing.T) store.Store {
		if _, err := srv.Do(context.Background(), "FLUSHALL"); err != nil {
			t.Fatal(err)
		}
		return redisBackend(srv.URL)(t)
	}})
}

func TestCacheRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	cl := servertest.RedisCluster(t)
	runSuite(t, backend{name: "redis-cluster", open: func(t *testing.T) store.Store {
		for _, n := range cl.Nodes {
			if _, err := n.Do(context.Background(), "FLUSHALL"); err != nil {
				t.Fatal(err)
			}
		}
		return redisBackend(cl.URL)(t)
	}})
}

// TestFetchManyRoundTrips counts, through the servers' own INFO
// commandstats, what FetchMany of 100 cached keys sends: one MGET on a
// standalone server, one MGET per slot in a cluster.
func TestFetchManyRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	ctx := context.Background()
	keys := make([]string, 100)
	tagged := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("rt:%d", i)
		tagged[i] = fmt.Sprintf("{user:7}:item:%d", i) // one hash slot
	}
	fill := func(t *testing.T, c *kura.Cache[Profile], keys []string) {
		items := map[string]Profile{}
		for i, k := range keys {
			items[k] = profile(i)
		}
		if err := c.SetMany(ctx, items, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	noLoad := func(ctx context.Context, missing []string) (map[string]Profile, error) {
		return nil, fmt.Errorf("loader called for %d keys on a warm set", len(missing))
	}
	calls := func(t *testing.T, nodes []*servers.Redis) (mget, get int64) {
		for _, n := range nodes {
			info, err := n.Do(ctx, "INFO", "commandstats")
			if err != nil {
				t.Fatal(err)
			}
			m := servers.ParseInfo(info)
			mget += servers.CommandCalls(m, "mget")
			get += servers.CommandCalls(m, "get")
		}
		return
	}
	reset := func(t *testing.T, nodes []*servers.Redis) {
		for _, n := range nodes {
			if _, err := n.Do(ctx, "CONFIG", "RESETSTAT"); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("standalone", func(t *testing.T) {
		srv := servertest.Redis(t, servers.RedisConfig{})
		c := newCache(t, redisBackend(srv.URL)(t), kura.Options{})
		fill(t, c, keys)
		nodes := []*servers.Redis{srv}
		reset(t, nodes)
		got, err := c.FetchMany(ctx, keys, time.Hour, noLoad)
		if err != nil || len(got) != 100 {
			t.Fatalf("FetchMany: %d values, %v", len(got), err)
		}
		if mget, get := calls(t, nodes); mget != 1 || get != 0 {
			t.Fatalf("FetchMany of 100 keys sent %d MGET and %d GET, want 1 MGET", mget, get)
		}
	})

	t.Run("cluster", func(t *testing.T) {
		cl := servertest.RedisCluster(t)
		c := newCache(t, redisBackend(cl.URL)(t), kura.Options{})
		fill(t, c, keys)
		fill(t, c, tagged)
		slots := map[uint16]bool{}
		for _, k := range keys {
			slots[slot.Of(k)] = true
		}
		reset(t, cl.Nodes)
		if got, err := c.FetchMany(ctx, keys, time.Hour, noLoad); err != nil || len(got) != 100 {
			t.Fatalf("FetchMany: %d values, %v", len(got), err)
		}
		if mget, get := calls(t, cl.Nodes); mget+get != int64(len(slots)) {
			t.Fatalf("FetchMany over %d slots sent %d MGET + %d GET, want one per slot", len(slots), mget, get)
		}
		reset(t, cl.Nodes)
		if got, err := c.FetchMany(ctx, tagged, time.Hour, noLoad); err != nil || len(got) != 100 {
			t.Fatalf("FetchMany (one slot): %d values, %v", len(got), err)
		}
		if mget, get := calls(t, cl.Nodes); mget != 1 || get != 0 {
			t.Fatalf("FetchMany of 100 keys in one slot sent %d MGET and %d GET, want 1 MGET", mget, get)
		}
	})
}

// TestFetchSurvivesDeadServer stops the server and checks that Fetch and
// FetchMany still answer from the loader, counting the store errors.
func TestFetchSurvivesDeadServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	ctx := context.Background()
	srv := servertest.Redis(t, servers.RedisConfig{})
	var errs int
	c := newCache(t, redisBackend(srv.URL)(t), kura.Options{StoreTimeout: 2 * time.Second,
		OnError: func(op kura.Op, key string, err error) { errs++ }})
	if _, err := c.Fetch(ctx, "alive", time.Hour, func(context.Context, string) (Profile, error) { return profile(1), nil }); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	v, err := c.Fetch(ctx, "dead:1", time.Hour, func(context.Context, string) (Profile, error) { return profile(2), nil })
	if err != nil || v.ID != 2 {
		t.Fatalf("Fetch with the server down = %+v, %v; want the loader's value", v, err)
	}
	m, err := c.FetchMany(ctx, []string{"dead:2", "dead:3"}, time.Hour, func(_ context.Context, keys []string) (map[string]Profile, error) {
		return map[string]Profile{"dead:2": profile(2), "dead:3": profile(3)}, nil
	})
	if err != nil || len(m) != 2 {
		t.Fatalf("FetchMany with the server down = %v, %v", m, err)
	}
	if st := c.Stats(); st.StoreErrors == 0 || errs == 0 {
		t.Fatalf("store errors not counted: stats %d, OnError %d", st.StoreErrors, errs)
	}
}

func TestCacheMemcached(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	pool := servertest.MemcachedPool(t, 3, servers.MemcachedConfig{})
	addrs := servertest.Addrs(pool)
	runSuite(t, backend{name: "memcached", open: memcachedBackend(addrs...)})
}
