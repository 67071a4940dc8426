package kuraprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/kuraprom"
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

func ExampleNewCollector() {
	st, _ := memstore.New(memstore.Options{})
	users, _ := kura.New[string](st, kura.Options{Name: "users"})
	reg := prometheus.NewRegistry() // your own registry; nothing global
	reg.MustRegister(kuraprom.NewCollector(users))
	// Output:
}
