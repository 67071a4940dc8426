package kuraprom_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/kuraprom"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/memstore"
)

func TestCollector(t *testing.T) {
	ctx := context.Background()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kura.New[string](st, kura.Options{Name: "names"})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Set(ctx, "a", strings.Repeat("hello ", 200), time.Minute)
	_, _ = c.Get(ctx, "a")
	_, _ = c.Get(ctx, "missing")

	reg := prometheus.NewRegistry()
	reg.MustRegister(kuraprom.NewCollector(c))
	want := `
# HELP kura_lookups_total Keys looked up, by result: hit, miss, or negative (cached as absent).
# TYPE kura_lookups_total counter
kura_lookups_total{cache="names",result="hit"} 1
kura_lookups_total{cache="names",result="miss"} 1
kura_lookups_total{cache="names",result="negative"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kura_lookups_total"); err != nil {
		t.Fatal(err)
	}
	coord := `
# HELP kura_coordination_info 1 for the guarantee this cache gives about loads of a missing key: leases (across processes) or process (per process only).
# TYPE kura_coordination_info gauge
kura_coordination_info{cache="names",coordination="process"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(coord), "kura_coordination_info"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "kura_lease_events_total"); err != nil || n != 5 {
		t.Fatalf("lease event series = %d, %v; want 5", n, err)
	}
	n, err := testutil.GatherAndCount(reg, "kura_operation_duration_seconds")
	if err != nil || n != 7 {
		t.Fatalf("latency series = %d, %v; want one per op", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var raw, stored float64
	for _, mf := range mfs {
		if mf.GetName() != "kura_value_bytes_total" {
			continue
		}
		for _, m := range mf.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["direction"] == "write" && l["stage"] == "raw" {
				raw = m.Counter.GetValue()
			}
			if l["direction"] == "write" && l["stage"] == "stored" {
				stored = m.Counter.GetValue()
			}
		}
	}
	if raw == 0 || stored == 0 || stored >= raw {
		t.Fatalf("bytes written raw %v stored %v: a repetitive 1.2 KB string should compress", raw, stored)
	}
}

// Bytes written are split by the dictionary id of each value: a writer
// rotating from no dictionary to one shows both series.
func TestCollectorDictionaryBytes(t *testing.T) {
	ctx := context.Background()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cd, err := codec.New(codec.Options{Compressor: codec.Zstd(1)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kura.New[string](st, kura.Options{Name: "notes", Codec: cd})
	if err != nil {
		t.Fatal(err)
	}
	v := strings.Repeat("dictionary rotation ", 40)
	_ = c.Set(ctx, "a", v, time.Minute)
	id, err := cd.SetDictionary([]byte(strings.Repeat("dictionary rotation content ", 20)))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Set(ctx, "b", v, time.Minute)
	reg := prometheus.NewRegistry()
	reg.MustRegister(kuraprom.NewCollector(c))
	series := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kura_dictionary_written_bytes_total" {
			continue
		}
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == "dictionary" {
					series[lp.GetValue()] = m.Counter.GetValue()
				}
			}
		}
	}
	s := c.Stats()
	if len(series) != 2 || series["00000000"] != float64(s.BytesWrittenByDictionary[0]) ||
		series[fmt.Sprintf("%08x", id)] != float64(s.BytesWrittenByDictionary[id]) || series["00000000"] == 0 {
		t.Fatalf("series %v, stats %v", series, s.BytesWrittenByDictionary)
	}
}

func ExampleNewCollector() {
	st, _ := memstore.New(memstore.Options{})
	users, _ := kura.New[string](st, kura.Options{Name: "users"})
	reg := prometheus.NewRegistry() // your own registry; nothing global
	reg.MustRegister(kuraprom.NewCollector(users))
	// Output:
}

