package cdc_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/cdc/pgsource"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

type read struct {
	key        int64
	backend    string
	start, end time.Time
	value      int64         // -1: absent
	clock      time.Duration // how far start may be off the Go clock (another process's)
	stale      time.Duration // an L1 bounded by MaxStaleness: how old its store read may be
	// A reader with a tracking L1: its process (1-based; 0 for the
	// others) and whether the L1 answered the read.
	proc  int
	l1hit bool
}

// procReport is a report of the Redis server (a changed key, or "drop
// everything" when key is empty) as a tracking reader's process handled
// it: start before its L1 dropped the key, end after.
type procReport struct {
	key        string
	start, end time.Time
}

// outcome is what a history found.
type outcome struct {
	violations     []string
	reads, writes  int
	byBackend      map[string]int // violations per reader kind
	trackedHits    int            // tracking readers' reads the L1 answered
	trackedBound   int            // of them, reads a handled report bound to a commit
	trackedReports int            // reports the tracking readers' processes handled
}

// history runs plain-SQL writers and kura readers (Redis and memcached,
// leases on, no L1) under cdc for dur and returns the reads that broke the
// guarantee: a read that starts after cdc reported a write's commit
// applied must return that write's version or a later one.
//
// With l1 > 0 the readers have an L1 with MaxStaleness l1 (no tracking),
// and docs/leases.md's line for it applies: a read may return a value
// whose store read began up to l1 before it, so only reports from l1
// before the read's start bind it.
//
// With node false, two more readers have an L1 over Redis with client-side
// tracking (each its own store, Cache and L1: two processes), and
// docs/leases.md's line for that combination applies: a read the L1 did
// not answer must be as new as every commit reported applied before it
// began; a read the L1 answered may be older until the reader's process
// has handled a server report of the key (or a flush) that it began to
// handle after cdc reported the commit applied (the report of cdc's
// invalidation, or a later one) and finished before the read began.
//
// With node, the readers are Node processes (js/test/fixtures/cdc-reader.mjs,
// one per backend, kura's Node package with leases on) fetching the keys
// the Go views spell; their loader reads PostgreSQL through a loopback
// endpoint of this test. The checker is the same.
func history(t *testing.T, dur time.Duration, fault func(*cdc.Options), l1 time.Duration, node bool) (out outcome) {
	t.Helper()
	if node {
		nodeReadersReady(t)
	}
	const keys = 40
	// One PostgreSQL for the package; each history has its own table,
	// sequence, slot and publication in it.
	pg, pool, table := sharedPG(t)
	cdctest.Exec(t, pool,
		fmt.Sprintf("CREATE SEQUENCE %s_ver", table),
		fmt.Sprintf("CREATE TABLE %s (id bigint PRIMARY KEY, v bigint NOT NULL)", table),
		fmt.Sprintf("INSERT INTO %s SELECT g, nextval('%[1]s_ver') FROM generate_series(1, %d) g", table, keys))
	caches := cdctest.StartCaches(t)
	rs, ms := caches.RS, caches.MS
	ctx := context.Background()
	views := map[string]*kura.Keyed[int64, int64]{}
	var rules []cdc.Rule
	for name, st := range map[string]store.Store{"redis": rs, "memcached": ms} {
		o := kura.Options{Name: name, Leases: kura.LeasesRequired, LeaseWait: 500 * time.Millisecond}
		if l1 > 0 {
			o.L1 = kura.L1Options{MaxBytes: 1 << 20, MaxStaleness: l1}
		}
		c, err := kura.New[int64](st, o)
		if err != nil {
			t.Fatal(err)
		}
		v, err := kura.NewKeyed[int64, int64](c, kura.KeyedOptions[int64]{Prefix: table + ":"})
		if err != nil {
			t.Fatal(err)
		}
		views[name] = v
		if len(rules) == 0 {
			rule, err := cdc.Record(table, "id", v) // both views share the key function
			if err != nil {
				t.Fatal(err)
			}
			rules = append(rules, rule)
		}
	}
	mapping, err := cdc.NewMapping(rules...)
	if err != nil {
		t.Fatal(err)
	}
	src, err := pgsource.New(pgsource.Options{ConnString: pg.DSN(), Mapping: mapping, Slot: table, Publication: table})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var (
		mu      sync.Mutex
		reports []cdctest.Report
		ready   = make(chan struct{})
		once    sync.Once
	)
	opts := cdc.Options{
		Source: src, Mapping: mapping, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Targets: []cdc.Target{{Name: "redis", Store: rs}, {Name: "memcached", Store: ms}},
		OnApplied: func(a cdc.Applied) {
			if a.Pos == nil {
				return
			}
			mu.Lock()
			reports = append(reports, cdctest.Report{At: a.At, Pos: uint64(a.Pos.(pgsource.LSN))})
			mu.Unlock()
			once.Do(func() { close(ready) })
		},
	}
	if fault != nil {
		fault(&opts)
	}
	rctx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- cdc.Run(rctx, opts) }()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("cdc reported nothing within 20s")
	}

	load := func(ctx context.Context, id int64) (int64, error) {
		var v int64
		err := pool.QueryRow(ctx, "SELECT v FROM "+table+" WHERE id = $1", id).Scan(&v)
		return v, err
	}
	// A write's Pos is pg_current_wal_insert_lsn() after its commit
	// returned: at or past the commit's end.
	writes := make([][]cdctest.Write, keys+1)
	var reads []read
	var nodeReads func() []read
	type tracked struct {
		view    *kura.Keyed[int64, int64]
		mu      sync.Mutex
		reports map[string][]procReport // by key; "" holds the flushes
		final   map[string][]procReport // reports, once the reads ended
	}
	var procs []*tracked
	var unsubs []func()
	for p := 0; p < 2 && !node; p++ {
		ts, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{caches.Redis.Addr}, Tracking: redisstore.Tracking{Enabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer ts.Close()
		tp := &tracked{reports: map[string][]procReport{}}
		// Subscribers run in the order they subscribed: before and
		// after the L1's own (subscribed by kura.New).
		pending := map[string][]time.Time{} // report key -> starts not yet ended (under tp.mu)
		mark := func(keys []string) []string {
			if keys == nil {
				return []string{""}
			}
			return keys
		}
		unsubPre := ts.Subscribe(func(keys []string) {
			now := time.Now()
			tp.mu.Lock()
			for _, k := range mark(keys) {
				pending[k] = append(pending[k], now)
			}
			tp.mu.Unlock()
		})
		unsubs = append(unsubs, unsubPre)
		c, err := kura.New[int64](ts, kura.Options{Name: "redis-l1", Leases: kura.LeasesRequired, LeaseWait: 500 * time.Millisecond,
			// MaxTTL short, so the L1 reads the store often too: a
			// dropped invalidation sends no report, and only a store read
			// can show it.
			L1: kura.L1Options{MaxBytes: 1 << 20, MaxTTL: 50 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		unsubPost := ts.Subscribe(func(keys []string) {
			now := time.Now()
			tp.mu.Lock()
			for _, k := range mark(keys) {
				// The oldest start of the key's reports in progress: if
				// two overlap, the earlier start binds fewer commits.
				if st := pending[k]; len(st) > 0 {
					tp.reports[k] = append(tp.reports[k], procReport{key: k, start: st[0], end: now})
					pending[k] = st[1:]
				}
			}
			tp.mu.Unlock()
		})
		unsubs = append(unsubs, unsubPost)
		if tp.view, err = kura.NewKeyed[int64, int64](c, kura.KeyedOptions[int64]{Prefix: table + ":"}); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, tp)
	}
	if node {
		nodeReads = startNodeReaders(t, views, caches, keys, func(ctx context.Context, i int) (int64, error) { return load(ctx, int64(i+1)) })
	}
	wctx, stop := context.WithTimeout(ctx, dur)
	defer stop()
	var wg sync.WaitGroup
	const writers = 2
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				id := int64(1 + w + writers*rand.IntN(keys/writers)) // each writer owns its keys
				var v int64
				var text string
				if err := pool.QueryRow(wctx, "UPDATE "+table+" SET v = nextval('"+table+"_ver') WHERE id = $1 RETURNING v", id).Scan(&v); err != nil {
					continue
				}
				if err := pool.QueryRow(wctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&text); err != nil {
					continue
				}
				lsn, err := pglogrepl.ParseLSN(text)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				writes[id] = append(writes[id], cdctest.Write{Version: v, Pos: uint64(lsn)})
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			}
		}()
	}
	for i := 0; i < 4 && !node; i++ {
		backend := "redis"
		if i%2 == 1 {
			backend = "memcached"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []read
			for wctx.Err() == nil {
				id := int64(1 + rand.IntN(keys))
				start := time.Now()
				v, err := views[backend].Fetch(wctx, id, load)
				end := time.Now()
				if err != nil {
					continue
				}
				mine = append(mine, read{key: id, backend: backend, start: start, end: end, value: v, stale: l1})
				if end.Sub(start) < 50*time.Microsecond {
					time.Sleep(200 * time.Microsecond) // an L1 hit: do not spin a shared core
				}
			}
			mu.Lock()
			reads = append(reads, mine...)
			mu.Unlock()
		}()
	}
	for p, tp := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []read
			st := tp.view.Cache()
			for wctx.Err() == nil {
				id := int64(1 + rand.IntN(keys))
				hits := st.Stats().L1.Hits
				start := time.Now()
				v, err := tp.view.Fetch(wctx, id, load)
				end := time.Now()
				if err != nil {
					continue
				}
				mine = append(mine, read{key: id, backend: "redis+L1 tracking", start: start, end: end, value: v,
					proc: p + 1, l1hit: st.Stats().L1.Hits > hits})
				if end.Sub(start) < 50*time.Microsecond {
					time.Sleep(200 * time.Microsecond) // an L1 hit: do not spin a shared core
				}
			}
			mu.Lock()
			reads = append(reads, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if node {
		reads = nodeReads()
	}
	for _, u := range unsubs {
		u()
	}
	for _, tp := range procs { // a report in flight may still land
		tp.mu.Lock()
		tp.final = maps.Clone(tp.reports)
		tp.mu.Unlock()
	}
	stopRun()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}

	// The checker: cdctest.Check, the rule the Debezium history checks
	// too. A read is bound by the reports before its start, less its L1's
	// MaxStaleness (the slack) and another process's clock margin. A
	// tracking reader's L1 hit is bound instead by the reports before its
	// process began handling a report of the key (or a flush) that it
	// finished handling before the read began: it is checked as a read
	// that began then (the latest such start binds the most, as the
	// positions reported only grow).
	var firstReport time.Time
	for i, r := range reports {
		if i == 0 || r.At.Before(firstReport) {
			firstReport = r.At
		}
	}
	handledBefore := func(rd read) (time.Time, bool) {
		tp := procs[rd.proc-1]
		var at time.Time
		for _, k := range []string{views["redis"].Key(rd.key), ""} {
			for _, r := range tp.final[k] {
				if !r.end.After(rd.start) && r.start.After(at) {
					at = r.start
				}
			}
		}
		return at, len(reports) > 0 && firstReport.Before(at) // a report before it binds the read
	}
	for _, tp := range procs {
		for _, rs := range tp.final {
			out.trackedReports += len(rs)
		}
	}
	bySlack := map[time.Duration][]cdctest.Read{}
	var hits []cdctest.Read
	for _, rd := range reads {
		cr := cdctest.Read{Key: rd.key, Backend: rd.backend, Start: rd.start, End: rd.end, Value: rd.value, Clock: rd.clock}
		if !rd.l1hit {
			bySlack[rd.stale] = append(bySlack[rd.stale], cr)
			continue
		}
		out.trackedHits++
		if at, ok := handledBefore(rd); ok {
			out.trackedBound++
			cr.Start = at
			hits = append(hits, cr)
		}
	}
	out.byBackend = map[string]int{}
	violation := func(v cdctest.Violation, hit bool) {
		out.byBackend[v.Read.Backend]++
		when := "read at " + v.Read.Start.Format("15:04:05.000000")
		if hit {
			when = "an L1 hit at " + v.Read.End.Format("15:04:05.000000") + " after its process handled a report begun at " + v.Read.Start.Format("15:04:05.000000")
		}
		out.violations = append(out.violations, fmt.Sprintf("%s %s:%d %s returned version %d; cdc had reported version %d's commit applied (LSN %s) before the read began",
			v.Read.Backend, table, v.Read.Key, when, v.Read.Value, v.Must, pgsource.LSN(v.Applied)))
	}
	for slack, rs := range bySlack {
		for _, v := range cdctest.Check(rs, writes, reports, slack) {
			violation(v, false)
		}
	}
	for _, v := range cdctest.Check(hits, writes, reports, 0) {
		violation(v, true)
	}
	for _, ws := range writes {
		out.writes += len(ws)
	}
	out.reads = len(reads)
	return out
}

