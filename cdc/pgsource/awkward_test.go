package pgsource_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
)

func TestReplicaIdentityWithoutTheIndexedColumnIsRefused(t *testing.T) {
	f := newFixture(t, false) // DEFAULT: the old row carries only id
	_, stop := f.run(t, nil)
	err := stop()
	deadline := time.Now().Add(10 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		_, stop = f.run(t, nil)
		time.Sleep(200 * time.Millisecond)
		err = stop()
	}
	if !errors.Is(err, cdc.ErrFatal) {
		t.Fatalf("got %v, want ErrFatal", err)
	}
	want := fmt.Sprintf("ALTER TABLE \"public\".\"%s\" REPLICA IDENTITY FULL", f.table)
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "category") {
		t.Fatalf("the error does not name the column and the fix %q:\n%v", want, err)
	}
}

func TestRunFailsFastOnFatal(t *testing.T) {
	f := newFixture(t, false)
	src := mustSource(t, f, f.pg.DSN())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := cdc.Run(ctx, cdc.Options{Source: src, Mapping: f.mapping, Logger: quiet(), Targets: []cdc.Target{{Name: "redis", Store: f.redis}}})
	if !errors.Is(err, cdc.ErrFatal) || ctx.Err() != nil {
		t.Fatalf("Run returned %v (ctx %v), want an ErrFatal before the deadline", err, ctx.Err())
	}
}

func mustSource(t *testing.T, f *fixture, dsn string) cdc.Source {
	t.Helper()
	src, err := newSource(f, dsn)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestRoleWithoutReplicationIsToldTheFix(t *testing.T) {
	f := newFixture(t, true)
	exec(t, f.pg.DSN(), "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'app_norepl') THEN CREATE ROLE app_norepl LOGIN; END IF; END$$")
	dsn := strings.Replace(f.pg.DSN(), "kura@", "app_norepl@", 1)
	src := mustSource(t, f, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := cdc.Run(ctx, cdc.Options{Source: src, Mapping: f.mapping, Logger: quiet(), Targets: []cdc.Target{{Name: "redis", Store: f.redis}}})
	if !errors.Is(err, cdc.ErrFatal) || !strings.Contains(err.Error(), `ALTER ROLE "app_norepl" REPLICATION`) {
		t.Fatalf("got %v, want the REPLICATION fix", err)
	}
}

func TestTruncateInvalidatesTheTablesKeyspace(t *testing.T) {
	f := newFixture(t, true)
	applied, _ := f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 })
	var keys []string
	for i := int64(0); i < 300; i++ {
		keys = append(keys, f.records.Key(i))
	}
	keys = append(keys, f.byCat.Lists().Key("a"))
	f.put(t, keys...)
	f.put(t, "other:1")
	exec(t, f.pg.DSN(), "TRUNCATE "+f.table)
	a := waitApplied(t, applied, func(a cdc.Applied) bool { return slices.Contains(a.Tables, "public."+f.table) })
	if a.Txns != 1 {
		t.Logf("truncate applied in a batch of %d transactions", a.Txns)
	}
	f.waitGone(t, time.Second, keys...) // already applied: no wait needed
	f.present(t, "other:1")
}

func TestTransactionOverTheCapBecomesTableWide(t *testing.T) {
	f := newFixture(t, true)
	exec(t, f.pg.DSN(), fmt.Sprintf("INSERT INTO %s SELECT g, 'c' || (g %% 7), 0, '' FROM generate_series(1, 5000) g", f.table))
	applied, _ := f.run(t, func(o *cdc.Options) { o.MaxTxnKeys = 100 })
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 })
	f.put(t, f.records.Key(4999), f.records.Key(1_000_000), "other:1")
	exec(t, f.pg.DSN(), fmt.Sprintf("UPDATE %s SET v = v + 1", f.table))
	a := waitApplied(t, applied, func(a cdc.Applied) bool { return a.Txns > 0 && slices.Contains(a.Tables, "public."+f.table) })
	if a.Keys > 100 {
		t.Errorf("a capped transaction still sent %d keys", a.Keys)
	}
	// Table-wide: even a row the transaction did not touch is gone.
	f.waitGone(t, time.Second, f.records.Key(4999), f.records.Key(1_000_000))
	f.present(t, "other:1")
}

