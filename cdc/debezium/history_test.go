package debezium

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/internal/harness/kafka"
	"github.com/kuracache/kura/store"
)

// dbzHistory runs plain-SQL writers on the path's table and kura readers (Redis and memcached,
// leases on, no L1) while a KafkaSource under cdc.Run invalidates, and returns the reads that
// broke docs/leases.md's line for that combination, as cdc's own history test checks the
// direct PostgreSQL source (the same checker, cdctest.Check): a read that starts after kura
// reported an event applied returns that event's version or a later one.
//
// kura reports an event applied in two ways, and both bind: cdc.Run's OnApplied, and the
// group's committed offset (what a restarted or rebalanced consumer trusts). A report's
// position is the Kafka offset it covers (one partition); a write's position is the offset of
// its change event, read back from the committed records.
//
// fault turns on the consumer's injected fault: offsets committed 30 ms before the batch's
// invalidations are handed on.
func dbzHistory(t *testing.T, p *dbzPath, group string, dur time.Duration, fault bool) (violations []string, nreads, nwrites int) {
	t.Helper()
	const keys = 40
	caches := cdctest.StartCaches(t)
	views := map[string]*kura.Keyed[int64, int64]{}
	var rule cdc.Rule
	for name, st := range map[string]store.Store{"redis": caches.RS, "memcached": caches.MS} {
		c, err := kura.New[int64](st, kura.Options{Name: name, Leases: kura.LeasesRequired, LeaseWait: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		v, err := kura.NewKeyed[int64, int64](c, kura.KeyedOptions[int64]{Prefix: p.Name + ":"})
		if err != nil {
			t.Fatal(err)
		}
		views[name] = v
		if rule, err = cdc.Record(p.Table, "id", v); err != nil { // both views share the key function
			t.Fatal(err)
		}
	}
	mapping, err := cdc.NewMapping(rule)
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu      sync.Mutex
		reports []cdctest.Report
		writes  = make([][]cdctest.Write, keys+1)
		seen    = map[int64]bool{} // offsets whose write is recorded
		ready   = make(chan struct{})
		once    sync.Once
	)
	tp := p.Topic + "/0"
	cfg := testConfig(p.B.Addr, group, p.Topic)
	cfg.commitBeforeApply, cfg.faultPause = fault, 30*time.Millisecond
	cfg.onCommitted = func(recs []*kgo.Record) {
		at := time.Now()
		mu.Lock()
		defer mu.Unlock()
		var last int64 = -1
		for _, r := range recs {
			last = max(last, r.Offset)
			if seen[r.Offset] {
				continue
			}
			seen[r.Offset] = true
			m, err := Decode(r.Key, r.Value)
			if err != nil || m.Kind != KindChange || m.Change.After == nil {
				continue
			}
			id, _ := m.Change.After.Text("id")
			v, _ := m.Change.After.Text("v")
			if k := atoi(id); k >= 1 && k <= keys {
				writes[k] = append(writes[k], cdctest.Write{Version: atoi(v), Pos: uint64(r.Offset)})
			}
		}
		if last >= 0 {
			reports = append(reports, cdctest.Report{At: at, Pos: uint64(last)})
		}
	}
	src, err := NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := cdc.Options{
		Source: src, Mapping: mapping, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Targets: []cdc.Target{{Name: "redis", Store: caches.RS}, {Name: "memcached", Store: caches.MS}},
		OnApplied: func(a cdc.Applied) {
			pos, ok := a.Pos.(*position)
			if !ok {
				return
			}
			off, ok := pos.offsets[tp]
			if !ok {
				return
			}
			mu.Lock()
			reports = append(reports, cdctest.Report{At: a.At, Pos: uint64(off)})
			mu.Unlock()
			once.Do(func() { close(ready) })
		},
	}
	ctx := context.Background()
	rctx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- cdc.Run(rctx, opts) }()
	select {
	case <-ready: // the snapshot's rows are applied: the group is live
	case <-time.After(90 * time.Second):
		stopRun()
		t.Fatalf("cdc reported nothing within 90s (engine log:\n%s)", p.Eng.Log())
	}

	var reads []cdctest.Read
	wctx, stop := context.WithTimeout(ctx, dur)
	defer stop()
	var wg sync.WaitGroup
	var nw atomic.Int64
	const writers = 2
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				id := int64(1 + w + writers*rand.IntN(keys/writers)) // each writer owns its keys
				if _, err := p.update(wctx, id); err != nil {
					continue
				}
				nw.Add(1)
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			}
		}()
	}
	for i := 0; i < 4; i++ {
		backend := "redis"
		if i%2 == 1 {
			backend = "memcached"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := cdctest.Reads(wctx, backend, views[backend], keys, p.load)
			mu.Lock()
			reads = append(reads, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Let the stream catch up a little, so the last writes' reports exist too (reads are over:
	// this only adds reports, which bind no read that began before them).
	time.Sleep(500 * time.Millisecond)
	stopRun()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range cdctest.Check(reads, writes, reports, 0) {
		rd := v.Read
		violations = append(violations, fmt.Sprintf("%s %s:%d read at %s returned version %d; kura had reported version %d's event applied (offset %d) before the read began",
			rd.Backend, p.Name, rd.Key, rd.Start.Format("15:04:05.000000"), rd.Value, v.Must, v.Applied))
	}
	events := 0
	for _, ws := range writes {
		events += len(ws)
	}
	t.Logf("%d change events committed, %d reports (OnApplied and commits)", events, len(reports))
	return violations, len(reads), int(nw.Load())
}

// TestPerReadGuaranteeThroughDebezium: plain-SQL writers on PostgreSQL, Debezium's connector
// into Kafka, a KafkaSource invalidating Redis and memcached with leases on and no L1: no read
// that starts after kura reported an event applied (OnApplied, or its offset committed) returns
// a value older than that event. The same history with the injected fault (an offset committed
// before its invalidation landed) must show violations.
func TestPerReadGuaranteeThroughDebezium(t *testing.T) {
	p := startPath(t, "dbzhist", 40, 1)
	dur := 4 * time.Second
	if kafka.Soak() {
		dur = 60 * time.Second
	}
	t.Run("guarantee holds", func(t *testing.T) {
		v, reads, writes := dbzHistory(t, p, "g-hist", dur, false)
		t.Logf("%d reads, %d plain-SQL writes, %d violations", reads, writes, len(v))
		if len(v) > 0 {
			t.Fatalf("%d reads broke the guarantee, first: %s", len(v), v[0])
		}
		if reads < 500 || writes < 100 {
			t.Fatalf("too small a history to mean anything: %d reads, %d writes", reads, writes)
		}
	})
	t.Run("checker catches offsets committed before the invalidation landed", func(t *testing.T) {
		v, reads, writes := dbzHistory(t, p, "g-hist-fault", 3*time.Second, true)
		t.Logf("%d reads, %d writes, %d violations", reads, writes, len(v))
		if len(v) == 0 {
			t.Fatal("the checker missed the injected fault")
		}
		t.Logf("first: %s", v[0])
	})
}