func historyDuration() time.Duration {
	if os.Getenv("KURA_SOAK") == "1" {
		return 60 * time.Second
	}
	return 4 * time.Second
}

// TestPerReadGuaranteeWithWritersThatNeverCallKura: with cdc delivering,
// no read that starts after cdc reported a commit applied returns a
// value older than that commit (Redis and memcached, leases on, no L1);
// with an L1 bounded by MaxStaleness, older only within that bound; with
// an L1 over Redis's client-side tracking, older only from the L1 and
// only until the reader's process handled the server's report of the key.
// Every history has the tracking readers beside the others.
func TestPerReadGuaranteeWithWritersThatNeverCallKura(t *testing.T) {
	for _, tc := range []struct {
		name string
		l1   time.Duration
	}{{"no L1", 0}, {"L1 MaxStaleness 100ms", 100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) { guaranteeHolds(t, historyDuration(), tc.l1, false, 1000) })
	}
}

// guaranteeHolds runs a history without faults and fails on any violation
// or on fewer than minReads reads (or 100 writes); with Go readers, also
// when the tracking readers' L1 answered nothing, or no read it answered
// was bound by a handled report (the check would be vacuous).
func guaranteeHolds(t *testing.T, dur, l1 time.Duration, node bool, minReads int) {
	t.Helper()
	o := history(t, dur, nil, l1, node)
	t.Logf("%d reads, %d plain-SQL writes, %d violations; tracking L1: %d hits, %d of them bound by one of %d handled reports",
		o.reads, o.writes, len(o.violations), o.trackedHits, o.trackedBound, o.trackedReports)
	if len(o.violations) > 0 {
		t.Fatalf("%d reads broke the guarantee (%v), first: %s", len(o.violations), o.byBackend, o.violations[0])
	}
	if o.reads < minReads || o.writes < 100 {
		t.Fatalf("too small a history to mean anything: %d reads, %d writes", o.reads, o.writes)
	}
	if !node && (o.trackedHits == 0 || o.trackedBound == 0) {
		t.Fatalf("the tracking L1 answered %d reads, %d of them after a handled report: nothing was checked", o.trackedHits, o.trackedBound)
	}
}

// TestHistoryCheckerCatchesInjectedFaults: the same history with an
// invalidation dropped, or a position reported (and confirmed) before its
// invalidation landed, must show violations, among the tracking L1's
// readers too.
func TestHistoryCheckerCatchesInjectedFaults(t *testing.T) { checkerCatchesFaults(t, false) }

func checkerCatchesFaults(t *testing.T, node bool) {
	for _, tc := range []struct {
		name  string
		fault func(*cdc.Options)
	}{
		{"invalidation dropped", func(o *cdc.Options) { cdc.InjectFaults(o, 2, 0) }},
		{"confirmed before applied", func(o *cdc.Options) { cdc.InjectFaults(o, 0, 30*time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := history(t, 2*time.Second, tc.fault, 0, node)
			t.Logf("%d reads, %d writes, %d violations %v", o.reads, o.writes, len(o.violations), o.byBackend)
			if len(o.violations) == 0 {
				t.Fatal("the checker missed the injected fault")
			}
			if !node && o.byBackend["redis+L1 tracking"] == 0 {
				t.Fatal("the checker missed the injected fault among the readers with a tracking L1")
			}
			t.Logf("first: %s", o.violations[0])
		})
	}
}
