package cdc_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// The history tests share one PostgreSQL (started at first use, stopped
// after the package's tests): starting one costs seconds on a loaded
// machine. Each test gets its own table, slot and publication, named by
// sharedPG.
var shared struct {
	once sync.Once
	pg   *servers.Postgres
	err  error
	mu   sync.Mutex
	n    int
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.pg != nil {
		shared.pg.Stop()
	}
	os.Exit(code)
}

// sharedPG returns the package's PostgreSQL (wal_level=logical), a pool on
// it for the test, and a name no other test uses, for the test's table,
// sequence, slot and publication.
func sharedPG(t *testing.T) (*servers.Postgres, *pgxpool.Pool, string) {
	t.Helper()
	shared.once.Do(func() {
		shared.pg, shared.err = servers.StartPostgres(context.Background(), servers.PostgresConfig{Logical: true})
	})
	if shared.err != nil {
		servertest.Fail(t, shared.err)
	}
	shared.mu.Lock()
	shared.n++
	name := fmt.Sprintf("hist%d", shared.n)
	shared.mu.Unlock()
	pool, err := pgxpool.New(context.Background(), shared.pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	t.Cleanup(func() { // after the test's source closed: an idle slot would hold WAL for the others
		pool.Exec(context.Background(), "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", name)
	})
	return shared.pg, pool, name
}
