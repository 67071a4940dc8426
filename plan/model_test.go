package plan

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

const gib = 1 << 30

// fixCatalog has FIXTURE figures, not real ones: one node of 10 GiB, one
// engine thread, 1 Gbps baseline, $0.50 an hour; ElastiCache-like rules
// (25% reserved memory, 90% CPU ceiling).
func fixCatalog(t testing.TB) *Catalog {
	t.Helper()
	c, err := ParseCatalog(strings.NewReader(`{
	  "date": "2026-11-23", "currency": "USD", "price_region": "fixture",
	  "providers": [{"name": "fix", "reserved_memory_pct": 25, "memory_ceiling": 1, "cpu_ceiling": 0.9}],
	  "nodes": [
	    {"name": "fix-10g", "provider": "fix", "memory_gib": 10, "threads": 1, "baseline_gbps": 1, "burst_gbps": 10, "price_per_hour": 0.5, "date": "2026-11-23", "source": "test fixture, not real"},
	    {"name": "fix-40g", "provider": "fix", "memory_gib": 40, "threads": 4, "baseline_gbps": 4, "price_per_hour": 1.6, "date": "2026-11-23", "source": "test fixture, not real"}
	  ]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func row(t *testing.T, cat *Catalog, in Input, name string) Row {
	t.Helper()
	p, err := New(cat, in)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := p.RowFor(name)
	if !ok {
		t.Fatalf("no row %s", name)
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestEachConstraintBinds checks hand-computed cases in which memory, CPU
// and network bind in turn.
func TestEachConstraintBinds(t *testing.T) {
	cat := fixCatalog(t)
	only := []string{"fix-10g"}

	// Memory: 30 GiB over 10 GiB × (1 − 25%) = 7.5 GiB per node → 4 nodes.
	// Reads 10,000/s × (992 + 8 framing) B × 8 = 80 Mbps, against
	// 4 × 0.8 Gbps → 2.5%. CPU 10,000 over 4 × 90,000 → 2.78%.
	r := row(t, cat, Input{Nodes: only, Workload: Workload{
		DataBytes: 30 * gib, ReadsPerSec: 10000, ReadValueBytes: 992, OpsPerSecPerThread: 100000,
	}}, "fix-10g")
	if r.Binding != Memory || r.Shards != 4 || r.Nodes != 4 {
		t.Fatalf("memory case: %d shards, %s-bound", r.Shards, r.Binding)
	}
	if !near(r.Needs[Memory].PerNode, 7.5*gib) || !near(r.Needs[Network].Utilisation, 0.025) ||
		!near(r.Needs[CPU].Utilisation, 10000.0/360000) || !near(r.MonthlyCost, 4*0.5*730) {
		t.Errorf("memory case figures: %+v cost %v", r.Needs, r.MonthlyCost)
	}

	// CPU: 450,000 reads/s over 100,000 × 90% per node → exactly 5 nodes;
	// network 450,000 × 100 B × 8 = 360 Mbps → one node's worth.
	r = row(t, cat, Input{Nodes: only, Workload: Workload{
		DataBytes: 1 * gib, ReadsPerSec: 450000, ReadValueBytes: 92, OpsPerSecPerThread: 100000,
	}}, "fix-10g")
	if r.Binding != CPU || r.Shards != 5 || r.Needs[CPU].Nodes != 5 || r.Needs[Network].Nodes != 1 {
		t.Fatalf("CPU case: %d shards, %s-bound, needs %+v", r.Shards, r.Binding, r.Needs)
	}

	// Network: 100,000 reads/s × 2,000 B × 8 = 1.6 Gbps over 0.8 Gbps →
	// 2 nodes; CPU 100,000 / 90,000 = 1.11 → 2 as well, but network needs
	// more, so network binds.
	r = row(t, cat, Input{Nodes: only, Workload: Workload{
		DataBytes: 1 * gib, ReadsPerSec: 100000, ReadValueBytes: 1992, OpsPerSecPerThread: 100000,
	}}, "fix-10g")
	if r.Binding != Network || r.Shards != 2 || !near(r.Needs[Network].Demand, 1.6e9) {
		t.Fatalf("network case: %d shards, %s-bound, demand %v", r.Shards, r.Binding, r.Needs[Network].Demand)
	}
	if !near(r.Needs[CPU].Utilisation, 100000.0/180000) {
		t.Errorf("CPU headroom on 2 nodes: %v", r.Needs[CPU].Utilisation)
	}
}

// TestReplicasAndWrites: writes cross the primary's link twice with one
// replica (in from the client, out to the replica), and replicas double
// the nodes to pay for.
func TestReplicasAndWrites(t *testing.T) {
	cat := fixCatalog(t)
	r := row(t, cat, Input{Nodes: []string{"fix-10g"}, Workload: Workload{
		DataBytes: 8 * gib, WritesPerSec: 10000, WriteValueBytes: 992, KeyBytes: 16, Replicas: 1,
	}}, "fix-10g")
	in := 10000.0 * (24 + 16 + 14 + 992)
	out := 10000.0*5 + in
	if !near(r.Needs[Network].Demand, 8*math.Max(in, out)) {
		t.Errorf("network demand %v, want %v", r.Needs[Network].Demand, 8*out)
	}
	if r.Shards != 2 || r.Nodes != 4 || !near(r.MonthlyCost, 4*0.5*730) {
		t.Errorf("8 GiB with one replica: %d shards, %d nodes, cost %v", r.Shards, r.Nodes, r.MonthlyCost)
	}
}

// TestGrowthAndLinkOnly: growth scales data and traffic; a plan with only
// the largest value sizes nothing but still checks every link.
func TestGrowthAndLinkOnly(t *testing.T) {
	cat := fixCatalog(t)
	p, err := New(cat, Input{Workload: Workload{DataBytes: 10 * gib, ReadsPerSec: 1000, WritesPerSec: 100, Growth: 0.3, MaxValueBytes: 1e6, LargeValuesPerSec: 10}})
	if err != nil {
		t.Fatal(err)
	}
	e := p.Effective
	if !near(e.DataBytes, 13*gib) || !near(e.ReadsPerSec, 1300) || !near(e.WritesPerSec, 130) || !near(e.LargePerSec, 13) {
		t.Errorf("growth 30%%: %+v", e)
	}
	p, err = New(cat, Input{Workload: Workload{MaxValueBytes: 1e6}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.Rows {
		if r.Skipped == "" || !strings.Contains(r.Skipped, "no data size given") || r.Largest == nil {
			t.Errorf("%s: skipped %q, largest %+v", r.Node.Name, r.Skipped, r.Largest)
		}
	}
	if r, _ := p.RowFor("fix-10g"); !near(r.Largest.Seconds, 8e-3) || !near(r.Largest.BurstSeconds, 8e-4) {
		t.Errorf("1 MB over 1 Gbps: %+v", r.Largest)
	}
}

// TestThreadsWhatIf: more engine threads raise CPU capacity along the curve.
func TestThreadsWhatIf(t *testing.T) {
	cat := fixCatalog(t)
	w := Workload{ReadsPerSec: 600000, ReadValueBytes: 10, OpsPerSecPerThread: 68877, Scaling: hsetCurve}
	one := row(t, cat, Input{Nodes: []string{"fix-10g"}, Workload: w}, "fix-10g")
	six := row(t, cat, Input{Nodes: []string{"fix-10g"}, Workload: w, WhatIf: WhatIf{Threads: 6}}, "fix-10g")
	if !near(one.Needs[CPU].PerNode, 68877*0.9) || !near(six.Needs[CPU].PerNode, 161774*0.9) {
		t.Fatalf("per-node CPU capacity: 1 thread %v, 6 threads %v", one.Needs[CPU].PerNode, six.Needs[CPU].PerNode)
	}
	if one.Shards != 10 || six.Shards != 5 {
		t.Errorf("600,000 ops/s: %d nodes at 1 thread, %d at 6; want 10 and 5", one.Shards, six.Shards)
	}
	// Interpolated between measured points, flat beyond the last one.
	if f := threadFactor(hsetCurve, 4); !near(f, (113889+0.5*(161774-113889))/68877) {
		t.Errorf("4 threads: %v", f)
	}
	if threadFactor(hsetCurve, 64) != threadFactor(hsetCurve, 6) {
		t.Error("beyond the last point the curve should stay flat")
	}
}

// TestGuardWithDistribution: a value-size guard removes the tail from
// memory and traffic when the value sizes are known.
func TestGuardWithDistribution(t *testing.T) {
	cat := fixCatalog(t)
	w := Workload{
		Keys: 1000, AvgValueBytes: 10900, DataBytes: 1000 * 10900, MaxValueBytes: 1e6,
		ReadsPerSec: 1000, OpsPerSecPerThread: 100000,
		ValueSizes: []SizeBucket{{MaxBytes: 1000, Keys: 990, Bytes: 990 * 1000}, {MaxBytes: 1e6, Keys: 10, Bytes: 10 * 1e6 * 0.99}},
	}
	p, err := New(cat, Input{Workload: w, WhatIf: WhatIf{MaxValueBytes: 100000}})
	if err != nil {
		t.Fatal(err)
	}
	e := p.Effective
	if e.GuardedKeys != 10 || e.MaxValueBytes != 100000 || !near(e.DataBytes, 1000*10900-9.9e6) {
		t.Errorf("guard: %d keys dropped, largest %v, data %v", e.GuardedKeys, e.MaxValueBytes, e.DataBytes)
	}
	if !near(e.ReadsPerSec, 990) {
		t.Errorf("reads served by the cache: %v, want 990 (1%% of keys left it)", e.ReadsPerSec)
	}
	// Without a distribution the guard changes only the largest value.
	w.ValueSizes = nil
	p, _ = New(cat, Input{Workload: w, WhatIf: WhatIf{MaxValueBytes: 100000}})
	if p.Effective.MaxValueBytes != 100000 || !near(p.Effective.DataBytes, 1000*10900) || !hasNote(p, "only changes the largest value") {
		t.Errorf("guard without distribution: %+v %v", p.Effective, p.Notes)
	}
}

func hasNote(p *Plan, s string) bool {
	for _, n := range p.Notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// TestUncheckedConstraints: a missing figure leaves its constraint
// unchecked and says why, never guesses.
func TestUncheckedConstraints(t *testing.T) {
	p, err := New(DefaultCatalog(), Input{Workload: Workload{DataBytes: 40 * gib, ReadsPerSec: 1000, ReadValueBytes: 100}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := p.RowFor("cache.m7g.2xlarge")
	if r.Needs[CPU].Checked || !strings.Contains(r.Needs[CPU].Why, "CPU cost per operation") {
		t.Errorf("CPU without a measurement: %+v", r.Needs[CPU])
	}
	// The shipped catalog prices it: Redis OSS in us-east-1, [AWS-PL].
	if !r.Priced || r.Quote.Source != "AWS-PL" || r.HourlyPrice != 0.629 || r.Quote.Region != "us-east-1" {
		t.Errorf("cache.m7g.2xlarge: priced %v, quote %+v", r.Priced, r.Quote)
	}
	// A capacity tier is sized at an instance size inside its range.
	m2, _ := p.RowFor("memorystore-redis-M2")
	if m2.Skipped != "" || m2.InstanceGiB < 5 || m2.InstanceGiB > 10 {
		t.Errorf("memorystore-redis-M2: %q, %g GB instances", m2.Skipped, m2.InstanceGiB)
	}
	// Only cache.t2.small has a price (the other catalog prices removed
	// for this case): it is never called the cheapest, the unpriced rows
	// are ranked by nodes, and its cost says whose it is.
	one := DefaultCatalog()
	for i := range one.Nodes {
		if one.Nodes[i].Name != "cache.t2.small" {
			one.Nodes[i].Prices = nil
			one.Nodes[i].Unpriced = "removed for this test"
		}
	}
	p, err = New(one, Input{Workload: Workload{DataBytes: 40 * gib, ReadsPerSec: 1000, ReadValueBytes: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Cheapest >= 0 || strings.Contains(strings.ToLower(p.Why), "cheapest") ||
		!strings.Contains(p.Why, "Only cache.t2.small has a price (AWS-PL price data of 2026-10-02 for us-east-1)") ||
		!strings.Contains(p.Why, "nothing") && !strings.Contains(p.Why, "no cost to compare") {
		t.Errorf("one price: cheapest %d, why %q", p.Cheapest, p.Why)
	}
	if !hasNote(p, "unpriced, removed for this test: ") || !hasNote(p, "not ranked on cost") {
		t.Errorf("notes do not say why prices are missing: %v", p.Notes)
	}
	for i := 1; i < len(p.Rows); i++ {
		if a, b := p.Rows[i-1], p.Rows[i]; a.Skipped == "" && b.Skipped == "" && !a.Priced && !b.Priced && a.Nodes > b.Nodes {
			t.Errorf("%s (%d nodes) ranked before %s (%d nodes)", a.Node.Name, a.Nodes, b.Node.Name, b.Nodes)
		}
	}
	// A price the user gives joins the comparison and says it is the user's.
	p, _ = New(DefaultCatalog(), Input{Workload: Workload{DataBytes: 40 * gib}, Prices: map[string]float64{"cache.r7g.2xlarge": 0.01}})
	if r := p.Rows[p.Cheapest]; r.Node.Name != "cache.r7g.2xlarge" || !r.PriceFlag || !strings.Contains(p.Why, "your price, from --price") {
		t.Errorf("--price not used: %s", p.Why)
	}
}

func TestInputErrors(t *testing.T) {
	cat := fixCatalog(t)
	neg := -1.0
	for _, in := range []Input{
		{},
		{Workload: Workload{DataBytes: -1}},
		{Workload: Workload{DataBytes: math.NaN()}},
		{Workload: Workload{ReadsPerSec: math.Inf(1)}},
		{Workload: Workload{DataBytes: 1, Replicas: -1}},
		{Workload: Workload{DataBytes: 1, Growth: 5000}},
		{Workload: Workload{DataBytes: 1}, Rules: Rules{MemoryCeiling: 1.5}},
		{Workload: Workload{DataBytes: 1}, Rules: Rules{ReservedMemoryPct: &neg}},
		{Workload: Workload{DataBytes: 1}, WhatIf: WhatIf{CodecRatio: -0.5}},
		{Workload: Workload{DataBytes: 1}, WhatIf: WhatIf{Threads: 5000}},
		{Workload: Workload{DataBytes: 1}, Nodes: []string{"cache.nope"}},
		{Workload: Workload{DataBytes: 1}, Prices: map[string]float64{"fix-10g": -3}},
		{Workload: Workload{DataBytes: 1, Scaling: &Scaling{Points: []ScalePoint{{Threads: 2, OpsPerSec: 1}, {Threads: 1, OpsPerSec: 2}}}}},
		{Workload: Workload{DataBytes: 1, ValueSizes: []SizeBucket{{MaxBytes: math.Inf(1)}}}},
		// A node count is divided by these: 1e-300 once sized "1 node at
		// 9614 %" by overflowing it.
		{Workload: Workload{DataBytes: 1, ReadsPerSec: 1000, OpsPerSecPerThread: 1e-300}},
		{Workload: Workload{DataBytes: 1, ReadsPerSec: 1000, CPUSecondsPerOp: 1e-300}},
	} {
		if _, err := New(cat, in); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: err = %v, want ErrInput", in, err)
		}
	}
}

// TestRaisingLoadFlipsBinding (property): with the data fixed, raising the
// traffic moves the binding constraint from memory to CPU or network, and
// once it has left memory it never comes back.
func TestRaisingLoadFlipsBinding(t *testing.T) {
	cat := fixCatalog(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		w := Workload{
			DataBytes:          (1 + rng.Float64()*500) * gib,
			ReadsPerSec:        1 + rng.Float64()*100,
			WritesPerSec:       rng.Float64() * 100,
			ReadValueBytes:     1 + rng.Float64()*20000,
			WriteValueBytes:    1 + rng.Float64()*20000,
			OpsPerSecPerThread: 10000 + rng.Float64()*200000,
			Replicas:           rng.IntN(3),
		}
		left := map[string]bool{}
		for m := 1.0; m <= 1<<30; m *= 2 {
			x := w
			x.ReadsPerSec *= m
			x.WritesPerSec *= m
			p, err := New(cat, Input{Workload: x})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Rows {
				if m == 1 && r.Binding != Memory {
					t.Fatalf("case %d: %s starts %s-bound with tiny traffic", i, r.Node.Name, r.Binding)
				}
				if r.Binding != Memory {
					left[r.Node.Name] = true
				} else if left[r.Node.Name] {
					t.Fatalf("case %d: %s went back to memory-bound at ×%g", i, r.Node.Name, m)
				}
			}
		}
		if len(left) != len(cat.Nodes) {
			t.Fatalf("case %d: traffic ×2^30 never flipped the binding constraint for every node type: %v", i, left)
		}
	}
}

// TestSmallerCodecRatioNeverAddsNodes (property): a codec that makes the
// bytes smaller never raises the node count of any node type.
func TestSmallerCodecRatioNeverAddsNodes(t *testing.T) {
	cats := []*Catalog{fixCatalog(t), DefaultCatalog()}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300; i++ {
		keys := int64(1 + rng.IntN(1e8))
		avg := 1 + rng.Float64()*1e5
		w := Workload{
			Keys: keys, AvgValueBytes: avg, KeyBytes: rng.Float64() * 100,
			DataBytes:       float64(keys)*avg*(1+rng.Float64()) + 1,
			MaxValueBytes:   avg * (1 + rng.Float64()*100),
			ReadsPerSec:     rng.Float64() * 1e6,
			WritesPerSec:    rng.Float64() * 1e5,
			CPUSecondsPerOp: rng.Float64() * 1e-4,
			Replicas:        rng.IntN(3),
		}
		if rng.IntN(2) == 0 {
			w.InBytesPerOp, w.OutBytesPerOp = rng.Float64()*1e4, rng.Float64()*1e5
		}
		cat := cats[i%2]
		prev := map[string]int{}
		for _, ratio := range []float64{1, 0.9, 0.7, 0.5, 1.0 / 3, 0.2, 0.05} {
			p, err := New(cat, Input{Workload: w, WhatIf: WhatIf{CodecRatio: ratio}})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range p.Rows {
				if r.Skipped != "" {
					continue
				}
				if n, ok := prev[r.Node.Name]; ok && r.Nodes > n {
					t.Fatalf("case %d: %s needs %d nodes at codec ratio %g, %d at the larger ratio before", i, r.Node.Name, r.Nodes, ratio, n)
				}
				prev[r.Node.Name] = r.Nodes
			}
		}
	}
}

func TestPrice(t *testing.T) {
	p := &Plan{Catalog: &Catalog{Currency: "USD"}}
	for v, want := range map[float64]string{0.034: "$0.034", 0.5: "$0.50", 1.2345: "$1.2345", 3: "$3.00", 1234.5: "$1,234.50"} {
		if got := p.Price(v); got != want {
			t.Errorf("Price(%v) = %q, want %q", v, got, want)
		}
	}
	p.Catalog.Currency = "EUR"
	if got := p.Price(0.5); got != "EUR 0.50" {
		t.Errorf("EUR: %q", got)
	}
}

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]float64{
		"4096": 4096, "1.3MB": 1.3e6, "120GB": 120e9, "512KiB": 512 << 10, "2 GiB": 2 << 30, "1.5k": 1500, "7b": 7, "0": 0,
	} {
		if got, err := ParseBytes(s); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "big", "-1MB", "NaN", "Inf", "1e30", "MB", "1.2.3GB"} {
		if _, err := ParseBytes(s); !errors.Is(err, ErrInput) {
			t.Errorf("ParseBytes(%q): err = %v, want ErrInput", s, err)
		}
	}
	for v, want := range map[float64]string{812: "812 B", 1.3e6: "1.3 MB", 120e9: "120 GB", 5.55e9: "5.55 GB", 999.6: "1 KB"} {
		if got := FormatBytes(v); got != want {
			t.Errorf("FormatBytes(%v) = %q, want %q", v, got, want)
		}
	}
}
