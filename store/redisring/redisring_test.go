package redisring_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/kuraprom"
	"github.com/kuracache/kura/ring"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/redisring"
	"github.com/kuracache/kura/store/redisstore"
	"github.com/kuracache/kura/store/storetest"
)

func shards(t testing.TB, n int) []string {
	_, addrs := servertest.RedisShards(t, n, servers.RedisConfig{})
	return addrs
}

func open(t testing.TB, opts redisring.Options) *redisring.Store {
	t.Helper()
	s, err := redisring.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs the store conformance suite on 3 loopback shards.
func TestConformance(t *testing.T) {
	addrs := shards(t, 3)
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, redisring.Options{Servers: addrs})
	})
}

// TestSameShardsAsGoRedisRing writes through kura and reads every key back
// through go-redis's Ring on the same 3 servers, and the other way round:
// both clients find each other's values, so they place every key alike.
func TestSameShardsAsGoRedisRing(t *testing.T) {
	ctx := context.Background()
	addrs := shards(t, 3)
	names := []string{"alpha", "beta", "gamma"}
	s := open(t, redisring.Options{Servers: addrs, IDs: names})
	ringAddrs := map[string]string{}
	for i, n := range names {
		ringAddrs[n] = addrs[i]
	}
	rg := redis.NewRing(&redis.RingOptions{Addrs: ringAddrs, HeartbeatFrequency: time.Hour})
	defer rg.Close()
	const n = 2000
	items := make([]store.Item, n)
	for i := range items {
		k := fmt.Sprintf("user:%d", i)
		if i%5 == 0 {
			k = fmt.Sprintf("{order:%d}:lines:%d", i/10, i)
		}
		items[i] = store.Item{Key: k, Value: []byte("kura-" + k)}
	}
	if err := s.SetMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	perShard := make([]int, 3)
	for _, it := range items {
		v, err := rg.Get(ctx, it.Key).Result()
		if err != nil || v != string(it.Value) {
			t.Fatalf("go-redis Ring reads %q as %q, %v", it.Key, v, err)
		}
		perShard[s.Ring().Owner(it.Key)]++
		if err := rg.Set(ctx, it.Key, "ring-"+it.Key, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([]string, n)
	for i := range items {
		keys[i] = items[i].Key
	}
	vals, err := s.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if string(v) != "ring-"+keys[i] {
			t.Fatalf("kura reads %q as %q after go-redis wrote it", keys[i], v)
		}
	}
	for i, c := range perShard {
		if c == 0 {
			t.Fatalf("shard %d got no key: %v", i, perShard)
		}
		// And the keys are where NodeOf says, on the server itself.
		direct, err := servers.RedisDo(ctx, addrs[i], "", "DBSIZE")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(direct) != fmt.Sprint(c) {
			t.Errorf("shard %d holds %s keys, ring says %d", i, direct, c)
		}
	}
}

// TestInvalidateReachesTheOwningShard: Invalidate of keys spread over all
// shards leaves none of them readable as fresh.
func TestInvalidateReachesTheOwningShard(t *testing.T) {
	ctx := context.Background()
	s := open(t, redisring.Options{Servers: shards(t, 3)})
	keys := make([]string, 300)
	items := make([]store.Item, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprintf("inv:%d", i)
		items[i] = store.Item{Key: keys[i], Value: []byte("v")}
	}
	if err := s.SetMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	if err := s.Invalidate(ctx, keys, 0); err != nil {
		t.Fatal(err)
	}
	vals, err := s.GetMany(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if v != nil {
			t.Fatalf("%s still reads %q after Invalidate", keys[i], v)
		}
	}
}

// TestDownShardFailsOnlyItsKeys: with one shard stopped, a batch fails
// exactly that shard's keys (named by its address, so the health breaker
// opens for that shard alone) and the other shards' keys are served; no
// key is moved to another shard.
func TestDownShardFailsOnlyItsKeys(t *testing.T) {
	ctx := context.Background()
	rs, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
	base := open(t, redisring.Options{Servers: addrs, Redis: redisstore.Options{MaxRetries: -1}})
	hs, err := health.New(base, health.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 300)
	items := make([]store.Item, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprintf("k:%d", i)
		items[i] = store.Item{Key: keys[i], Value: []byte(keys[i])}
	}
	if err := base.SetMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	rs[1].Stop()
	for round := 0; round < 3; round++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		vals, err := hs.GetMany(cctx, keys)
		cancel()
		var be *store.BatchError
		if !errors.As(err, &be) {
			t.Fatalf("round %d: GetMany with a shard down = %v, want a *store.BatchError", round, err)
		}
		failed := map[string]bool{}
		for _, ke := range be.Errors {
			failed[ke.Key] = true
			if ne := store.AsNodeError(ke.Err); ke.Addr != addrs[1] && (ne == nil || ne.Addr != addrs[1]) {
				t.Fatalf("key %s failed with %v, not naming the down shard %s", ke.Key, ke.Err, addrs[1])
			}
		}
		for i, k := range keys {
			onDown := base.NodeOf(k) == addrs[1]
			if onDown != failed[k] {
				t.Fatalf("round %d: %s (on down shard: %v) failed: %v", round, k, onDown, failed[k])
			}
			if !onDown && string(vals[i]) != k {
				t.Fatalf("round %d: %s on a live shard read %q", round, k, vals[i])
			}
		}
	}
	checkShardStats(t, hs, addrs, addrs[1])
}

