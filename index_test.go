package kura_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memstore"
)

// One PostgreSQL for the whole package: it takes seconds to start.
var (
	pgOnce sync.Once
	pgSrv  *servers.Postgres
	pgErr  error
	pgSeq  atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pgSrv != nil {
		pgSrv.Stop()
	}
	os.Exit(code)
}

// postgres returns a pool on the package's private PostgreSQL with a fresh
// database for the test.
func postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	if testing.Short() {
		t.Skip("real-server test")
	}
	pgOnce.Do(func() { pgSrv, pgErr = servers.StartPostgres(context.Background(), servers.PostgresConfig{}) })
	if pgErr != nil {
		servertest.Fail(t, pgErr)
	}
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, pgSrv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	db := fmt.Sprintf("t%d", pgSeq.Add(1))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	dsn := "postgres://kura@" + pgSrv.Addr + "/" + db + "?sslmode=disable"
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// UserItem is a row of the inventory table of a game: how many of one item
// a user holds.
type UserItem struct {
	ID     int64 `msgpack:"id"`
	UserID int64 `msgpack:"user_id"`
	ItemID int64 `msgpack:"item_id"`
	Count  int   `msgpack:"count"`
}

const inventorySchema = `
CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE user_items (
  id      bigserial PRIMARY KEY,
  user_id bigint NOT NULL REFERENCES users(id),
  item_id bigint NOT NULL,
  count   int NOT NULL
);
CREATE INDEX user_items_user_id ON user_items (user_id);`

// inventory is the database side of the index tests: the schema, the
// loaders (counting their calls and rows) and the source of truth.
type inventory struct {
	db                  *pgxpool.Pool
	idQueries, recQuery int
	rowsRead            int
	mu                  sync.Mutex
}

func newInventory(t *testing.T, users, itemsPerUser int) *inventory {
	return newInventoryTB(t, users, itemsPerUser)
}

func newInventoryTB(t testing.TB, users, itemsPerUser int) *inventory {
	t.Helper()
	db := postgres(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, inventorySchema); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO users SELECT g, 'user ' || g FROM generate_series(1, $1::int) g`, users); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO user_items (user_id, item_id, count)
		SELECT u, i, (u * i) % 97 FROM generate_series(1, $1::int) u, generate_series(1, $2::int) i ORDER BY u, i`, users, itemsPerUser); err != nil {
		t.Fatal(err)
	}
	return &inventory{db: db}
}

func (inv *inventory) loadIDs(ctx context.Context, userID int64) ([]int64, error) {
	inv.mu.Lock()
	inv.idQueries++
	inv.mu.Unlock()
	rows, err := inv.db.Query(ctx, `SELECT id FROM user_items WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		return nil, err
	}
	ids := []int64{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func (inv *inventory) loadRecords(ctx context.Context, ids []int64) (map[int64]UserItem, error) {
	rows, err := inv.db.Query(ctx, `SELECT id, user_id, item_id, count FROM user_items WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]UserItem, len(ids))
	for rows.Next() {
		var r UserItem
		if err := rows.Scan(&r.ID, &r.UserID, &r.ItemID, &r.Count); err != nil {
			return nil, err
		}
		out[r.ID] = r
	}
	inv.mu.Lock()
	inv.recQuery++
	inv.rowsRead += len(out)
	inv.mu.Unlock()
	return out, rows.Err()
}

// truth reads a user's items straight from the database.
func (inv *inventory) truth(t *testing.T, userID int64) []UserItem {
	t.Helper()
	ids, err := inv.loadIDs(context.Background(), userID)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := inv.loadRecords(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]UserItem, 0, len(ids))
	for _, id := range ids {
		out = append(out, recs[id])
	}
	return out
}

