// Package cdctest starts what the change-stream tests run against: a
// PostgreSQL with wal_level=logical, a redis-server and a memcached, with
// kura stores over them, all private, on loopback, and stopped when the
// test ends.
package cdctest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/redisstore"
)

// Caches are a private Redis and memcached with a store over each.
type Caches struct {
	Redis     *servers.Redis
	Memcached *servers.Memcached
	RS        *redisstore.Store
	MS        *memcache.Store
}

// StartCaches starts the two cache servers and their stores for the test.
func StartCaches(tb testing.TB) *Caches {
	tb.Helper()
	c := &Caches{Redis: servertest.Redis(tb, servers.RedisConfig{}), Memcached: servertest.Memcached(tb, servers.MemcachedConfig{})}
	ctx := context.Background()
	var err error
	if c.RS, err = redisstore.New(ctx, redisstore.Options{Addrs: []string{c.Redis.Addr}}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.RS.Close() })
	if c.MS, err = memcache.New(ctx, memcache.Options{Servers: []string{c.Memcached.Addr}}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.MS.Close() })
	return c
}

// StartPostgres starts a PostgreSQL with logical replication (args are
// extra name=value settings) and a pool on it, then runs sqls.
func StartPostgres(tb testing.TB, args []string, sqls ...string) (*servers.Postgres, *pgxpool.Pool) {
	tb.Helper()
	pg := servertest.Postgres(tb, servers.PostgresConfig{Logical: true, Args: args})
	pool, err := pgxpool.New(context.Background(), pg.DSN())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	Exec(tb, pool, sqls...)
	return pg, pool
}

// Exec runs each statement, failing the test on the first error.
func Exec(tb testing.TB, pool *pgxpool.Pool, sqls ...string) {
	tb.Helper()
	for _, q := range sqls {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}
