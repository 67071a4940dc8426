package cdcconf_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/cdcconf"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/store"
)

// TestMain doubles as the cdc process the kill tests kill: with
// KURA_CDC_CHILD_CONFIG set it runs the configuration until SIGTERM.
func TestMain(m *testing.M) {
	if path := os.Getenv("KURA_CDC_CHILD_CONFIG"); path != "" {
		os.Exit(child(path))
	}
	os.Exit(m.Run())
}

func child(path string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	conf, err := cdcconf.Load(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts, src, err := conf.Open(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer src.Close()
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := cdc.Run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startChild(t *testing.T, config string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KURA_CDC_CHILD_CONFIG="+config)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

const rows = 200

// TestKillNineLosesNothing: plain-SQL writers change rows while Go
// readers fill Redis and memcached through kura (leases on); kura cdc is
// kill -9'd at random points, a standby takes over when the active one
// dies, PostgreSQL restarts, and memcached is stopped for 10 s while the
// kills go on. At the end every cached value equals the database's or is
// absent.
func TestKillNineLosesNothing(t *testing.T) {
	pg, pool := cdctest.StartPostgres(t, nil,
		"CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)",
		fmt.Sprintf("INSERT INTO items SELECT g, 0 FROM generate_series(1, %d) g", rows))
	caches := cdctest.StartCaches(t)
	r, m, rs, ms := caches.Redis, caches.Memcached, caches.RS, caches.MS
	ctx := context.Background()
	dir := t.TempDir()
	config := filepath.Join(dir, "cdc.json")
	conf := fmt.Sprintf(`{"database": {"url": %q},
		"targets": [{"name": "redis", "url": "redis://%s"}, {"name": "memcached", "url": "memcached://%s"}],
		"tables": [{"table": "items", "keys": [{"prefix": "item:", "column": "id"}]}]}`, pg.DSN(), r.Addr, m.Addr)
	if err := os.WriteFile(config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}

	var views []*kura.Keyed[int64, int64]
	for name, st := range map[string]store.Store{"redis": rs, "memcached": ms} {
		c, err := kura.New[int64](st, kura.Options{Name: name, LeaseWait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		v, err := kura.NewKeyed[int64, int64](c, kura.KeyedOptions[int64]{Prefix: "item:"})
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, v)
	}
	load := func(ctx context.Context, id int64) (int64, error) {
		var v int64
		err := pool.QueryRow(ctx, "SELECT v FROM items WHERE id = $1", id).Scan(&v)
		return v, err
	}

	active := startChild(t, config)
	standby := startChild(t, config)
	wctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var writes, reads sync.Map
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for wctx.Err() == nil {
				k := 1 + rand.IntN(10)
				first := 1 + rand.Int64N(rows-int64(k))
				if _, err := pool.Exec(wctx, "UPDATE items SET v = v + 1 WHERE id BETWEEN $1 AND $2", first, first+int64(k)-1); err == nil {
					n++
				}
				time.Sleep(2 * time.Millisecond)
			}
			writes.Store(w, n)
		}()
	}
	for rd := 0; rd < 4; rd++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			view := views[rd%2]
			for wctx.Err() == nil {
				_, _ = view.Fetch(wctx, 1+rand.Int64N(rows), load)
				n++
			}
			reads.Store(rd, n)
		}()
	}

	kills := 5
	if os.Getenv("KURA_SOAK") == "1" {
		kills = 500
	}
	// One of the two holds the slot before the first kill.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if p := slotPid(t, pool); p != 0 && (p == active.cmd.Process.Pid || p == standby.cmd.Process.Pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no cdc process took the slot within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var takeovers []time.Duration
	var pausedAt time.Time // memcached stopped for 10 s from here, while the kills go on
	resume := func(wait bool) {
		if pausedAt.IsZero() {
			return
		}
		if left := 10*time.Second - time.Since(pausedAt); left > 0 {
			if !wait {
				return
			}
			time.Sleep(left)
		}
		if err := m.Resume(); err != nil {
			t.Fatal(err)
		}
		pausedAt = time.Time{}
	}
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
		resume(false)
		// The victim is whichever child holds the slot: wait until one
		// does (after PostgreSQL's restart both reconnect).
		pid := 0
		for deadline := time.Now().Add(30 * time.Second); ; {
			if pid = slotPid(t, pool); pid == active.cmd.Process.Pid || pid == standby.cmd.Process.Pid {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: no cdc process held the slot within 30s (client pid %d)", i+1, pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
		victim := active
		if pid == standby.cmd.Process.Pid {
			victim, standby = standby, active
		}
		killed := time.Now()
		victim.kill()
		// The standby takes the slot over.
		deadline := killed.Add(15 * time.Second)
		for {
			if p := slotPid(t, pool); p == standby.cmd.Process.Pid {
				takeovers = append(takeovers, time.Since(killed))
				break
			}
			if time.Now().After(deadline) {
				var state string
				_ = pool.QueryRow(ctx, "SELECT coalesce(s.active_pid::text, 'none') || ' ' || s.active::text || ' client port ' || coalesce(r.client_port::text, 'none') || ' ' || coalesce(r.state, '') FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = 'kura_cdc'").Scan(&state)
				t.Fatalf("kill %d: the standby (pid %d) did not take the slot over within 15s (slot walsender/active: %s, client pid %d)", i+1, standby.cmd.Process.Pid, state, slotPid(t, pool))
			}
			time.Sleep(20 * time.Millisecond)
		}
		active = standby
		standby = startChild(t, config) // a new standby
		if i == 0 {
			// PostgreSQL restarts: cdc, writers and readers reconnect.
			// Not while memcached is stopped: a fast shutdown waits for
			// each walsender's client to confirm everything sent (up to
			// wal_sender_timeout), which cdc does only once applied.
			if err := pg.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if i == 1 {
			// memcached stopped for 10 s: its invalidations wait, the
			// slot's confirmed position stays, nothing is skipped. The
			// kills (and PostgreSQL's restart) go on meanwhile rather than
			// the test sleeping through it.
			if err := m.Pause(); err != nil {
				t.Fatal(err)
			}
			pausedAt = time.Now()
		}
	}
	resume(true)
	stopLoad()
	wg.Wait()
	waitCaughtUp(t, pool)
	stale := cdctest.Stale(t, views, rows, load)
	sum := func(m *sync.Map) (n int) {
		m.Range(func(_, v any) bool { n += v.(int); return true })
		return
	}
	t.Logf("%d kill -9s, %d write transactions, %d reads; takeover times %v", kills, sum(&writes), sum(&reads), takeovers)
	if len(stale) > 0 {
		t.Fatalf("%d stale entries after the run:\n%v", len(stale), stale)
	}
	for _, d := range takeovers {
		if d > 15*time.Second {
			t.Errorf("a takeover took %v (bound 15 s)", d)
		}
	}
}

func slotPid(t *testing.T, pool *pgxpool.Pool) int {
	var pid *int32
	err := pool.QueryRow(context.Background(), "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'kura_cdc'").Scan(&pid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Logf("reading the slot: %v", err) // PostgreSQL restarting
		return 0
	}
	if pid == nil {
		return 0
	}
	// active_pid is the walsender's pid: map it to the client's.
	var port *int32
	_ = pool.QueryRow(context.Background(), "SELECT client_port FROM pg_stat_replication WHERE pid = $1", *pid).Scan(&port)
	if port == nil {
		return 0
	}
	return pidOfLocalPort(int(*port))
}

// waitCaughtUp waits until the slot has confirmed the WAL position the
// writers left.
func waitCaughtUp(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var head string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&head); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok *bool
		if err := pool.QueryRow(ctx, "SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = 'kura_cdc'", head).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok != nil && *ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cdc did not confirm %s within 30s", head)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pidOfLocalPort finds the process holding a local TCP port (the
// replication client), through /proc.
func pidOfLocalPort(port int) int {
	// Only an established socket with an inode: on loopback Linux reuses
	// a port still in TIME_WAIT (inode 0) for a new connection at once,
	// and the old entry may be listed after the live one.
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(string(b), "\n")
		for _, l := range lines[1:] {
			fields := strings.Fields(l)
			if len(fields) < 10 || fields[3] != "01" || fields[9] == "0" {
				continue
			}
			local := fields[1]
			i := len(local) - 4
			if i < 0 {
				continue
			}
			p, err := strconv.ParseInt(local[i:], 16, 32)
			if err == nil && int(p) == port {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if l, err := os.Readlink(fd); err == nil && inodes[l] {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(fd))))
			return pid
		}
	}
	return 0
}
