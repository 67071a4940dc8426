package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kuracache/kura/internal/harness/servers"
)

// Env is what the scenarios run against: private servers this run started,
// and the data set loaded into PostgreSQL.
type Env struct {
	cfg      Config
	progress io.Writer

	pg    *servers.Postgres
	db    *pgxpool.Pool
	redis *servers.Redis
	mc    []*servers.Memcached

	// why holds, per server kind, the reason it is not available.
	why map[string]string
	// userID is the user who logs in (the one with Size.Items items).
	userID int64
}

const memcachedCount = 3

// startEnv starts the servers in needs. A server that cannot start is
// recorded with its reason; the scenarios that need it are skipped.
func startEnv(ctx context.Context, needs map[string]bool, cfg Config, progress io.Writer) *Env {
	e := &Env{cfg: cfg, progress: progress, why: map[string]string{}, userID: 1}
	if needs["postgres"] {
		fmt.Fprintln(progress, "starting a private PostgreSQL (initdb, a few seconds) ...")
		pg, err := servers.StartPostgres(ctx, servers.PostgresConfig{Logical: true}) // the stale scenario's kura cdc
		if err != nil {
			e.why["postgres"] = "PostgreSQL could not be started: " + reason(err, "postgresql")
		} else {
			e.pg = pg
			if err := e.loadData(ctx); err != nil {
				e.why["postgres"] = "loading the data set into PostgreSQL failed: " + err.Error()
			}
		}
	}
	if needs["redis"] {
		fmt.Fprintln(progress, "starting a private redis-server ...")
		r, err := servers.StartRedis(ctx, servers.RedisConfig{})
		if err != nil {
			e.why["redis"] = "redis-server could not be started: " + reason(err, "redis-server")
		} else {
			e.redis = r
		}
	}
	if needs["memcached"] {
		fmt.Fprintf(progress, "starting %d private memcached ...\n", memcachedCount)
		for range memcachedCount {
			m, err := servers.StartMemcached(ctx, servers.MemcachedConfig{})
			if err != nil {
				e.why["memcached"] = "memcached could not be started: " + reason(err, "memcached")
				break
			}
			e.mc = append(e.mc, m)
		}
	}
	return e
}

func reason(err error, pkg string) string {
	if errors.Is(err, servers.ErrNotInstalled) {
		return fmt.Sprintf("%v (install it with: apt-get install -y %s, or `make servers`)", err, pkg)
	}
	return err.Error()
}

// missing returns why one of needs is not available, or "".
func (e *Env) missing(needs []string) string {
	var out []string
	for _, n := range needs {
		if w := e.why[n]; w != "" {
			out = append(out, w)
		}
	}
	return strings.Join(out, "; ")
}

func (e *Env) memcachedAddrs() []string {
	var out []string
	for _, m := range e.mc {
		out = append(out, m.Addr)
	}
	return out
}

// describe lists the servers this run used, for the report.
func (e *Env) describe() []string {
	var out []string
	if e.pg != nil {
		out = append(out, "PostgreSQL "+e.pg.Addr+" (private, initdb for this run)")
	}
	if e.redis != nil {
		out = append(out, "redis-server "+e.redis.Addr+" (private)")
	}
	for _, m := range e.mc {
		out = append(out, "memcached "+m.Addr+" (private)")
	}
	keys := make([]string, 0, len(e.why))
	for k := range e.why {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, "not available: "+e.why[k])
	}
	return out
}

// Close stops every server this run started.
func (e *Env) Close() {
	if e.db != nil {
		e.db.Close()
	}
	if e.pg != nil {
		e.pg.Stop()
	}
	if e.redis != nil {
		e.redis.Stop()
	}
	for _, m := range e.mc {
		m.Stop()
	}
}