func TestIndexCollector(t *testing.T) {
	ctx := context.Background()
	st, _ := memstore.New(memstore.Options{})
	defer st.Close()
	c, _ := kura.New[string](st, kura.Options{Name: "items"})
	recs, _ := kura.NewKeyed[int64, string](c, kura.KeyedOptions[int64]{Prefix: "item:"})
	idx, err := kura.NewIndex(recs, kura.IndexOptions[int64, int64, string]{
		Name:    "items_by_user",
		LoadIDs: func(context.Context, int64) ([]int64, error) { return []int64{1, 2, 3}, nil },
		LoadRecords: func(_ context.Context, ids []int64) (map[int64]string, error) {
			return map[int64]string{1: "a", 2: "b"}, nil // 3 is gone: a ghost
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idx.Fetch(ctx, 7); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(kuraprom.NewIndexCollector(idx))
	want := `
# HELP kura_index_list_lookups_total Id-list reads, by result: hit (from the cache) or miss (loaded from the database).
# TYPE kura_index_list_lookups_total counter
kura_index_list_lookups_total{index="items_by_user",result="hit"} 0
kura_index_list_lookups_total{index="items_by_user",result="miss"} 1
# HELP kura_index_records_loaded_total Records loaded from the database through the index (cache misses only).
# TYPE kura_index_records_loaded_total counter
kura_index_records_loaded_total{index="items_by_user"} 2
# HELP kura_index_ghosts_total Ids named by a cached list whose record no longer exists (left out; the list is dropped).
# TYPE kura_index_ghosts_total counter
kura_index_ghosts_total{index="items_by_user"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func TestHealthCollector(t *testing.T) {
	src := fakeHealth{health.Stats{
		Nodes: []health.NodeStats{{
			Addr: "127.0.0.1:6379", State: health.Down, Probes: 7, ProbeFailures: 3, FailFast: 11,
			ProbeLatency:    []uint64{4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
			ProbeLatencySum: 100 * time.Microsecond,
			Transitions:     [4]uint64{0, 1, 1, 0},
		}},
		GutterHits: 2,
	}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(kuraprom.NewHealthCollector("sessions", src))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" || l.GetName() == "to" || l.GetName() == "result" {
					key += "/" + l.GetValue()
				}
			}
			switch {
			case m.Gauge != nil:
				got[key] = m.GetGauge().GetValue()
			case m.Counter != nil:
				got[key] = m.GetCounter().GetValue()
			case m.Histogram != nil:
				got[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	for k, want := range map[string]float64{
		"kura_node_state/down": 1, "kura_node_state/up": 0, "kura_node_probes_total": 7,
		"kura_node_probe_failures_total": 3, "kura_node_fail_fast_total": 11,
		"kura_node_transitions_total/down": 1, "kura_node_probe_duration_seconds": 4,
		"kura_gutter_reads_total/hit": 2,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

type fakeHealth struct{ st health.Stats }

func (f fakeHealth) Stats() health.Stats { return f.st }

// TestSchemaCollector: a value written for another type shows as a
// schema mismatch, not a decode error.
func TestSchemaCollector(t *testing.T) {
	ctx := context.Background()
	st, _ := memstore.New(memstore.Options{})
	defer st.Close()
	type person struct{ Name string }
	type article struct{ Title string }
	w, _ := kura.New[person](st, kura.Options{Name: "old"})
	r, _ := kura.New[article](st, kura.Options{Name: "new"})
	if err := w.Set(ctx, "k", person{Name: "ann"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fetch(ctx, "k", time.Minute, func(context.Context, string) (article, error) { return article{Title: "t"}, nil }); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(kuraprom.NewCollector(r))
	want := `
# HELP kura_decode_errors_total Cached values that failed to decode (counted as misses).
# TYPE kura_decode_errors_total counter
kura_decode_errors_total{cache="new"} 0
# HELP kura_schema_mismatches_total Cached values written for another Go type (a field renamed or retyped) that did not decode (counted as misses).
# TYPE kura_schema_mismatches_total counter
kura_schema_mismatches_total{cache="new"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kura_decode_errors_total", "kura_schema_mismatches_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "kura_schema_kept_total"); err != nil || n != 1 {
		t.Fatalf("kura_schema_kept_total series = %d, %v", n, err)
	}
}
