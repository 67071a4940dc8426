// Package servertest gives tests private real servers: redis-server,
// a Redis Cluster, and memcached, each on free loopback ports and stopped
// when the test ends; and the fault injectors of internal/harness/faults (a proxy,
// a black hole), closed when the test ends.
//
// When a server binary is missing the test is skipped, except under
// CI=true, where a missing server fails the test: CI must prove the code
// against real servers, and `make test` installs them.
package servertest

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
)

// required reports whether missing servers must fail rather than skip.
func required() bool { return os.Getenv("CI") == "true" || os.Getenv("KURA_REQUIRE_SERVERS") == "1" }

func handle(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, servers.ErrNotInstalled) && !required() {
		tb.Skipf("skipping: %v", err)
	}
	tb.Fatalf("servertest: %v", err)
}

// Redis starts a standalone redis-server for the test.
func Redis(tb testing.TB, cfg servers.RedisConfig) *servers.Redis {
	tb.Helper()
	r, err := servers.StartRedis(context.Background(), cfg)
	if err != nil {
		handle(tb, err)
	}
	tb.Cleanup(r.Stop)
	return r
}

// RedisCluster starts a Redis Cluster of 3 masters for the test.
func RedisCluster(tb testing.TB) *servers.RedisCluster {
	tb.Helper()
	c, err := servers.StartRedisCluster(context.Background(), 3)
	if err != nil {
		handle(tb, err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// RedisClusterWith starts a Redis Cluster with replicas (see
// servers.StartRedisClusterWith) for the test.
func RedisClusterWith(tb testing.TB, cfg servers.ClusterConfig) *servers.RedisCluster {
	tb.Helper()
	c, err := servers.StartRedisClusterWith(context.Background(), cfg)
	if err != nil {
		handle(tb, err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// RedisClusterAt starts a Redis Cluster with one master per port on the
// loopback address host, for the test.
func RedisClusterAt(tb testing.TB, host string, ports []int) *servers.RedisCluster {
	tb.Helper()
	c, err := servers.StartRedisClusterAt(context.Background(), host, ports)
	if err != nil {
		handle(tb, err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// Memcached starts one memcached for the test.
func Memcached(tb testing.TB, cfg servers.MemcachedConfig) *servers.Memcached {
	tb.Helper()
	m, err := servers.StartMemcached(context.Background(), cfg)
	if err != nil {
		handle(tb, err)
	}
	tb.Cleanup(m.Stop)
	return m
}

// MemcachedPool starts n memcached servers for the test.
func MemcachedPool(tb testing.TB, n int, cfg servers.MemcachedConfig) []*servers.Memcached {
	tb.Helper()
	ms := make([]*servers.Memcached, n)
	for i := range ms {
		ms[i] = Memcached(tb, cfg)
	}
	return ms
}

// Addrs returns the host:port of each server of a memcached pool, in order.
func Addrs(pool []*servers.Memcached) []string {
	addrs := make([]string, len(pool))
	for i, m := range pool {
		addrs[i] = m.Addr
	}
	return addrs
}

// RedisShards starts n standalone redis-servers for the test (the shards
// of a redis+ring:// store) and returns them with their addresses.
func RedisShards(tb testing.TB, n int, cfg servers.RedisConfig) ([]*servers.Redis, []string) {
	tb.Helper()
	rs := make([]*servers.Redis, n)
	addrs := make([]string, n)
	for i := range rs {
		rs[i] = Redis(tb, cfg)
		addrs[i] = rs[i].Addr
	}
	return rs, addrs
}

// Postgres starts a private PostgreSQL for the test. It takes a few
// seconds: start one per package (in TestMain) where many tests need it.
func Postgres(tb testing.TB, cfg servers.PostgresConfig) *servers.Postgres {
	tb.Helper()
	p, err := servers.StartPostgres(context.Background(), cfg)
	if err != nil {
		handle(tb, err)
	}
	tb.Cleanup(p.Stop)
	return p
}

// Fail ends the test for a server that could not be started: a skip when
// the binary is missing outside CI, a failure otherwise. For servers a
// package starts once and shares (in TestMain or a sync.Once).
func Fail(tb testing.TB, err error) {
	tb.Helper()
	handle(tb, err)
}

// Proxy starts a fault-injection proxy in front of target (a server's
// Addr) and closes it when the test ends; point the client at its Addr.
func Proxy(tb testing.TB, target string, opts faults.ProxyOptions) *faults.Proxy {
	tb.Helper()
	p, err := faults.NewProxy(target, opts)
	if err != nil {
		tb.Fatalf("servertest: proxy: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// BlackHole starts a listener that accepts and never answers, closed when
// the test ends.
func BlackHole(tb testing.TB) *faults.BlackHole {
	tb.Helper()
	b, err := faults.NewBlackHole()
	if err != nil {
		tb.Fatalf("servertest: black hole: %v", err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// SentinelSet starts a primary, a replica and the sentinels watching them
// (see servers.StartSentinelSet), stopped when the test ends.
func SentinelSet(tb testing.TB, cfg servers.SentinelConfig) *servers.SentinelSet {
	tb.Helper()
	s, err := servers.StartSentinelSet(context.Background(), cfg)
	if err != nil {
		handle(tb, err)
	}
	tb.Cleanup(s.Stop)
	return s
}
