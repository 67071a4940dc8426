package debezium

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/cdc/pgsource"
	"github.com/kuracache/kura/cdc/staleness"
	"github.com/kuracache/kura/internal/harness/kafka"
	"github.com/kuracache/kura/store"
)

// appliedTimes records, per key, when its invalidation returned from each target.
type appliedTimes struct {
	mu  sync.Mutex
	at  map[string][2]time.Time // per target index
	set map[string]int          // targets seen
}

func newAppliedTimes() *appliedTimes {
	return &appliedTimes{at: map[string][2]time.Time{}, set: map[string]int{}}
}

func (a *appliedTimes) note(target int, keys []string) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range keys {
		v := a.at[k]
		if v[target].IsZero() {
			v[target] = now
			a.at[k] = v
			a.set[k]++
		}
	}
}

// applied returns when key's invalidation had landed on both targets.
func (a *appliedTimes) applied(key string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.set[key] < 2 {
		return time.Time{}, false
	}
	v := a.at[key]
	if v[0].After(v[1]) {
		return v[0], true
	}
	return v[1], true
}

// leaserStore is a store with leases that can walk its keys (a lost history, the direct
// source's first slot, is invalidated by prefix): Redis and memcached.
type leaserStore interface {
	store.Store
	store.Leaser
	store.KeyWalker
}

// timed is a target's store with its lease-aware Invalidate timed (target: 0 or 1).
type timed struct {
	leaserStore
	a      *appliedTimes
	target int
}

func (s timed) Invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	err := s.leaserStore.Invalidate(ctx, keys, stale)
	if err == nil {
		s.a.note(s.target, keys)
	}
	return err
}

func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + " ms" }

