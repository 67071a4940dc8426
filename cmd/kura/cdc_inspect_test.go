package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	kuracache "github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/kafka"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
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
	db := itemsTable(t, pg)
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

	items, _ := appItems(t, r.Addr, db)
	for _, id := range []int64{5, 6} {
		if err := items.Set(ctx, id, item{Name: "an old name", Qty: 1}); err != nil {
			t.Fatal(err)
		}
	}
	out := runAllWithin(t, 3*time.Second, "cdc", "--config", path, "--status-every", "500ms")
	if r, most := rounds(out); !r["2 of 20"] || most > 2 || strings.Contains(out, "an old name") {
		t.Fatalf("want 2 stale of 20 in a status line (rounds %v):\n%s", r, out)
	}
	if err := items.Invalidate(ctx, 5, 6); err != nil {
		t.Fatal(err)
	}
	out = runAllWithin(t, 3*time.Second, "cdc", "--config", path, "--status-every", "500ms")
	if r, most := rounds(out); !r["0 of 18"] || most > 0 {
		t.Fatalf("want 0 stale of 18 in a status line and none stale in any (rounds %v):\n%s", r, out)
	}
	t.Log(lastStatus(out))
}

// TestCDCInspectDebezium: the same status line with the Debezium source:
// a change event for item 3 invalidates it; item 4, changed in the
// database with no event (a write the stream never carried), is reported
// stale by the inspector, which reads fresh values from inspect.database.
// It starts a Kafka broker (a JVM: 10-40 s on this machine), so it runs
// under KURA_SOAK=1 (make soak) or KURA_DEBEZIUM=1, as the Debezium
// end-to-end test does.
func TestCDCInspectDebezium(t *testing.T) {
	if !kafka.Soak() && os.Getenv("KURA_DEBEZIUM") == "" {
		t.Skip("starts a Kafka broker: runs under KURA_SOAK=1 (make soak) or KURA_DEBEZIUM=1")
	}
	b := kafka.BrokerT(t, kafka.BrokerConfig{})
	pg := servertest.Postgres(t, servers.PostgresConfig{})
	r := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	db := itemsTable(t, pg)
	items, rs := appItems(t, r.Addr, db)
	for _, q := range []string{"UPDATE items SET qty = 999 WHERE id IN (3, 4)"} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	const topic = "dbz.public.items"
	if err := b.CreateTopic(ctx, topic, 1); err != nil {
		t.Fatal(err)
	}
	cl, err := b.Client(kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ev := `{"before":{"id":3,"name":"item 3","qty":30},"after":{"id":3,"name":"item 3","qty":999},"source":{"connector":"postgresql","name":"dbz","db":"postgres","schema":"public","table":"items","ts_ms":%d},"op":"u","ts_ms":%d}`
	now := time.Now().UnixMilli()
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(`{"id":3}`), Value: []byte(fmt.Sprintf(ev, now, now))}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`{"source": {"kind": "debezium", "brokers": [%q], "group": "g-inspect", "topics": [%q], "session_timeout_ms": 1500},
 "targets": [{"name": "redis", "url": "redis://%s"}],
 "tables": [{"table": "items", "keys": [{"prefix": "item:", "column": "id"}]}],
 "inspect": {"database": {"url": %q},
             "keys": [{"prefix": "item:", "query": "SELECT json_build_object('name', name, 'qty', qty) FROM items WHERE id = $1"}],
             "every_seconds": 0.2, "grace_seconds": 0.2, "max_loads_per_second": 1000}}`, b.Addr, topic, r.Addr, pg.DSN())
	path := filepath.Join(t.TempDir(), "cdc.json")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out string
	deadline := time.Now().Add(60 * time.Second)
	for { // until the group has joined and the event is applied
		out = runAllWithin(t, 4*time.Second, "cdc", "--config", path, "--status-every", "500ms")
		if _, err := rs.Get(ctx, items.Key(3)); errors.Is(err, store.ErrNotFound) || time.Now().After(deadline) {
			break
		}
	}
	if _, err := rs.Get(ctx, items.Key(3)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("item 3's change event did not invalidate it (%v):\n%s", err, out)
	}
	out = runAllWithin(t, 2*time.Second, "cdc", "--config", path, "--status-every", "500ms")
	if r, most := rounds(out); !r["1 of 19"] || most > 1 {
		t.Fatalf("want 1 stale of 19 in a status line and no more in any (rounds %v):\n%s", r, out)
	}
	t.Log(lastStatus(out))
}

// item is a row of items as the application caches it.
type item struct {
	Name string `json:"name"`
	Qty  int    `json:"qty"`
}

// appItems is the application: a kura view of items on the Redis at
// addr, every row read through it once.
func appItems(t *testing.T, addr string, db *pgx.Conn) (*kuracache.Keyed[int64, item], *redisstore.Store) {
	t.Helper()
	ctx := context.Background()
	rs, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
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
	return items, rs
}

var roundRE = regexp.MustCompile(`staleness redis: (\d+) stale of (\d+) cached in the last round`)

// rounds lists the last-round figures ("2 of 20": stale of cached) the
// status lines in out show, and the most stale of any. (A round on a
// loaded machine may count a key unreadable after a store timeout, so
// the tests look for their figure in some line, and bound the rest.)
func rounds(out string) (map[string]bool, int) {
	r, most := map[string]bool{}, 0
	for _, m := range roundRE.FindAllStringSubmatch(out, -1) {
		r[m[1]+" of "+m[2]] = true
		n, _ := strconv.Atoi(m[1])
		most = max(most, n)
	}
	return r, most
}

// lastStatus is the last status line kura cdc printed with the
// inspector's part.
func lastStatus(out string) string {
	var last string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "cdc: ") && strings.Contains(l, "staleness") {
			last = l
		}
	}
	return last
}

// itemsTable makes the items table (20 rows) on pg and returns a
// connection to it, closed when the test ends.
func itemsTable(t *testing.T, pg *servers.Postgres) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	db, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	for _, q := range []string{
		"CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL)",
		"INSERT INTO items SELECT g, 'item ' || g, g * 10 FROM generate_series(1, 20) g",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}
