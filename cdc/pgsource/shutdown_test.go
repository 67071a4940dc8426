package pgsource_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/store"
)

// TestFastShutdownDoesNotWaitForAStoppedTarget: with memcached stopped
// (SIGSTOP) and a mapped commit waiting for it, a fast shutdown of
// PostgreSQL (SIGINT, what pg_ctl stop -m fast sends) is not held up by
// cdc: its WAL sender waits at shutdown for the consumer to report every
// WAL position it sent, and cdc must neither hold it there (until
// wal_sender_timeout, or for ever while it answers keepalives) nor
// confirm the waiting commit to let it go. After the restart the slot
// still stands before that commit, and once memcached is back the
// commit's invalidation lands.
func TestFastShutdownDoesNotWaitForAStoppedTarget(t *testing.T) {
	f := newFixture(t, true)
	applied, _ := f.run(t, nil)
	waitApplied(t, applied, func(a cdc.Applied) bool { return len(a.Tables) > 0 })
	rec := f.records.Key
	f.put(t, rec(1))

	if err := f.mcProc.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.mcProc.Resume() }()
	ctx := context.Background()
	var before string
	c, err := pgx.Connect(ctx, f.pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&before); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	exec(t, f.pg.DSN(), "INSERT INTO "+f.table+" VALUES (1, 'a', 1, 'x')")
	f.waitGoneFrom(t, 10*time.Second, []store.Store{f.redis}, rec(1)) // cdc has the commit: Redis has it, memcached waits

	start := time.Now()
	if err := syscall.Kill(f.pg.Pid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	const limit = 30 * time.Second // wal_sender_timeout is 60 s: past 30 s it waits for cdc
	for !f.pg.Exited() && time.Since(start) < limit {
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	exited := f.pg.Exited()
	t.Logf("fast shutdown with memcached stopped and a commit waiting for it: exited %v after %v", exited, took.Round(time.Millisecond))
	if !exited {
		// Let cdc confirm so PostgreSQL can stop, then fail.
		_ = f.mcProc.Resume()
		for !f.pg.Exited() && time.Since(start) < limit+30*time.Second {
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("after memcached resumed: exited %v after %v", f.pg.Exited(), time.Since(start).Round(time.Millisecond))
	}
	if err := f.pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if !exited {
		t.Fatalf("PostgreSQL's fast shutdown waited %v for cdc while a target was stopped", took)
	}
	var past bool
	c, err = pgx.Connect(ctx, f.pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.QueryRow(ctx, "SELECT confirmed_flush_lsn > $1::pg_lsn FROM pg_replication_slots WHERE slot_name = $2", before, f.slot).Scan(&past); err != nil {
		t.Fatal(err)
	}
	if past {
		t.Fatal("the slot was confirmed past a commit whose invalidation had not landed on memcached")
	}
	if err := f.mcProc.Resume(); err != nil {
		t.Fatal(err)
	}
	f.waitGone(t, 20*time.Second, rec(1))
}
