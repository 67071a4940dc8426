package debezium

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/cdc/pgsource"
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
// Kafka beside the direct PostgreSQL source, in one run on one load: single-row INSERT commits
// (each a new row, so each key names one commit) at 100 and at 1,000 commits/s for
// KURA_CDC_BENCH_SECONDS (10) each, synchronous_commit on. Both sources stream the same
// database at once (pgsource on a slot of its own; Debezium's connector into Kafka and a
// KafkaSource), each invalidating Redis and memcached through cdc.Run. Per commit: when the
// writer's COMMIT returned to when the key's invalidation had returned from both targets.
func TestBenchLagDebezium(t *testing.T) {
	if os.Getenv("KURA_CDC_BENCH") != "1" && !kafka.Soak() {
		t.Skip("benchmark: KURA_CDC_BENCH=1 KURA_DEBEZIUM=1 (or make soak)")
	}
	secs := 10
	if s, err := strconv.Atoi(os.Getenv("KURA_CDC_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	p := startPath(t, "dbzbench", 40, 1, "synchronous_commit=on", "max_wal_size=4GB")
	caches := cdctest.StartCaches(t)
	rule, err := cdc.Template(p.Table, p.Name+":{id}")
	if err != nil {
		t.Fatal(err)
	}
	mapping, err := cdc.NewMapping(rule)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sides := []struct {
		name string
		src  cdc.Source
		at   *appliedTimes
	}{{name: "direct PostgreSQL (pgsource)"}, {name: "Debezium + Kafka (KafkaSource)"}}
	direct, err := pgsource.New(pgsource.Options{ConnString: p.PG.DSN(), Mapping: mapping, Slot: "dbzbench_direct", Publication: "dbzbench_direct"})
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
		opts := cdc.Options{Source: sides[i].src, Mapping: mapping, Logger: lg,
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
	next.Store(1000)
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
		writers := max(1, rate/125)
		var mu sync.Mutex
		committed := map[int64]time.Time{}
		wctx, stop := context.WithTimeout(ctx, time.Duration(secs)*time.Second)
		var wg sync.WaitGroup
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
					id, at, err := insert(wctx)
					if err != nil {
						continue
					}
					mu.Lock()
					committed[id] = at
					mu.Unlock()
				}
			}()
		}
		start := time.Now()
		wg.Wait()
		stop()
		elapsed := time.Since(start)
		load := loadavg()
		waitFor(t, 3*time.Minute, fmt.Sprintf("every commit of the %d/s run applied by both sources", rate), func() bool {
			for id := range committed {
				for _, s := range sides {
					if _, ok := s.at.applied(p.Name + ":" + strconv.FormatInt(id, 10)); !ok {
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
				a, _ := s.at.applied(p.Name + ":" + strconv.FormatInt(id, 10))
				lags = append(lags, a.Sub(c))
			}
			lines = append(lines, fmt.Sprintf("%s: p50 %s, p99 %s, max %s", s.name, ms(pct(lags, .5)), ms(pct(lags, .99)), ms(pct(lags, 1))))
		}
		t.Logf("%d commits/s asked, %.0f done (%d commits in %v; a writer that falls behind skips ticks), load %s; commit -> applied on Redis and memcached:\n  %s",
			rate, float64(len(committed))/elapsed.Seconds(), len(committed), elapsed.Round(time.Millisecond), load, strings.Join(lines, "\n  "))
	}
}