func TestLostSlotInvalidatesEverythingMappedBeforeStreaming(t *testing.T) {
	f := newFixture(t, true)
	applied, stop := f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 })
	waitSlot(t, f.pg.DSN(), f.slot)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// While cdc is down its slot is dropped (an operator, a failover to a
	// replica without it): the writes in between are lost to the stream.
	dropSlot(t, f.pg.DSN(), f.slot)
	f.put(t, f.records.Key(7), f.byCat.Lists().Key("z"), "other:1")
	exec(t, f.pg.DSN(), fmt.Sprintf("INSERT INTO %s VALUES (7, 'z', 1, '')", f.table))
	applied, _ = f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 && a.Pos == nil })
	f.waitGone(t, time.Second, f.records.Key(7), f.byCat.Lists().Key("z"))
	f.present(t, "other:1")
}

func TestSchemaChangeWhileStreaming(t *testing.T) {
	f := newFixture(t, true)
	applied, _ := f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 })
	exec(t, f.pg.DSN(), fmt.Sprintf("ALTER TABLE %s ADD COLUMN extra int", f.table))
	f.put(t, f.records.Key(3), f.byCat.Lists().Key("q"))
	exec(t, f.pg.DSN(), fmt.Sprintf("INSERT INTO %s (id, category, v, extra) VALUES (3, 'q', 1, 9)", f.table))
	f.waitGone(t, 10*time.Second, f.records.Key(3), f.byCat.Lists().Key("q"))
	// Dropping a mapped column: its rows can no longer make a key, so the
	// table goes whole.
	exec(t, f.pg.DSN(), fmt.Sprintf("ALTER TABLE %s DROP COLUMN category", f.table))
	f.put(t, f.records.Key(3), f.records.Key(4))
	exec(t, f.pg.DSN(), fmt.Sprintf("UPDATE %s SET v = 2 WHERE id = 3", f.table))
	f.waitGone(t, 10*time.Second, f.records.Key(3), f.records.Key(4))
}

// TestIdleMappedTablesStillAdvanceTheSlot: only unmapped tables take
// writes; the slot's confirmed position keeps up, so the WAL it retains
// stays bounded: 10 s in make test, 60 s in make soak (KURA_SOAK=1).
func TestIdleMappedTablesStillAdvanceTheSlot(t *testing.T) {
	f := newFixture(t, true)
	exec(t, f.pg.DSN(), "CREATE TABLE IF NOT EXISTS busy_unmapped (id bigserial PRIMARY KEY, pad text)")
	applied, _ := f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 })
	waitSlot(t, f.pg.DSN(), f.slot)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, f.pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	dur := 10 * time.Second
	switch {
	case os.Getenv("KURA_SOAK") == "1":
		dur = 60 * time.Second
	case testing.Short():
		dur = 3 * time.Second
	}
	const bound = 16 << 20
	var maxRetained, written int64
	start := time.Now()
	var lsn0 int64
	_ = c.QueryRow(ctx, "SELECT pg_current_wal_lsn() - '0/0'").Scan(&lsn0)
	for time.Since(start) < dur {
		if _, err := c.Exec(ctx, "INSERT INTO busy_unmapped (pad) SELECT repeat('p', 200) FROM generate_series(1, 500)"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // busy, not flooding two shared cores
		var retained *int64
		if err := c.QueryRow(ctx, "SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&retained); err != nil {
			t.Fatal(err)
		}
		if retained != nil && time.Since(start) > 2*time.Second {
			maxRetained = max(maxRetained, *retained)
		}
	}
	var lsn1 int64
	_ = c.QueryRow(ctx, "SELECT pg_current_wal_lsn() - '0/0'").Scan(&lsn1)
	written = lsn1 - lsn0
	t.Logf("unmapped writes for %v: %d MiB of WAL; the slot's confirmed position trailed by at most %d KiB", dur, written>>20, maxRetained>>10)
	if written < 2*bound {
		t.Fatalf("only %d bytes of WAL written: too few to tell a stuck slot from an advancing one", written)
	}
	if maxRetained > bound {
		t.Fatalf("the slot trailed the WAL by %d bytes (> %d): an idle slot does not advance", maxRetained, bound)
	}
}