func newItemIndex(t *testing.T, s store.Store, inv *inventory) (*kura.Keyed[int64, UserItem], *kura.Index[int64, int64, UserItem]) {
	t.Helper()
	// A generous store budget: these tests check what is cached, and the
	// 250 ms default can run out on a loaded 2-core machine (a skipped
	// write-back would read as "the warm read asked the database").
	c, err := kura.New[UserItem](s, kura.Options{StoreTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := kura.NewKeyed[int64, UserItem](c, kura.KeyedOptions[int64]{Prefix: "user_item:"})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := kura.NewIndex(recs, kura.IndexOptions[int64, int64, UserItem]{
		Prefix: "user_items:by_user:", LoadIDs: inv.loadIDs, LoadRecords: inv.loadRecords,
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs, idx
}

// indexBackends are the stores every index test runs on: real servers
// plus the in-process store.
func indexBackends(t *testing.T) map[string]func(t *testing.T) store.Store {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	cl := servertest.RedisCluster(t)
	pool := servertest.MemcachedPool(t, 3, servers.MemcachedConfig{})
	addrs := servertest.Addrs(pool)
	return map[string]func(t *testing.T) store.Store{
		"redis":         redisBackend(r.URL),
		"redis-cluster": redisBackend(cl.URL),
		"memcached":     memcachedBackend(addrs...),
		"memory": func(t *testing.T) store.Store {
			s, err := memstore.New(memstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
}

func TestIndexAgainstPostgres(t *testing.T) {
	backends := indexBackends(t)
	for _, name := range []string{"redis", "redis-cluster", "memcached", "memory"} {
		t.Run(name, func(t *testing.T) {
			inv := newInventory(t, 4, 30)
			s := backends[name](t)
			testIndexReadsAndChanges(t, s, inv)
		})
	}
}

func testIndexReadsAndChanges(t *testing.T, s store.Store, inv *inventory) {
	ctx := context.Background()
	recs, idx := newItemIndex(t, s, inv)
	check := func(step string, users ...int64) {
		t.Helper()
		for _, u := range users {
			got, err := idx.Fetch(ctx, u)
			if err != nil {
				t.Fatalf("%s: Fetch(user %d): %v", step, u, err)
			}
			if want := inv.truth(t, u); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: user %d: cache gives %d items, database %d\n got %v\nwant %v", step, u, len(got), len(want), got, want)
			}
		}
	}

	// Cold, then warm: the warm read asks the database nothing.
	check("cold", 1, 2, 3)
	inv.mu.Lock()
	inv.idQueries, inv.recQuery, inv.rowsRead = 0, 0, 0
	inv.mu.Unlock()
	before := idx.Stats()
	for _, u := range []int64{1, 2, 3} {
		got, err := idx.Fetch(ctx, u)
		if err != nil || len(got) != 30 {
			t.Fatalf("warm Fetch(user %d) = %d items, %v", u, len(got), err)
		}
	}
	if inv.idQueries != 0 || inv.recQuery != 0 {
		t.Fatalf("warm reads queried the database: %d id queries, %d record queries", inv.idQueries, inv.recQuery)
	}
	if st := idx.Stats(); st.ListHits-before.ListHits != 3 {
		t.Fatalf("warm list hits %d, want 3", st.ListHits-before.ListHits)
	}
	// A record read by id shares the entry the index filled.
	first := inv.truth(t, 1)[0]
	if got, err := recs.Get(ctx, first.ID); err != nil || got != first {
		t.Fatalf("record %d by id = %+v, %v; want %+v from the index's fill", first.ID, got, err, first)
	}

	// Insert a row for user 1.
	var newID int64
	if err := inv.db.QueryRow(ctx, `INSERT INTO user_items (user_id, item_id, count) VALUES (1, 999, 5) RETURNING id`).Scan(&newID); err != nil {
		t.Fatal(err)
	}
	if err := idx.Changed(ctx, newID, 1); err != nil {
		t.Fatal(err)
	}
	check("insert", 1)

	// Update a column that is not indexed.
	upd := inv.truth(t, 2)[3]
	if _, err := inv.db.Exec(ctx, `UPDATE user_items SET count = count + 1 WHERE id = $1`, upd.ID); err != nil {
		t.Fatal(err)
	}
	if err := idx.Changed(ctx, upd.ID); err != nil {
		t.Fatal(err)
	}
	check("update count", 2)

	// Move a row from user 2 to user 3: both lists change.
	mv := inv.truth(t, 2)[5]
	if _, err := inv.db.Exec(ctx, `UPDATE user_items SET user_id = 3 WHERE id = $1`, mv.ID); err != nil {
		t.Fatal(err)
	}
	if err := idx.Changed(ctx, mv.ID, 2, 3); err != nil {
		t.Fatal(err)
	}
	check("move", 2, 3)

	// Delete a row.
	del := inv.truth(t, 3)[0]
	if _, err := inv.db.Exec(ctx, `DELETE FROM user_items WHERE id = $1`, del.ID); err != nil {
		t.Fatal(err)
	}
	if err := idx.Changed(ctx, del.ID, 3); err != nil {
		t.Fatal(err)
	}
	check("delete", 3)

	// A ghost: a row deleted while only its record entry was dropped (the
	// list still names it). It is left out, and the list is repaired.
	check("warm user 4", 4)
	ghost := inv.truth(t, 4)[7]
	if _, err := inv.db.Exec(ctx, `DELETE FROM user_items WHERE id = $1`, ghost.ID); err != nil {
		t.Fatal(err)
	}
	if err := recs.Delete(ctx, ghost.ID); err != nil {
		t.Fatal(err)
	}
	got, err := idx.Fetch(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(got, func(r UserItem) bool { return r.ID == ghost.ID }) {
		t.Fatalf("deleted record %d returned as a ghost", ghost.ID)
	}
	if idx.Stats().Ghosts == 0 {
		t.Fatal("ghost not counted")
	}
	if _, err := idx.Lists().Get(ctx, 4); err == nil {
		t.Fatal("the list naming a deleted record is still cached")
	}
	check("after ghost", 4)

	// A user with no items is an empty list, cached.
	got, err = idx.Fetch(ctx, 99)
	if err != nil || len(got) != 0 {
		t.Fatalf("user without items: %v, %v", got, err)
	}
	if ids, err := idx.Lists().Get(ctx, 99); err != nil || len(ids) != 0 {
		t.Fatalf("empty list not cached: %v, %v", ids, err)
	}
}

// TestIndexListSize: an id list of 10,000 ids stays well under the
// 100 KB value-size warning.
func TestIndexListSize(t *testing.T) {
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := kura.New[UserItem](s, kura.Options{})
	recs, _ := kura.NewKeyed[int64, UserItem](c, kura.KeyedOptions[int64]{Prefix: "r:"})
	ids := make([]int64, 10000)
	for i := range ids {
		ids[i] = 1_000_000_000 + int64(i)*3 // sorted, not dense
	}
	idx, err := kura.NewIndex(recs, kura.IndexOptions[int64, int64, UserItem]{
		LoadIDs:     func(context.Context, int64) ([]int64, error) { return ids, nil },
		LoadRecords: func(context.Context, []int64) (map[int64]UserItem, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := idx.IDs(ctx, 1); err != nil {
		t.Fatal(err)
	}
	raw, err := s.Get(ctx, idx.Lists().Key(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("10,000 ids stored in %d bytes", len(raw))
	if len(raw) > kura.DefaultWarnValueSize/4 {
		t.Fatalf("10,000 ids take %d bytes; want well under the %d-byte warning", len(raw), kura.DefaultWarnValueSize)
	}
	back, err := idx.Lists().Get(ctx, 1)
	if err != nil || !slices.Equal(back, ids) {
		t.Fatalf("id list did not round-trip: %d ids, %v", len(back), err)
	}
}

// TestIndexRoundTrips counts, at fault-injection proxies in front of three
// memcached servers, the round trips an index read costs: warm, one read of
// the id list on the server that holds it, then one batched read per
// server that holds any of the records; cold adds one write of the list and
// one batched write-back per server (and one loader query each).
func TestIndexRoundTrips(t *testing.T) {
	inv := newInventory(t, 2, 60)
	pool := servertest.MemcachedPool(t, 3, servers.MemcachedConfig{})
	proxies := make([]*faults.Proxy, len(pool))
	addrs := make([]string, len(pool))
	for i, m := range pool {
		proxies[i] = servertest.Proxy(t, m.Addr, faults.ProxyOptions{Protocol: faults.Memcache})
		addrs[i] = proxies[i].Addr()
	}
	ctx := context.Background()
	st, err := memcache.New(ctx, memcache.Options{Servers: addrs})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, idx := newItemIndex(t, st, inv)
	ids, err := inv.loadIDs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Which server holds what.
	listAt := st.Ring().Index(idx.Lists().Key(1))
	holds := make([]bool, len(pool))
	for _, id := range ids {
		holds[st.Ring().Index(recs.Key(id))] = true
	}
	snap := func() []faults.ProxyStats {
		out := make([]faults.ProxyStats, len(proxies))
		for i, p := range proxies {
			out[i] = p.Stats()
		}
		return out
	}
	measure := func(step string, want func(i int) int64) {
		t.Helper()
		before := snap()
		inv.mu.Lock()
		inv.idQueries, inv.recQuery = 0, 0
		inv.mu.Unlock()
		got, err := idx.Fetch(ctx, 1)
		if err != nil || len(got) != len(ids) {
			t.Fatalf("%s: %d records, %v", step, len(got), err)
		}
		for i, p := range proxies {
			if rt := p.Stats().Sub(before[i]).RoundTrips; rt != want(i) {
				t.Errorf("%s: server %d: %d round trips, want %d (list here: %v, records here: %v)", step, i, rt, want(i), i == listAt, holds[i])
			}
		}
		t.Logf("%s: %d id-list queries, %d record queries", step, inv.idQueries, inv.recQuery)
	}
	b2i := func(b bool) int64 {
		if b {
			return 1
		}
		return 0
	}
	measure("cold", func(i int) int64 { return 2*b2i(i == listAt) + 2*b2i(holds[i]) })
	if inv.idQueries != 1 || inv.recQuery != 1 {
		t.Fatalf("cold read: %d id-list and %d record queries, want 1 and 1", inv.idQueries, inv.recQuery)
	}
	measure("warm", func(i int) int64 { return b2i(i == listAt) + b2i(holds[i]) })
	if inv.idQueries != 0 || inv.recQuery != 0 {
		t.Fatalf("warm read queried the database: %d, %d", inv.idQueries, inv.recQuery)
	}
}
