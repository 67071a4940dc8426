package cdc_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/cdc/pgsource"
	"github.com/kuracache/kura/store"
)

type write struct {
	version int64
	lsn     uint64 // pg_current_wal_insert_lsn() after the commit returned: ≥ the commit's end
}

type read struct {
	key        int64
	backend    string
	start, end time.Time
	value      int64         // -1: absent
	clock      time.Duration // how far start may be off the Go clock (another process's)
}

type report struct {
	at  time.Time
	pos uint64
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
// With node, the readers are Node processes (js/test/fixtures/cdc-reader.mjs,
// one per backend, kura's Node package with leases on) fetching the keys
// the Go views spell; their loader reads PostgreSQL through a loopback
// endpoint of this test. The checker is the same.
func history(t *testing.T, dur time.Duration, fault func(*cdc.Options), l1 time.Duration, node bool) (violations []string, nreads, nwrites int) {
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
		reports []report
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
			reports = append(reports, report{at: a.At, pos: uint64(a.Pos.(pgsource.LSN))})
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
	writes := make([][]write, keys+1)
	var reads []read
	var nodeReads func() []read
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
				writes[id] = append(writes[id], write{version: v, lsn: uint64(lsn)})
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
				mine = append(mine, read{key: id, backend: backend, start: start, end: end, value: v})
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
	stopRun()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}

	// The checker. reports are in time order; for each read, the
	// highest position reported before it started.
	sort.Slice(reports, func(i, j int) bool { return reports[i].at.Before(reports[j].at) })
	maxPos := make([]uint64, len(reports))
	for i, r := range reports {
		maxPos[i] = r.pos
		if i > 0 {
			maxPos[i] = max(maxPos[i], maxPos[i-1])
		}
	}
	for _, rd := range reads {
		bound := rd.start.Add(-l1 - rd.clock)
		i := sort.Search(len(reports), func(i int) bool { return !reports[i].at.Before(bound) }) - 1
		if i < 0 {
			continue
		}
		applied := maxPos[i]
		var must int64 = -1
		for _, w := range writes[rd.key] {
			if w.lsn <= applied {
				must = max(must, w.version)
			}
		}
		if rd.value < must {
			violations = append(violations, fmt.Sprintf("%s %s:%d read at %s returned version %d; cdc had reported version %d's commit applied (LSN %s) before the read began",
				rd.backend, table, rd.key, rd.start.Format("15:04:05.000000"), rd.value, must, pgsource.LSN(applied)))
		}
	}
	for _, ws := range writes {
		nwrites += len(ws)
	}
	return violations, len(reads), nwrites
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
// with an L1 bounded by MaxStaleness, older only within that bound.
func TestPerReadGuaranteeWithWritersThatNeverCallKura(t *testing.T) {
	for _, tc := range []struct {
		name string
		l1   time.Duration
	}{{"no L1", 0}, {"L1 MaxStaleness 100ms", 100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) { guaranteeHolds(t, historyDuration(), tc.l1, false, 1000) })
	}
}

// guaranteeHolds runs a history without faults and fails on any violation
// or on fewer than minReads reads (or 100 writes).
func guaranteeHolds(t *testing.T, dur, l1 time.Duration, node bool, minReads int) {
	t.Helper()
	v, reads, writes := history(t, dur, nil, l1, node)
	t.Logf("%d reads, %d plain-SQL writes, %d violations", reads, writes, len(v))
	if len(v) > 0 {
		t.Fatalf("%d reads broke the guarantee, first: %s", len(v), v[0])
	}
	if reads < minReads || writes < 100 {
		t.Fatalf("too small a history to mean anything: %d reads, %d writes", reads, writes)
	}
}

// TestHistoryCheckerCatchesInjectedFaults: the same history with an
// invalidation dropped, or a position reported (and confirmed) before its
// invalidation landed, must show violations.
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
			v, reads, writes := history(t, 2*time.Second, tc.fault, 0, node)
			t.Logf("%d reads, %d writes, %d violations", reads, writes, len(v))
			if len(v) == 0 {
				t.Fatal("the checker missed the injected fault")
			}
			t.Logf("first: %s", v[0])
		})
	}
}