// TestBenchLagDebezium (KURA_CDC_BENCH=1, or make soak): commit -> applied through Debezium and
// Kafka beside the direct PostgreSQL source, in one run on one load, then the staleness
// inspector's figures under the same rates (benchStaleness, the second phase).
//
// Lag phase: single-row INSERT commits (each a new row, so each key names one commit) at 100
// and at 1,000 commits/s for KURA_CDC_BENCH_SECONDS (10) each, synchronous_commit on. Both
// sources stream the same database at once (pgsource on a slot of its own; Debezium's connector
// into Kafka and a KafkaSource), each invalidating Redis and memcached through cdc.Run under a
// key prefix of its own (pg: and dbz:), so neither source's invalidations cover for the
// other's. Per commit: when the writer's COMMIT returned to when the key's invalidation had
// returned from both targets.
func TestBenchLagDebezium(t *testing.T) {
	if os.Getenv("KURA_CDC_BENCH") != "1" && !kafka.Soak() {
		t.Skip("benchmark: KURA_CDC_BENCH=1 KURA_DEBEZIUM=1 (or make soak)")
	}
	secs := 10
	if s, err := strconv.Atoi(os.Getenv("KURA_CDC_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	p := startPath(t, "dbzbench", hotRows, 1, "synchronous_commit=on", "max_wal_size=4GB")
	caches := cdctest.StartCaches(t)
	mappingFor := func(prefix string) *cdc.Mapping {
		rule, err := cdc.Template(p.Table, prefix+"{id}")
		if err != nil {
			t.Fatal(err)
		}
		m, err := cdc.NewMapping(rule)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sides := []struct {
		name, prefix string
		mapping      *cdc.Mapping
		src          cdc.Source
		at           *appliedTimes
	}{{name: "direct PostgreSQL (pgsource)", prefix: "pg:"}, {name: "Debezium + Kafka (KafkaSource)", prefix: "dbz:"}}
	for i := range sides {
		sides[i].mapping = mappingFor(sides[i].prefix)
	}
	direct, err := pgsource.New(pgsource.Options{ConnString: p.PG.DSN(), Mapping: sides[0].mapping, Slot: "dbzbench_direct", Publication: "dbzbench_direct"})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	viaKafka, err := NewSource(testConfig(p.B.Addr, "g-bench", p.Topic))
	if err != nil {
		t.Fatal(err)
	}
	defer viaKafka.Close()
	sides[0].src, sides[1].src = direct, viaKafka
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	defer func() { cancel(); runs.Wait() }()
	ready := make([]chan struct{}, len(sides))
	for i := range sides {
		sides[i].at = newAppliedTimes()
		ready[i] = make(chan struct{})
		var once sync.Once
		lg := quiet
		if os.Getenv("KURA_BENCH_LOG") != "" {
			lg = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
		opts := cdc.Options{Source: sides[i].src, Mapping: sides[i].mapping, Logger: lg,
			Targets: []cdc.Target{{Name: "redis", Store: timed{caches.RS, sides[i].at, 0}},
				{Name: "memcached", Store: timed{caches.MS, sides[i].at, 1}}},
			OnApplied: func(cdc.Applied) { once.Do(func() { close(ready[i]) }) }}
		runs.Add(1)
		go func() {
			defer runs.Done()
			if err := cdc.Run(ctx, opts); err != nil {
				t.Errorf("%s: cdc.Run: %v", sides[i].name, err)
			}
		}()
	}
	// Both are live once a first commit is applied by each.
	var next atomic.Int64
	next.Store(1_000_000) // above the hot rows the staleness phase updates
	insert := func(ctx context.Context) (int64, time.Time, error) {
		id := next.Add(1)
		_, err := p.Pool.Exec(ctx, "INSERT INTO "+p.Name+" (id, v) VALUES ($1, 0)", id)
		return id, time.Now(), err
	}
	for i := range sides {
		deadline := time.After(2 * time.Minute)
	wait:
		for {
			if _, _, err := insert(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ready[i]:
				break wait
			case <-deadline:
				t.Fatalf("%s applied nothing within 2 minutes", sides[i].name)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}

	for _, rate := range []int{100, 1000} {
		var mu sync.Mutex
		committed := map[int64]time.Time{}
		elapsed := paced(ctx, rate, time.Duration(secs)*time.Second, func(wctx context.Context) {
			id, at, err := insert(wctx)
			if err != nil {
				return
			}
			mu.Lock()
			committed[id] = at
			mu.Unlock()
		})
		load := loadavg()
		waitFor(t, 3*time.Minute, fmt.Sprintf("every commit of the %d/s run applied by both sources", rate), func() bool {
			for id := range committed {
				for _, s := range sides {
					if _, ok := s.at.applied(s.prefix + strconv.FormatInt(id, 10)); !ok {
						return false
					}
				}
			}
			return true
		})
		var lines []string
		for _, s := range sides {
			var lags []time.Duration
			for id, c := range committed {
				a, _ := s.at.applied(s.prefix + strconv.FormatInt(id, 10))
				lags = append(lags, a.Sub(c))
			}
			lines = append(lines, fmt.Sprintf("%s: p50 %s, p99 %s, max %s", s.name, ms(pct(lags, .5)), ms(pct(lags, .99)), ms(pct(lags, 1))))
		}
		t.Logf("%d commits/s asked, %.0f done (%d commits in %v; a writer that falls behind skips ticks), load %s; commit -> applied on Redis and memcached:\n  %s",
			rate, float64(len(committed))/elapsed.Seconds(), len(committed), elapsed.Round(time.Millisecond), load, strings.Join(lines, "\n  "))
	}
	// The staleness phase: the same two sources and rates, now on UPDATEs of rows that readers
	// cache, beside a control cache that no consumer invalidates.
	var rcs []readerCache
	for _, src := range []struct{ name, prefix string }{{sides[0].name, sides[0].prefix}, {sides[1].name, sides[1].prefix}, {"no cdc (control)", "off:"}} {
		for _, st := range []struct {
			name string
			st   store.Store
		}{{"redis", caches.RS}, {"memcached", caches.MS}} {
			c, err := kura.New[int64](st.st, kura.Options{Name: src.prefix + st.name, Leases: kura.LeasesRequired, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			rcs = append(rcs, readerCache{source: src.name, storeName: st.name, prefix: src.prefix, c: c})
		}
	}
	for _, rate := range []int{100, 1000} {
		benchStaleness(ctx, t, p, rcs, rate, secs)
	}
}

// paced calls do at rate calls a second, from rate/125 goroutines (at least one), for d, and
// returns how long that took. A goroutine that falls behind skips ticks.
func paced(ctx context.Context, rate int, d time.Duration, do func(context.Context)) time.Duration {
	writers := max(1, rate/125)
	wctx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second * time.Duration(writers) / time.Duration(rate))
			defer tick.Stop()
			for {
				select {
				case <-wctx.Done():
					return
				case <-tick.C:
				}
				do(wctx)
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// hotRows is how many rows (ids 1..hotRows) the staleness phase UPDATEs and its readers cache.
const hotRows = 2000

// The staleness phase's readers and inspectors, per reader cache: reads a second (from two
// goroutines); keys a round and loads a second of its inspector.
const (
	readsPerSecond = 300
	inspectSample  = 100
	inspectLoads   = 100
)

// inspectGrace is the inspectors' Grace: KURA_CDC_BENCH_GRACE (a Go duration), else the
// inspector's default (2 s, above the Debezium path's p99 lag on docs/benchmarks/cdc-debezium.md).
// A grace below a source's lag makes its in-flight invalidations count as stale.
func inspectGrace(t *testing.T) time.Duration {
	if s := os.Getenv("KURA_CDC_BENCH_GRACE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("KURA_CDC_BENCH_GRACE=%q: want a positive Go duration such as 50ms", s)
		}
		return d
	}
	return staleness.DefaultGrace
}

// readerCache is one of the staleness phase's caches: a kura Cache (leases on) over one store,
// under one source's key prefix, or under the control's, which no consumer invalidates.
type readerCache struct {
	source, storeName, prefix string
	c                         *kura.Cache[int64]
}

// loadKey is the readers' (and the inspector's) loader of a key under prefix.
func (p *dbzPath) loadKey(prefix string) kura.Loader[int64] {
	return func(ctx context.Context, key string) (int64, error) {
		id, err := strconv.ParseInt(strings.TrimPrefix(key, prefix), 10, 64)
		if err != nil {
			return 0, err
		}
		v, err := p.load(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, kura.ErrNotFound
		}
		return v, err
	}
}

// loadMany loads keys under prefix in one query (the refill before each rate).
func (p *dbzPath) loadMany(prefix string) kura.ManyLoader[int64] {
	return func(ctx context.Context, keys []string) (map[string]int64, error) {
		ids := make([]int64, 0, len(keys))
		for _, k := range keys {
			id, err := strconv.ParseInt(strings.TrimPrefix(k, prefix), 10, 64)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		rows, err := p.Pool.Query(ctx, "SELECT id, v FROM "+p.Name+" WHERE id = ANY($1)", ids)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := make(map[string]int64, len(keys))
		for rows.Next() {
			var id, v int64
			if err := rows.Scan(&id, &v); err != nil {
				return nil, err
			}
			out[prefix+strconv.FormatInt(id, 10)] = v
		}
		return out, rows.Err()
	}
}

func hotKeys(prefix string) []string {
	ks := make([]string, hotRows)
	for i := range ks {
		ks[i] = prefix + strconv.Itoa(i+1)
	}
	return ks
}

// benchStaleness is TestBenchLagDebezium's staleness phase at rate: the inspector's stale
// count and ages per source under that write load. Every reader cache is emptied of the hot
// rows and refilled (FetchMany); then for secs seconds writers commit single-row UPDATEs of
// random hot rows at rate (so entries that readers cached go out of date), readers Fetch
// random hot keys through every cache (readsPerSecond each), and an inspector per cache checks
// inspectSample random hot keys a round against PostgreSQL, round after round; the round
// running when the writers stop is finished. The control caches (prefix off:) see the same
// writes and reads with no consumer: their stale count shows what the inspector finds when
// nothing invalidates, so the sources' figures are not zero by construction.
func benchStaleness(ctx context.Context, t *testing.T, p *dbzPath, rcs []readerCache, rate, secs int) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	grace := inspectGrace(t)
	for _, rc := range rcs {
		keys := hotKeys(rc.prefix)
		if err := rc.c.DeleteMany(ctx, keys); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(keys); i += 500 {
			if _, err := rc.c.FetchMany(ctx, keys[i:min(len(keys), i+500)], 0, p.loadMany(rc.prefix)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rctx, stopReaders := context.WithCancel(ctx)
	var readers sync.WaitGroup
	var reads, readErrs atomic.Int64
	for _, rc := range rcs {
		load := p.loadKey(rc.prefix)
		for range 2 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				tick := time.NewTicker(2 * time.Second / readsPerSecond)
				defer tick.Stop()
				for {
					select {
					case <-rctx.Done():
						return
					case <-tick.C:
					}
					_, err := rc.c.Fetch(rctx, rc.prefix+strconv.Itoa(1+rand.IntN(hotRows)), 0, load)
					if err != nil && rctx.Err() == nil {
						readErrs.Add(1)
					}
					reads.Add(1)
				}
			}()
		}
	}
	defer func() { stopReaders(); readers.Wait() }()

	writing, stopWriting := context.WithCancel(ctx)
	reports := make([][]staleness.Report, len(rcs))
	var inspectors sync.WaitGroup
	for i, rc := range rcs {
		in, err := staleness.New(rc.c, staleness.Options[int64]{
			Keys: func(_ context.Context, n int) ([]string, error) {
				var ks []string
				for _, j := range rand.Perm(hotRows)[:min(n, hotRows)] {
					ks = append(ks, rc.prefix+strconv.Itoa(j+1))
				}
				return ks, nil
			},
			Load: p.loadKey(rc.prefix), SampleSize: inspectSample, MaxLoadsPerSecond: inspectLoads, Grace: grace, Logger: quiet,
		})
		if err != nil {
			t.Fatal(err)
		}
		inspectors.Add(1)
		go func() {
			defer inspectors.Done()
			for writing.Err() == nil {
				r, err := in.Round(ctx) // not writing: the last round finishes after the writers stop
				if err != nil {
					t.Errorf("%s on %s: inspector round: %v", rc.source, rc.storeName, err)
					return
				}
				reports[i] = append(reports[i], r)
			}
		}()
	}
	var updates, updateErrs atomic.Int64
	elapsed := paced(ctx, rate, time.Duration(secs)*time.Second, func(wctx context.Context) {
		if _, err := p.update(wctx, 1+rand.Int64N(hotRows)); err != nil {
			if wctx.Err() == nil {
				updateErrs.Add(1)
			}
			return
		}
		updates.Add(1)
	})
	stopWriting()
	load := loadavg()
	inspectors.Wait()
	stopReaders()
	readers.Wait()

	type total struct {
		rounds int
		r      staleness.Report
	}
	var order []string
	per := map[string]*total{}
	for i, rc := range rcs {
		tt := per[rc.source]
		if tt == nil {
			tt = &total{}
			per[rc.source] = tt
			order = append(order, rc.source)
		}
		for _, r := range reports[i] {
			tt.rounds++
			tt.r.Checked += r.Checked
			tt.r.Fresh += r.Fresh
			tt.r.Stale += r.Stale
			tt.r.Raced += r.Raced
			tt.r.NotCached += r.NotCached
			tt.r.LoadErrors += r.LoadErrors
			tt.r.Unreadable += r.Unreadable
			tt.r.StaleAges = append(tt.r.StaleAges, r.StaleAges...)
			if len(tt.r.StaleKeys) < 5 {
				tt.r.StaleKeys = append(tt.r.StaleKeys, r.StaleKeys[:min(len(r.StaleKeys), 5-len(tt.r.StaleKeys))]...)
			}
		}
	}
	var lines []string
	for _, name := range order {
		r := per[name].r
		line := fmt.Sprintf("%s: %d stale of %d compared (%d checked in %d rounds: %d fresh, %d raced, %d not cached, %d load errors, %d unreadable)",
			name, r.Stale, r.Fresh+r.Stale+r.Raced, r.Checked, per[name].rounds, r.Fresh, r.Raced, r.NotCached, r.LoadErrors, r.Unreadable)
		if r.Stale > 0 {
			ages := r.StaleAges
			line += fmt.Sprintf("; stale ages p50 %v, p99 %v, max %v (%d with an age); e.g. %v",
				pct(ages, .5).Round(time.Millisecond), pct(ages, .99).Round(time.Millisecond), pct(ages, 1).Round(time.Millisecond), len(ages), r.StaleKeys)
		}
		lines = append(lines, line)
	}
	t.Logf("staleness at %d UPDATEs/s asked, %.0f done (%d in %v, %d failed) on %d hot rows; %d reads (%d failed) over %d caches; inspector grace %v, %d keys a round, %d loads/s; load %s:\n  %s",
		rate, float64(updates.Load())/elapsed.Seconds(), updates.Load(), elapsed.Round(time.Millisecond), updateErrs.Load(), hotRows,
		reads.Load(), readErrs.Load(), len(rcs), grace, inspectSample, inspectLoads, load, strings.Join(lines, "\n  "))
	if c := per["no cdc (control)"]; c == nil || c.r.Stale == 0 {
		t.Errorf("the control caches (no consumer) showed no stale entry at %d UPDATEs/s: the inspector or the workload is broken", rate)
	}
	for _, name := range order {
		if r := per[name].r; r.LoadErrors+r.Unreadable > 0 {
			t.Errorf("%s: %d load errors, %d unreadable at %d UPDATEs/s", name, r.LoadErrors, r.Unreadable, rate)
		}
	}
}