// checkShardStats: the breaker's Stats and kura's Prometheus collector
// have one entry per shard, by address, and only the down shard is
// counted failing.
func checkShardStats(t *testing.T, hs *health.Store, addrs []string, down string) {
	t.Helper()
	st := hs.Stats()
	if len(st.Nodes) != len(addrs) {
		t.Fatalf("health.Stats has %d nodes, want one per shard (%d)", len(st.Nodes), len(addrs))
	}
	for _, n := range st.Nodes {
		if !slices.Contains(addrs, n.Addr) {
			t.Fatalf("health.Stats names %s, not a shard", n.Addr)
		}
		if failing := n.RequestFailures > 0 || n.State != health.Up; failing != (n.Addr == down) {
			t.Errorf("shard %s: state %v, %d request failures (down shard: %s)", n.Addr, n.State, n.RequestFailures, down)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(kuraprom.NewHealthCollector("sessions", hs))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "node" {
					seen[l.GetValue()] = true
				}
			}
		}
	}
	for _, a := range addrs {
		if !seen[a] {
			t.Errorf("no kura_node_* series labelled node=%q", a)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []redisring.Options{
		{},
		{Servers: []string{"127.0.0.1:1", "127.0.0.1:1"}},
		{Servers: []string{"nohostport"}},
		{Servers: []string{"127.0.0.1:1"}, Weights: []int{1, 2}},
		{Servers: []string{"127.0.0.1:1"}, Weights: []int{2}}, // go-redis has no weights
		{Servers: []string{"127.0.0.1:1"}, Ring: "modulo"},
		{Servers: []string{"127.0.0.1:1"}, Redis: redisstore.Options{Addrs: []string{"x:1"}}},
		{Servers: []string{"127.0.0.1:1"}, IDs: []string{"a", "b"}},
	} {
		if _, err := redisring.NewRing(o); err == nil {
			t.Errorf("NewRing(%+v) accepted", o)
		}
	}
	if _, err := redisring.NewRing(redisring.Options{Servers: []string{"127.0.0.1:1", "127.0.0.1:2"}, Weights: []int{1, 3}, Ring: ring.ModeKetama}); err != nil {
		t.Errorf("ketama with weights: %v", err)
	}
}

// TestPrefixAndMetaOnTheOwningShard: kura inspect's bounded read and key
// metadata go to the shard that holds the key.
func TestPrefixAndMetaOnTheOwningShard(t *testing.T) {
	ctx := context.Background()
	s := open(t, redisring.Options{Servers: shards(t, 3)})
	for i := range 30 {
		k := fmt.Sprintf("big:%d", i)
		if err := s.Set(ctx, k, []byte(strings.Repeat("x", 1000+i)), time.Hour); err != nil {
			t.Fatal(err)
		}
		p, size, err := s.GetPrefix(ctx, k, 10)
		if err != nil || string(p) != "xxxxxxxxxx" || size != int64(1000+i) {
			t.Fatalf("GetPrefix(%s, 10) = %q, %d, %v", k, p, size, err)
		}
		m, err := s.KeyMeta(ctx, k)
		if err != nil || m.Node != s.NodeOf(k) || m.NoTTL || m.TTL <= 0 {
			t.Fatalf("KeyMeta(%s) = %+v, %v; want its shard %s and a TTL", k, m, err, s.NodeOf(k))
		}
	}
	if _, _, err := s.GetPrefix(ctx, "no:such:key", 10); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetPrefix of a missing key = %v", err)
	}
}
