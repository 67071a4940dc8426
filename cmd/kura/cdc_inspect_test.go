package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	kuracache "github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// TestCDCInspectStatus: with an inspect section, kura cdc's status line
// carries the staleness inspector's count: the two values injected
// behind the database's back are reported stale, every other one fresh;
// once they are gone the line reports 0 stale.
func TestCDCInspectStatus(t *testing.T) {
	pg := servertest.Postgres(t, servers.PostgresConfig{Logical: true})
	r := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	db, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	for _, q := range []string{
		"CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL)",
		"INSERT INTO items SELECT g, 'item ' || g, g * 10 FROM generate_series(1, 20) g",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf(`{"database": {"url": %q},
 "targets": [{"name": "redis", "url": "redis://%s"}],
 "tables": [{"table": "items", "keys": [{"prefix": "item:", "column": "id"}]}],
 "inspect": {"keys": [{"prefix": "item:", "query": "SELECT json_build_object('name', name, 'qty', qty) FROM items WHERE id = $1"}],
             "every_seconds": 0.2, "grace_seconds": 0.2, "max_loads_per_second": 1000}}`, pg.DSN(), r.Addr)
	path := filepath.Join(t.TempDir(), "cdc.json")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// The first run makes the slot (and invalidates the table whole).
	if out := runAllWithin(t, 60*time.Second, "cdc", "--config", path, "--until-caught-up", "--status-every", "1s"); !strings.Contains(out, "caught up") {
		t.Fatalf("first run:\n%s", out)
	}

	// The application: a kura view of items on the same Redis.
	type item struct {
		Name string `json:"name"`
		Qty  int    `json:"qty"`
	}
	rs, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{r.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	c, err := kuracache.New[item](rs, kuracache.Options{Name: "app", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	items, err := kuracache.NewKeyed[int64, item](c, kuracache.KeyedOptions[int64]{Prefix: "item:"})
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 20; id++ {
		if _, err := items.Fetch(ctx, id, func(ctx context.Context, id int64) (item, error) {
			var it item
			err := db.QueryRow(ctx, "SELECT name, qty FROM items WHERE id = $1", id).Scan(&it.Name, &it.Qty)
			if errors.Is(err, pgx.ErrNoRows) {
				return it, kuracache.ErrNotFound
			}
			return it, err
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int64{5, 6} {
		if err := items.Set(ctx, id, item{Name: "an old name", Qty: 1}); err != nil {
			t.Fatal(err)
		}
	}
	lastStatus := func(out string) string {
		var last string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "cdc: ") && strings.Contains(l, "staleness") {
				last = l
			}
		}
		return last
	}
	out := runAllWithin(t, 3*time.Second, "cdc", "--config", path, "--status-every", "500ms")
	if l := lastStatus(out); !strings.Contains(l, "staleness redis: 2 stale of 20 cached") || strings.Contains(l, "an old name") {
		t.Fatalf("want 2 stale of 20 in the status line, got %q\n%s", l, out)
	}
	if err := items.Invalidate(ctx, 5, 6); err != nil {
		t.Fatal(err)
	}
	out = runAllWithin(t, 3*time.Second, "cdc", "--config", path, "--status-every", "500ms")
	if l := lastStatus(out); !strings.Contains(l, "staleness redis: 0 stale of 18 cached") {
		t.Fatalf("want 0 stale of 18 in the status line, got %q\n%s", l, out)
	}
	t.Log(lastStatus(out))
}
