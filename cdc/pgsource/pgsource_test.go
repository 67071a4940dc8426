package pgsource_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/cdc/pgsource"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
)

var (
	pgOnce sync.Once
	pg     *servers.Postgres
	pgErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pg != nil {
		pg.Stop()
	}
	os.Exit(code)
}

// logicalPG starts (once per package) a PostgreSQL with wal_level=logical.
func logicalPG(t *testing.T) *servers.Postgres {
	t.Helper()
	pgOnce.Do(func() { pg, pgErr = servers.StartPostgres(context.Background(), servers.PostgresConfig{Logical: true}) })
	if pgErr != nil {
		servertest.Fail(t, pgErr)
	}
	return pg
}

var seq struct {
	sync.Mutex
	n int
}

// names returns a fresh table, slot and publication name for a test.
func names(t *testing.T) (table, slot string) {
	seq.Lock()
	seq.n++
	n := seq.n
	seq.Unlock()
	return fmt.Sprintf("items%d", n), fmt.Sprintf("kura_test_%d", n)
}

func exec(t *testing.T, dsn string, sqls ...string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range sqls {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

type fixture struct {
	pg      *servers.Postgres
	table   string
	slot    string
	redis   store.Store
	mc      store.Store
	records *kura.Keyed[int64, string]
	byCat   *kura.Index[string, int64, string]
	bySKU   *kura.UniqueIndex[string, int64, string]
	mapping *cdc.Mapping
	mcProc  *servers.Memcached
	done    chan error
}

func newFixture(t *testing.T, identityFull bool) *fixture {
	t.Helper()
	p := logicalPG(t)
	f := &fixture{pg: p}
	f.table, f.slot = names(t)
	exec(t, p.DSN(), fmt.Sprintf("CREATE TABLE %s (id bigint PRIMARY KEY, category text, v bigint, body text, sku text UNIQUE)", f.table))
	if identityFull {
		exec(t, p.DSN(), fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY FULL", f.table))
	}
	caches := cdctest.StartCaches(t)
	rs, ms, m := caches.RS, caches.MS, caches.Memcached
	f.redis, f.mc, f.mcProc = rs, ms, m
	c, err := kura.New[string](rs, kura.Options{Name: "items"})
	if err != nil {
		t.Fatal(err)
	}
	f.records, err = kura.NewKeyed[int64, string](c, kura.KeyedOptions[int64]{Prefix: f.table + ":"})
	if err != nil {
		t.Fatal(err)
	}
	f.byCat, err = kura.NewIndex(f.records, kura.IndexOptions[string, int64, string]{
		Prefix:      f.table + ":cat:",
		LoadIDs:     func(context.Context, string) ([]int64, error) { return nil, nil },
		LoadRecords: func(context.Context, []int64) (map[int64]string, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.bySKU, err = kura.NewUniqueIndex(f.records, kura.UniqueIndexOptions[string, int64, string]{
		Prefix:     f.table + ":sku:",
		LoadID:     func(context.Context, string) (int64, error) { return 0, kura.ErrNotFound },
		LoadRecord: func(context.Context, int64) (string, error) { return "", kura.ErrNotFound },
	})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := cdc.Record(f.table, "id", f.records)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := cdc.IndexOf(f.table, "category", f.byCat)
	if err != nil {
		t.Fatal(err)
	}
	uidx, err := cdc.UniqueIndexOf(f.table, "sku", f.bySKU)
	if err != nil {
		t.Fatal(err)
	}
	f.mapping, err = cdc.NewMapping(rec, idx, uidx)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func quiet() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// run starts cdc.Run in the background; the returned func stops it and
// returns Run's error.
func (f *fixture) run(t *testing.T, mod func(*cdc.Options)) (applied chan cdc.Applied, stop func() error) {
	t.Helper()
	src, err := pgsource.New(pgsource.Options{ConnString: f.pg.DSN(), Mapping: f.mapping, Slot: f.slot, Publication: f.slot})
	if err != nil {
		t.Fatal(err)
	}
	applied = make(chan cdc.Applied, 1024)
	opts := cdc.Options{
		Source: src, Mapping: f.mapping, Logger: quiet(),
		Targets: []cdc.Target{{Name: "redis", Store: f.redis}, {Name: "memcached", Store: f.mc}},
		OnApplied: func(a cdc.Applied) {
			select {
			case applied <- a:
			default:
			}
		},
	}
	if mod != nil {
		mod(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	f.done = make(chan error, 2)
	go func() {
		err := cdc.Run(ctx, opts)
		f.done <- err
		done <- err
	}()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(10 * time.Second):
				runErr = errors.New("cdc.Run did not return within 10s of its context ending")
			}
			src.Close()
		})
		return runErr
	}
	t.Cleanup(func() {
		_ = stop()
		dropSlot(t, f.pg.DSN(), f.slot) // the shared server has a bounded number of slots
	})
	return applied, stop
}

func (f *fixture) put(t *testing.T, keys ...string) {
	t.Helper()
	for _, s := range []store.Store{f.redis, f.mc} {
		for _, k := range keys {
			if err := s.Set(context.Background(), k, []byte("cached"), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// waitGone waits until none of keys is in either store.
func (f *fixture) waitGone(t *testing.T, limit time.Duration, keys ...string) {
	t.Helper()
	f.waitGoneFrom(t, limit, []store.Store{f.redis, f.mc}, keys...)
}

// waitGoneFrom waits until none of keys is in any of stores.
func (f *fixture) waitGoneFrom(t *testing.T, limit time.Duration, stores []store.Store, keys ...string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var left []string
		for _, s := range stores {
			for _, k := range keys {
				if _, err := s.Get(context.Background(), k); err == nil {
					left = append(left, k)
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still cached after %v: %v", limit, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) present(t *testing.T, keys ...string) {
	t.Helper()
	for _, s := range []store.Store{f.redis, f.mc} {
		for _, k := range keys {
			if _, err := s.Get(context.Background(), k); err != nil {
				t.Errorf("%s was invalidated, and nothing changed its row: %v", k, err)
			}
		}
	}
}

// waitReady waits for the first applied batch (the reset of a new slot).
func waitApplied(t *testing.T, ch chan cdc.Applied, what func(cdc.Applied) bool) cdc.Applied {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case a := <-ch:
			if what(a) {
				return a
			}
		case <-timeout:
			t.Fatal("no applied batch matched within 20s")
		}
	}
}

func TestRowChangesInvalidateRecordAndBothIndexLists(t *testing.T) {
	f := newFixture(t, true)
	applied, stop := f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 }) // the new slot's reset
	rec := f.records.Key
	lists := f.byCat.Lists().Key
	f.put(t, rec(1), rec(2), lists("a"), lists("b"), lists("c"))

	exec(t, f.pg.DSN(), fmt.Sprintf("INSERT INTO %s VALUES (1, 'a', 1, 'x')", f.table))
	f.waitGone(t, 10*time.Second, rec(1), lists("a"))
	f.present(t, rec(2), lists("b"), lists("c"))

	// An UPDATE that moves row 1 from category a to b: both lists go.
	f.put(t, rec(1), lists("a"), lists("b"))
	exec(t, f.pg.DSN(), fmt.Sprintf("UPDATE %s SET category = 'b' WHERE id = 1", f.table))
	f.waitGone(t, 10*time.Second, rec(1), lists("a"), lists("b"))
	f.present(t, rec(2), lists("c"))

	// A unique value set, then changed: the UniqueIndex's entries of
	// the old and the new value go (keys from bySKU.IDs(), the view its
	// Fetch reads).
	skus := f.bySKU.IDs().Key
	f.put(t, rec(1), skus("x-1"), skus("x-2"), skus("x-3"))
	exec(t, f.pg.DSN(), fmt.Sprintf("UPDATE %s SET sku = 'x-1' WHERE id = 1", f.table))
	f.waitGone(t, 10*time.Second, rec(1), skus("x-1"))
	f.present(t, skus("x-2"), skus("x-3"))
	f.put(t, rec(1), skus("x-1"))
	exec(t, f.pg.DSN(), fmt.Sprintf("UPDATE %s SET sku = 'x-2' WHERE id = 1", f.table))
	f.waitGone(t, 10*time.Second, rec(1), skus("x-1"), skus("x-2"))
	f.present(t, skus("x-3"), rec(2), lists("c"))

	f.put(t, rec(1), lists("b"), skus("x-2"))
	exec(t, f.pg.DSN(), fmt.Sprintf("DELETE FROM %s WHERE id = 1", f.table))
	f.waitGone(t, 10*time.Second, rec(1), lists("b"), skus("x-2"))
	f.present(t, rec(2), lists("c"), skus("x-3"))

	// An UPDATE of a TOASTed column leaves it out of later updates'
	// new row; the key columns still come through.
	big := strings.Repeat("x", 100_000)
	exec(t, f.pg.DSN(), fmt.Sprintf("INSERT INTO %s VALUES (2, 'c', 1, '%s')", f.table, big))
	f.put(t, rec(2), lists("c"))
	exec(t, f.pg.DSN(), fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = 2", f.table))
	f.waitGone(t, 10*time.Second, rec(2), lists("c"))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func newSource(f *fixture, dsn string) (*pgsource.Source, error) {
	return pgsource.New(pgsource.Options{ConnString: dsn, Mapping: f.mapping, Slot: f.slot, Publication: f.slot})
}

// TestInvalidatesAtCommitNeverBeforeNorOnRollback checks docs/cdc.md's
// "invalidate at commit, never before; a rolled-back transaction is never
// sent" per transaction: while one transaction is open and another rolled
// back, a later committed one is applied (so cdc has read past both), and
// neither touched the cache; the open one's keys go once it commits.
func TestInvalidatesAtCommitNeverBeforeNorOnRollback(t *testing.T) {
	f := newFixture(t, true)
	applied, stop := f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 }) // the new slot's reset
	rec := f.records.Key
	lists := f.byCat.Lists().Key
	f.put(t, rec(1), rec(2), rec(3), lists("a"), lists("b"), lists("c"))

	ctx := context.Background()
	open, err := pgx.Connect(ctx, f.pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(ctx)
	tx, err := open.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s VALUES (1, 'a', 1, 'x')", f.table)); err != nil {
		t.Fatal(err)
	}
	exec(t, f.pg.DSN(), "BEGIN", fmt.Sprintf("INSERT INTO %s VALUES (2, 'b', 1, 'x')", f.table), "ROLLBACK")
	// A later commit: once its keys are gone, cdc has read past the open
	// transaction's changes and the rolled-back one.
	exec(t, f.pg.DSN(), fmt.Sprintf("INSERT INTO %s VALUES (3, 'c', 1, 'x')", f.table))
	f.waitGone(t, 10*time.Second, rec(3), lists("c"))
	f.present(t, rec(1), lists("a"), rec(2), lists("b"))

	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitGone(t, 10*time.Second, rec(1), lists("a"))
	f.present(t, rec(2), lists("b"))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestUnparsableConnStringHidesThePassword: pgsource.New's error for a
// connection string that does not parse holds no part of its password,
// whether a URL (a password with "#" or "?" that pgconn's own message
// would show the tail of) or a keyword/value string.
func TestUnparsableConnStringHidesThePassword(t *testing.T) {
	r, err := cdc.Template("t", "t:{id}")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cdc.NewMapping(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, conn := range []string{
		"postgres://kura:S3cr/et#?pw@127.0.0.1:1/x",
		"postgres://kura:S3cr%zzpw@127.0.0.1:1/x",
		"host=127.0.0.1 port=abc password=S3cr/et#?pw",
		"host=127.0.0.1 port=abc password='S3cr et#?pw",
		"postgres://kura@127.0.0.1:1/x?sslmode=bogus&password=S3cr/et#?pw",
	} {
		_, err := pgsource.New(pgsource.Options{ConnString: conn, Mapping: m})
		if err == nil {
			t.Fatalf("%s: no error", conn)
		}
		for _, s := range []string{"S3cr", "et#", "pw@", "zzpw"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("the error shows %q of the password: %v", s, err)
			}
		}
	}
}
