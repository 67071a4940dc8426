package servers_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

func TestPostgres(t *testing.T) {
	pg := servertest.Postgres(t, servers.PostgresConfig{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatalf("connect %s: %v", pg.Addr, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE items (id bigint PRIMARY KEY, name text)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 100) g`); err != nil {
		t.Fatal(err)
	}
	var n int
	var name string
	if err := conn.QueryRow(ctx, `SELECT count(*), max(name) FROM items WHERE id = ANY($1)`, []int64{1, 2, 99}).Scan(&n, &name); err != nil {
		t.Fatal(err)
	}
	if n != 3 || name != "item 99" {
		t.Fatalf("got %d rows, max %q; want 3, \"item 99\"", n, name)
	}
	pg.Stop()
	if !pg.Exited() {
		t.Fatal("postgres still running after Stop")
	}
}