// TestTargetDownHoldsTheSlotThenHitsTheCeiling: with memcached stopped,
// the invalidations wait, the slot's confirmed position stays where it
// was, and once the retained WAL passes the ceiling Run fails loudly.
func TestTargetDownHoldsTheSlotThenHitsTheCeiling(t *testing.T) {
	f := newFixture(t, true)
	m := f.mcProc
	applied, stop := f.run(t, func(o *cdc.Options) {
		o.MaxRetainedBytes = 4 << 20
		o.BacklogEvery = 100 * time.Millisecond
	})
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 })
	waitSlot(t, f.pg.DSN(), f.slot)
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Resume() }()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, f.pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var before string
	if err := c.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&before); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		exec(t, f.pg.DSN(), fmt.Sprintf("INSERT INTO %s SELECT g, 'c', 0, repeat('w', 300) FROM generate_series(%d, %d) g", f.table, i*1000+1, i*1000+1000))
		if i == 0 {
			// At or past the first transaction's commit.
			if err := c.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&before); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	var past bool
	var after string
	if err := c.QueryRow(ctx, "SELECT confirmed_flush_lsn > $1::pg_lsn, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $2", before, f.slot).Scan(&past, &after); err != nil {
		t.Fatal(err)
	}
	if past {
		t.Errorf("the slot confirmed %s, past the first commit (%s) while a target was down", after, before)
	}
	select {
	case err := <-f.done:
		if !errors.Is(err, cdc.ErrRetainedCeiling) {
			t.Fatalf("Run ended with %v, want ErrRetainedCeiling", err)
		}
		if !strings.Contains(err.Error(), "memcached stalled") {
			t.Errorf("the error does not say which target holds the slot back: %v", err)
		}
		t.Logf("%v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not stop at the retained-WAL ceiling within 20s")
	}
	_ = stop
}

// TestSlotThatLostWALIsRecreatedAndEverythingInvalidated: a slot whose
// WAL PostgreSQL removed (max_slot_wal_keep_size) is found "lost" at
// start; cdc recreates it and invalidates every mapped table whole before
// streaming (about 100 MB of WAL: 3 s here).
func TestSlotThatLostWALIsRecreatedAndEverythingInvalidated(t *testing.T) {
	pg, pool := cdctest.StartPostgres(t, []string{"max_slot_wal_keep_size=16MB", "max_wal_size=64MB", "min_wal_size=32MB"},
		"CREATE TABLE lost (id bigint PRIMARY KEY, v bigint)", "ALTER TABLE lost REPLICA IDENTITY FULL",
		"CREATE TABLE filler (id bigserial PRIMARY KEY, pad text)")
	caches := cdctest.StartCaches(t)
	rule, err := cdc.Template("lost", "lost:{id}")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cdc.NewMapping(rule)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pg: pg, table: "lost", slot: "kura_lost", redis: caches.RS, mc: caches.MS, mcProc: caches.Memcached, mapping: m}
	applied, stop := f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 })
	waitSlot(t, pg.DSN(), f.slot)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cdctest.Exec(t, pool, "INSERT INTO lost VALUES (1, 1)")
	f.put(t, "lost:1", "other:1")
	for i := 0; i < 10; i++ {
		cdctest.Exec(t, pool, "INSERT INTO filler (pad) SELECT repeat('x', 1000) FROM generate_series(1, 10000)", "CHECKPOINT")
	}
	var status string
	if err := pool.QueryRow(context.Background(), "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'kura_lost'").Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "lost" {
		t.Fatalf("wal_status %q after ~100 MB of WAL, want lost", status)
	}
	applied, _ = f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 && a.Pos == nil })
	f.waitGone(t, time.Second, "lost:1")
	f.present(t, "other:1")
}

// waitSlot waits until cdc has published its new slot (after the reset
// that goes with it landed).
func waitSlot(t *testing.T, dsn, slot string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for deadline := time.Now().Add(10 * time.Second); ; {
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s not published within 10s", slot)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCrashBeforeTheResetLandedResetsAgain: a consumer that dies after
// creating its slot and before the reset reached every target (here:
// memcached stopped) leaves no slot under the real name, so the next run
// resets again instead of streaming as if the cache had been cleared.
func TestCrashBeforeTheResetLandedResetsAgain(t *testing.T) {
	f := newFixture(t, true)
	if err := f.mcProc.Pause(); err != nil {
		t.Fatal(err)
	}
	// Stale: written before cdc ever ran (Redis only: memcached is stopped).
	if err := f.redis.Set(context.Background(), f.records.Key(5), []byte("old"), time.Hour); err != nil {
		t.Fatal(err)
	}
	_, stop := f.run(t, nil)
	time.Sleep(time.Second) // the slot is created, the reset waits for memcached
	_ = stop()              // the crash
	if err := f.mcProc.Resume(); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(context.Background(), f.pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", f.slot).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("the slot was published before its reset landed on every target")
	}
	f.put(t, f.records.Key(5))
	applied, _ := f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 && a.Pos == nil })
	f.waitGone(t, time.Second, f.records.Key(5))
	waitSlot(t, f.pg.DSN(), f.slot)
}

// dropSlot drops a slot once its consumer's connection is gone (the
// walsender outlives a closed client for a moment).
func dropSlot(t *testing.T, dsn, slot string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := c.Exec(ctx, "SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1", slot)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dropping slot %s: %v", slot, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
