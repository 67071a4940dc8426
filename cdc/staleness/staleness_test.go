package staleness_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/cdc/pgsource"
	"github.com/kuracache/kura/cdc/staleness"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
)

const rows = 40

// fixture is a PostgreSQL table read through a kura view on Redis and on
// memcached (leases on), kept right by cdc over the PostgreSQL source.
type fixture struct {
	pool    *pgxpool.Pool
	views   map[string]*kura.Keyed[int64, string]
	applied atomic.Int64 // batches of transactions (or the reset) cdc applied
	stopCDC func()
}

func (f *fixture) load(view *kura.Keyed[int64, string]) kura.Loader[string] {
	return func(ctx context.Context, key string) (string, error) {
		var id int64
		if _, err := fmt.Sscanf(strings.TrimPrefix(key, "stl:"), "%d", &id); err != nil {
			return "", err
		}
		var name string
		err := f.pool.QueryRow(ctx, "SELECT name FROM items WHERE id = $1", id).Scan(&name)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", kura.ErrNotFound
		}
		return name, err
	}
}

func keys(from, to int) []string {
	var ks []string
	for i := from; i <= to; i++ {
		ks = append(ks, fmt.Sprintf("stl:%d", i))
	}
	return ks
}

func startFixture(t *testing.T) *fixture {
	t.Helper()
	pg, pool := cdctest.StartPostgres(t, nil,
		"CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL)",
		fmt.Sprintf("INSERT INTO items SELECT g, 'v0-' || g FROM generate_series(1, %d) g", rows))
	caches := cdctest.StartCaches(t)
	f := &fixture{pool: pool, views: map[string]*kura.Keyed[int64, string]{}}
	var rule cdc.Rule
	for name, st := range map[string]store.Store{"redis": caches.RS, "memcached": caches.MS} {
		c, err := kura.New[string](st, kura.Options{Name: name, Leases: kura.LeasesRequired, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		v, err := kura.NewKeyed[int64, string](c, kura.KeyedOptions[int64]{Prefix: "stl:"})
		if err != nil {
			t.Fatal(err)
		}
		f.views[name] = v
		if rule, err = cdc.Record("items", "id", v); err != nil {
			t.Fatal(err)
		}
	}
	m, err := cdc.NewMapping(rule)
	if err != nil {
		t.Fatal(err)
	}
	src, err := pgsource.New(pgsource.Options{ConnString: pg.DSN(), Mapping: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cdc.Run(ctx, cdc.Options{Source: src, Mapping: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Targets: []cdc.Target{{Name: "redis", Store: caches.RS}, {Name: "memcached", Store: caches.MS}},
			OnApplied: func(a cdc.Applied) {
				if a.Txns > 0 || len(a.Tables) > 0 { // a transaction or the reset, not a keepalive
					f.applied.Add(1)
				}
			}})
	}()
	f.stopCDC = func() {
		if cancel != nil {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("cdc.Run: %v", err)
			}
			src.Close()
			cancel = nil
		}
	}
	t.Cleanup(f.stopCDC)
	f.waitApplied(t, 0) // the new slot's reset: every mapped key invalidated, before the test fills
	return f
}

// fill reads every row through each view.
func (f *fixture) fill(t *testing.T) {
	t.Helper()
	for _, v := range f.views {
		for id := int64(1); id <= rows; id++ {
			if _, err := v.Fetch(context.Background(), id, func(ctx context.Context, id int64) (string, error) {
				return f.load(v)(ctx, v.Key(id))
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (f *fixture) inspector(t *testing.T, name string, load kura.Loader[string]) *staleness.Inspector[string] {
	t.Helper()
	v := f.views[name]
	if load == nil {
		load = f.load(v)
	}
	in, err := staleness.New(v.Cache(), staleness.Options[string]{
		Keys: func(context.Context, int) ([]string, error) { return keys(1, rows), nil },
		Load: load, Grace: 300 * time.Millisecond, MaxLoadsPerSecond: 2000, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// waitApplied waits until cdc applied a batch after the call.
func (f *fixture) waitApplied(t *testing.T, before int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for f.applied.Load() <= before {
		if time.Now().After(deadline) {
			t.Fatal("cdc applied nothing in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInspector runs on a real PostgreSQL, Redis and memcached under cdc:
// a clean run after plain-SQL updates reports 0 stale; values injected
// behind the database's back (a Set of an old value; rows updated while
// cdc is stopped) are each caught, with their age; a write landing between
// the cache read and the load is a race, not staleness; a failing loader
// (or panicking) is counted, not fatal.
func TestInspector(t *testing.T) {
	f := startFixture(t)
	ctx := context.Background()
	f.fill(t)
	before := f.applied.Load()
	cdctest.Exec(t, f.pool, "UPDATE items SET name = 'v1-' || id WHERE id <= 10")
	f.waitApplied(t, before)

	for _, name := range []string{"redis", "memcached"} {
		t.Run(name+"/clean", func(t *testing.T) {
			in := f.inspector(t, name, nil)
			r, err := in.Check(ctx, keys(1, rows))
			if err != nil {
				t.Fatal(err)
			}
			if r.Stale != 0 || r.Raced != 0 || r.Checked != rows || r.NotCached != 10 || r.Fresh != rows-10 {
				t.Fatalf("clean run: %+v; want 0 stale, 10 not cached (invalidated by cdc), %d fresh", r, rows-10)
			}
			if s := in.Status(); !strings.Contains(s, "0 stale of 30 cached") {
				t.Errorf("status %q", s)
			}
		})
	}

	t.Run("injected", func(t *testing.T) {
		v := f.views["redis"]
		for _, id := range []int64{21, 22, 23} {
			if err := v.Set(ctx, id, "an old value"); err != nil { // a write the database never had
				t.Fatal(err)
			}
		}
		in := f.inspector(t, "redis", nil)
		reg := prometheus.NewRegistry()
		reg.MustRegister(in)
		r, err := in.Check(ctx, keys(1, rows))
		if err != nil {
			t.Fatal(err)
		}
		if r.Stale != 3 || strings.Join(r.StaleKeys, ",") != "stl:21,stl:22,stl:23" || len(r.StaleAges) != 3 {
			t.Fatalf("injected 3 stale values, report %+v", r)
		}
		if r.OldestStale() > 5*time.Second {
			t.Errorf("the injected values are seconds old, reported %v", r.OldestStale())
		}
		if got := testutil.ToFloat64(counterVec(t, reg, "stale")); got != 3 {
			t.Errorf("kura_staleness_checks_total{result=stale} = %v, want 3", got)
		}
		if n, err := testutil.GatherAndCount(reg, "kura_staleness_stale_age_seconds"); err != nil || n != 1 {
			t.Errorf("age histogram: %d series, %v", n, err)
		}
		if s := in.Status(); !strings.Contains(s, "3 stale of 30 cached") || strings.Contains(s, "an old value") {
			t.Errorf("status %q", s)
		}
		if err := v.Invalidate(ctx, 21, 22, 23); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("race", func(t *testing.T) {
		// The loader sees a row changed after the cache read, and the
		// change's invalidation lands within the grace: raced, not stale.
		v := f.views["memcached"]
		load := f.load(v)
		race := func(ctx context.Context, key string) (string, error) {
			if key == "stl:30" {
				before := f.applied.Load()
				cdctest.Exec(t, f.pool, "UPDATE items SET name = 'v2-30' WHERE id = 30")
				f.waitApplied(t, before)
			}
			return load(ctx, key)
		}
		in := f.inspector(t, "memcached", race)
		r, err := in.Check(ctx, keys(25, 35))
		if err != nil {
			t.Fatal(err)
		}
		if r.Stale != 0 || r.Raced != 1 || r.Fresh != 10 {
			t.Fatalf("a change between the read and the load: %+v; want 1 raced, 0 stale, 10 fresh", r)
		}
	})

	t.Run("load errors", func(t *testing.T) {
		n := 0
		in := f.inspector(t, "redis", func(ctx context.Context, key string) (string, error) {
			n++
			return "", errors.New("database down")
		})
		r, err := in.Check(ctx, keys(11, 20))
		if err != nil || r.LoadErrors != 10 || r.Stale != 0 || n != 10 {
			t.Fatalf("failing loader: %+v, %v", r, err)
		}
		in = f.inspector(t, "redis", func(ctx context.Context, key string) (string, error) { panic("a loader bug") })
		if r, err := in.Check(ctx, keys(11, 20)); err != nil || r.LoadErrors != 10 {
			t.Fatalf("panicking loader: %+v, %v", r, err)
		}
	})

	t.Run("without cdc", func(t *testing.T) {
		// The write the cache never heard of: cdc stopped, rows updated
		// and deleted in plain SQL; every view still serves the old value.
		f.stopCDC()
		f.fill(t)
		cdctest.Exec(t, f.pool, "UPDATE items SET name = 'v3-' || id WHERE id BETWEEN 31 AND 35", "DELETE FROM items WHERE id = 36")
		for _, name := range []string{"redis", "memcached"} {
			in := f.inspector(t, name, nil)
			r, err := in.Check(ctx, keys(1, rows))
			if err != nil {
				t.Fatal(err)
			}
			if r.Stale != 6 || r.Fresh != rows-6 {
				t.Errorf("%s: 6 rows written behind the cache's back: %+v", name, r)
			}
		}
	})
}

func counterVec(t *testing.T, reg *prometheus.Registry, result string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kura_staleness_checks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
					c.Add(m.GetCounter().GetValue())
					return c
				}
			}
		}
	}
	t.Fatalf("no kura_staleness_checks_total{result=%q}", result)
	return nil
}

// TestOptions: bad options are errors that name the field; the defaults
// are bounded.
func TestOptions(t *testing.T) {
	c, err := kura.New[string](nilStore{}, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ok := staleness.Options[string]{Keys: func(context.Context, int) ([]string, error) { return nil, nil },
		Load: func(context.Context, string) (string, error) { return "", nil }}
	for _, tc := range []struct {
		mod  func(*staleness.Options[string])
		want string
	}{
		{func(o *staleness.Options[string]) { o.Keys = nil }, "Keys"},
		{func(o *staleness.Options[string]) { o.Load = nil }, "Load"},
		{func(o *staleness.Options[string]) { o.SampleSize = 1_000_000_000 }, "SampleSize"},
		{func(o *staleness.Options[string]) { o.Every = time.Nanosecond }, "Every"},
		{func(o *staleness.Options[string]) { o.Grace = -1 }, "Grace"},
		{func(o *staleness.Options[string]) { o.MaxLoadsPerSecond = math.NaN() }, "MaxLoadsPerSecond"},
	} {
		o := ok
		tc.mod(&o)
		if _, err := staleness.New(c, o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %s, got %v", tc.want, err)
		}
	}
	if _, err := staleness.New[string](nil, ok); err == nil {
		t.Error("a nil Cache was accepted")
	}
	in, err := staleness.New(c, ok)
	if err != nil {
		t.Fatal(err)
	}
	// A round picks keys; more than SampleSize are cut to it.
	r, err := in.Check(context.Background(), keys(1, 2*staleness.DefaultSampleSize))
	if err != nil || r.Checked != staleness.DefaultSampleSize || r.NotCached != r.Checked {
		t.Errorf("check: %+v, %v", r, err)
	}
}

// TestTinyRatePaces: a MaxLoadsPerSecond so small that the pause between
// two loads overflows a Duration still paces them (the conversion made
// the pause negative, and a round loaded every key at once).
func TestTinyRatePaces(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kura.New[string](st, kura.Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if err := c.Set(ctx, k, "v", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	var loads atomic.Int64
	in, err := staleness.New(c, staleness.Options[string]{
		Keys:              func(context.Context, int) ([]string, error) { return nil, nil },
		Load:              func(context.Context, string) (string, error) { loads.Add(1); return "v", nil },
		MaxLoadsPerSecond: 1e-12,
	})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = in.Check(cctx, []string{"a", "b", "c"})
	if !errors.Is(err, context.DeadlineExceeded) || loads.Load() != 1 {
		t.Fatalf("at 1e-12 loads a second a round made %d loads in 200ms (err %v), want 1 and its context's end", loads.Load(), err)
	}
}

// nilStore holds nothing.
type nilStore struct{}

func (nilStore) Get(context.Context, string) ([]byte, error)              { return nil, store.ErrNotFound }
func (nilStore) Set(context.Context, string, []byte, time.Duration) error { return nil }
func (nilStore) Delete(context.Context, string) error                     { return nil }
func (nilStore) Close() error                                             { return nil }

// TestPanickingKeysFailsTheRound: a Keys that panics fails its round with
// an error and a counted round error, as one that returns an error does.
func TestPanickingKeysFailsTheRound(t *testing.T) {
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kura.New[string](st, kura.Options{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	in, err := staleness.New(c, staleness.Options[string]{
		Keys: func(context.Context, int) ([]string, error) { panic("keys") },
		Load: func(context.Context, string) (string, error) { return "v", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Round(context.Background()); err == nil {
		t.Fatal("a round whose Keys panicked returned no error")
	}
	if n := in.Stats().RoundErrors; n != 1 {
		t.Errorf("round errors %d, want 1", n)
	}
}
