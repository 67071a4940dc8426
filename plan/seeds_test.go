package plan

import (
	"math"
	"strings"
	"testing"
)

// The three field reports' sizing decisions, reproduced from their own
// numbers. Where a report does not give a number the test needs, the test
// says so and labels the value it uses.

// Memorystore tiers measured by the field report (HSET, redis-benchmark-go,
// 1,024 clients): 68,877 rps at 1 thread (M2), 113,889 at 2 (M3), 161,774
// at 6 (M4).
var hsetCurve = &Scaling{Name: "HSET on Memorystore M2/M3/M4", Points: []ScalePoint{
	{Threads: 1, OpsPerSec: 68877}, {Threads: 2, OpsPerSec: 113889}, {Threads: 6, OpsPerSec: 161774},
}}

// tiersFixture is a Memorystore-like catalog with FIXTURE PRICES, not real
// ones: the report's saving came from the price per GB falling as the
// capacity tier rises, so the fixture's per-GB price falls with the tier.
// Capacities are fixture sizes inside each tier (M4's 40 GB is four M2s).
func tiersFixture(t *testing.T) *Catalog {
	t.Helper()
	c, err := ParseCatalog(strings.NewReader(`{
	  "date": "2026-11-23", "currency": "USD", "price_region": "fixture",
	  "providers": [{"name": "memorystore-fixture", "reserved_memory_pct": 0, "memory_ceiling": 0.5, "cpu_ceiling": 0.9}],
	  "nodes": [
	    {"name": "fixture-M2", "provider": "memorystore-fixture", "memory_gib": 10, "threads": 1, "price_per_gb_hour": 0.010, "date": "2026-11-23", "source": "test fixture: FIXTURE PRICE, not real"},
	    {"name": "fixture-M3", "provider": "memorystore-fixture", "memory_gib": 20, "threads": 2, "price_per_gb_hour": 0.0085, "date": "2026-11-23", "source": "test fixture: FIXTURE PRICE, not real"},
	    {"name": "fixture-M4", "provider": "memorystore-fixture", "memory_gib": 40, "threads": 6, "price_per_gb_hour": 0.007, "date": "2026-11-23", "source": "test fixture: FIXTURE PRICE, not real"}
	  ]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFieldReportMemorystoreTiers: going from 24 instances to 6 puts 4×
// the load on each node, but 6 threads give 2.35× the throughput of one,
// so CPU per node rises only 4 / 2.35 = 1.7×; the workload stays
// memory-bound at every traffic level, and fewer, bigger instances cost
// less because the price per GB falls with the tier.
func TestFieldReportMemorystoreTiers(t *testing.T) {
	cat := tiersFixture(t)
	// The data fills 24 M2 instances at the 50% maintenance ceiling the
	// report planned with: 24 × 10 GiB × 0.5.
	const gib = 1 << 30
	in := Input{Workload: Workload{
		DataBytes:          24 * 10 * gib * 0.5,
		ReadsPerSec:        150000, // peak: not in the report, labelled test value
		WritesPerSec:       150000,
		OpsPerSecPerThread: 68877,
		Scaling:            hsetCurve,
	}}
	p, err := New(cat, in)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := p.RowFor("fixture-M2")
	m4, _ := p.RowFor("fixture-M4")
	if m2.Shards != 24 || m4.Shards != 6 {
		t.Fatalf("instances: M2 %d, M4 %d; want 24 and 6", m2.Shards, m4.Shards)
	}
	if f := threadFactor(hsetCurve, 2); math.Abs(f-1.65) > 0.01 {
		t.Errorf("1 → 2 threads: %.3f× throughput, the report measured 1.65×", f)
	}
	if f := threadFactor(hsetCurve, 6); math.Abs(f-2.35) > 0.01 {
		t.Errorf("1 → 6 threads: %.3f× throughput, the report measured 2.35×", f)
	}
	// 4× the load per node over 2.35× the throughput.
	cpuRise := m4.Needs[CPU].Utilisation / m2.Needs[CPU].Utilisation
	if math.Abs(cpuRise-4/2.35) > 0.01 || math.Abs(cpuRise-1.7) > 0.01 {
		t.Errorf("CPU per node rises %.3f×, want 4 / 2.35 = 1.70×", cpuRise)
	}
	if m4.Binding != Memory || m2.Binding != Memory {
		t.Errorf("binding: M2 %s, M4 %s; the report's workload is memory-bound", m2.Binding, m4.Binding)
	}
	// Memory-bound at every traffic level the report charted (users up to
	// twice today's peak: labelled test range).
	pts, err := Traffic(cat, in, []float64{0.125, 0.25, 0.5, 1, 1.5, 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range pts {
		for _, r := range pt.Plan.Rows {
			if r.Binding != Memory {
				t.Errorf("at %.0f ops/s %s is %s-bound; want memory-bound at every level", pt.Ops, r.Node.Name, r.Binding)
			}
		}
	}
	// Fewer, bigger instances are cheaper: same GB in total, lower price per GB.
	if p.Rows[p.Cheapest].Node.Name != "fixture-M4" {
		t.Errorf("cheapest is %s, want fixture-M4 (lowest price per GB)", p.Rows[p.Cheapest].Node.Name)
	}
	saving := 1 - m4.MonthlyCost/m2.MonthlyCost
	if math.Abs(saving-0.30) > 0.001 {
		t.Errorf("6 × M4 saves %.1f%% over 24 × M2; with the fixture's per-GB prices want 30%%", 100*saving)
	}
	if !strings.Contains(p.Why, "Cheapest of the 3 priced node types: fixture-M4, 6 nodes") || !strings.Contains(p.Why, "memory-bound") {
		t.Errorf("why: %s", p.Why)
	}
}

// TestFieldReportCodecDownsize: after a codec change network bytes fell to
// a third, the peak about 3.7 Gbps lower, and the node went one size down,
// cache.m7g.4xlarge → cache.m7g.2xlarge. A peak P with P − P/3 = 3.7 Gbps
// is 5.55 Gbps before and 1.85 Gbps after.
func TestFieldReportCodecDownsize(t *testing.T) {
	cat := DefaultCatalog()
	const gobBytes = 13441 // the report's gob-encoded value size
	peak := 3.7e9 * 3 / 2  // bits/s before the change
	reads := peak / 8 / (gobBytes + respReplyBytes)
	in := Input{
		Workload: Workload{ReadsPerSec: reads, ReadValueBytes: gobBytes},
		Nodes:    []string{"cache.m7g.2xlarge", "cache.m7g.4xlarge"},
	}
	smallestSingle := func(in Input) (string, float64) {
		t.Helper()
		p, err := New(cat, in)
		if err != nil {
			t.Fatal(err)
		}
		best, mem := "", math.Inf(1)
		for _, r := range p.Rows {
			if r.Shards == 1 && r.Node.MemoryGiB < mem {
				best, mem = r.Node.Name, r.Node.MemoryGiB
			}
			if r.Binding != Network {
				t.Errorf("%s is %s-bound; this workload is bound by network bytes", r.Node.Name, r.Binding)
			}
		}
		return best, p.Effective.OutBitsPerSec
	}
	before, bitsBefore := smallestSingle(in)
	in.WhatIf.CodecRatio = 1.0 / 3
	after, bitsAfter := smallestSingle(in)
	if before != "cache.m7g.4xlarge" || after != "cache.m7g.2xlarge" {
		t.Errorf("one node carries the peak: before %s, after %s; want cache.m7g.4xlarge then cache.m7g.2xlarge", before, after)
	}
	if drop := (bitsBefore - bitsAfter) / 1e9; math.Abs(drop-3.7) > 0.05 {
		t.Errorf("peak fell by %.2f Gbps, the report saw about 3.7", drop)
	}
}

// TestFieldReportLargeValueLink: a 1.3 MB value on a cache.t2.small
// (0.128 Gbps baseline) takes about 81 ms on the wire, so about a dozen of
// them a second saturate the link and queued SETs wait for seconds; a node
// type with more baseline network carries the same load.
func TestFieldReportLargeValueLink(t *testing.T) {
	cat := DefaultCatalog()
	// The report does not say how many SETs a second carried the value;
	// 15 a second is a labelled test value just above saturation.
	const perSec = 15
	in := Input{Workload: Workload{
		MaxValueBytes: 1.3e6, WritesPerSec: perSec, WriteValueBytes: 1.3e6, LargeValuesPerSec: perSec,
	}}
	p, err := New(cat, in)
	if err != nil {
		t.Fatal(err)
	}
	t2, _ := p.RowFor("cache.t2.small")
	lv := t2.Largest
	if lv == nil {
		t.Fatal("no largest-value check for cache.t2.small")
	}
	if ms := lv.Seconds * 1000; math.Abs(ms-81.25) > 0.01 {
		t.Errorf("one 1.3 MB transfer at 0.128 Gbps: %.2f ms, want 81.25", ms)
	}
	if n := lv.PerSecToSaturate; n < 11 || n > 13 {
		t.Errorf("%.1f transfers a second saturate the link, want about a dozen", n)
	}
	if lv.Utilisation <= 1 {
		t.Fatalf("15 a second should overload the link, utilisation %.2f", lv.Utilisation)
	}
	// The queue grows by (utilisation − 1) seconds each second: after a
	// minute at this rate the last SET waits for seconds.
	if wait := 60 * (lv.Utilisation - 1); wait < 2 {
		t.Errorf("after 60 s the queue holds %.1f s; want seconds", wait)
	}
	if t2.Binding != Network || t2.Shards < 2 {
		t.Errorf("cache.t2.small: %d node(s), %s-bound; want network-bound, more than one", t2.Shards, t2.Binding)
	}
	carried := 0
	for _, r := range p.Rows {
		if r.Largest == nil || r.Node.BaselineGbps <= 0.128 {
			continue
		}
		if r.Largest.Utilisation < 1 && r.Shards == 1 {
			carried++
		}
	}
	if carried == 0 {
		t.Error("no node type with more baseline network carries the load on one node")
	}
	if r, _ := p.RowFor("cache.m7g.large"); r.Shards != 1 || r.Largest.Utilisation >= 1 {
		t.Errorf("cache.m7g.large (0.937 Gbps): %d node(s), link %.0f%% busy; want one node under 100%%", r.Shards, 100*r.Largest.Utilisation)
	}
}

// TestFieldReportResizeCompare: the report's question as kura plan asks
// it, "24 of these or 6 of those", on the catalog as shipped (Memorystore
// M2 with 1 thread, M4 with 6, the report's HSET curve): 4× the load per
// instance over 2.35× the throughput is 1.7× the CPU; from a measured CPU
// share today, whether the 6 threads absorb it.
func TestFieldReportResizeCompare(t *testing.T) {
	cat := DefaultCatalog()
	from, to := Fleet{Node: "memorystore-redis-M2", Count: 24}, Fleet{Node: "memorystore-redis-M4", Count: 6}
	c, err := Compare(cat, CompareInput{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	if c.LoadPerNode != 4 || math.Abs(c.Throughput-2.35) > 0.005 || math.Abs(c.CPUPerNode-1.70) > 0.005 ||
		math.Abs(c.CPUPerNode-c.LoadPerNode/c.Throughput) > 1e-12 {
		t.Errorf("load %.3f×, throughput %.3f×, CPU %.3f×; the report: 4× / 2.35× = 1.7×", c.LoadPerNode, c.Throughput, c.CPUPerNode)
	}
	if c.Known {
		t.Errorf("no traffic and no CPU today, yet the comparison claims to know: %s", c.Why)
	}
	for _, tc := range []struct {
		now     float64
		absorbs bool
	}{{0.5, true}, {0.52, true}, {0.53, false}, {0.6, false}} { // 0.53 × 1.703 = 0.903: just over the 90% ceiling
		c, err := Compare(cat, CompareInput{From: from, To: to, FromCPU: tc.now})
		if err != nil {
			t.Fatal(err)
		}
		if !c.Known || c.Absorbs != tc.absorbs || math.Abs(c.To.CPU-tc.now*c.CPUPerNode) > 1e-12 {
			t.Errorf("CPU %.0f%% today: %+v; want absorbed %v", 100*tc.now, c, tc.absorbs)
		}
	}
	// With the traffic and the per-thread throughput (the fixture's
	// memory sizes): per-instance CPU computed, memory per instance 4×.
	fx := tiersFixture(t)
	in := CompareInput{Input: Input{Workload: Workload{DataBytes: 24 * 10 * (1 << 30) * 0.5, ReadsPerSec: 150000, WritesPerSec: 150000,
		OpsPerSecPerThread: 68877, Scaling: hsetCurve}}, From: Fleet{Node: "fixture-M2", Count: 24}, To: Fleet{Node: "fixture-M4", Count: 6}}
	c, err = Compare(fx, in)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(c.To.CPU/c.From.CPU-c.CPUPerNode) > 1e-9 || math.Abs(c.To.Memory/c.From.Memory-4) > 1e-9 {
		t.Errorf("CPU %.3f → %.3f, memory %.0f → %.0f per instance", c.From.CPU, c.To.CPU, c.From.Memory, c.To.Memory)
	}
	if !c.Absorbs || !c.Fits[Memory] || math.Abs(c.To.Use[Memory]-1) > 1e-9 {
		t.Errorf("6 × fixture-M4 should hold the data at its ceiling and absorb the CPU: %s", c.Why)
	}
	if _, err := Compare(cat, CompareInput{From: from, To: Fleet{Node: "nope", Count: 6}}); err == nil {
		t.Error("an unknown node type was accepted")
	}
	if _, err := Compare(cat, CompareInput{From: from, To: to, FromCPU: 2}); err == nil {
		t.Error("a CPU share of 200% was accepted")
	}
}

// TestFieldReportsPriced: both resizes with the catalog as shipped. Fewer,
// bigger Memorystore instances at the same total memory cost 30 to 35%
// less (Standard M2 $0.054, M4 $0.035 per GB-hour: -35%) while each
// instance's CPU rises 1.7× and memory binds; after the codec, the
// smaller ElastiCache node's baseline holds the peak and the step down
// halves the bill.
func TestFieldReportsPriced(t *testing.T) {
	cat := DefaultCatalog()
	c, err := Compare(cat, CompareInput{Input: Input{Workload: Workload{DataBytes: 120 * gib, Replicas: 1}, Rules: Rules{MemoryCeiling: 0.5}},
		From: Fleet{Node: "memorystore-redis-M2", Count: 24}, To: Fleet{Node: "memorystore-redis-M4", Count: 6}, FromCPU: 0.4})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Priced || c.CostPct > -0.30 || c.CostPct < -0.355 || math.Abs(c.CPUPerNode-1.70) > 0.005 || c.To.Binding != Memory ||
		c.From.InstanceGiB != 10 || c.To.InstanceGiB != 40 || c.To.Row.Quote.ServiceTier != "standard" {
		t.Errorf("24 × M2 → 6 × M4: priced %v, %.1f%%, CPU %.2f×, %s-bound, %g → %g GB", c.Priced, 100*c.CostPct, c.CPUPerNode, c.To.Binding, c.From.InstanceGiB, c.To.InstanceGiB)
	}
	// Basic (no replica) saves less: $0.027 → $0.019 per GB-hour.
	c, _ = Compare(cat, CompareInput{Input: Input{Workload: Workload{DataBytes: 120 * gib}, Rules: Rules{MemoryCeiling: 0.5}},
		From: Fleet{Node: "M2", Count: 24}, To: Fleet{Node: "M4", Count: 6}})
	if c.To.Row.Quote.ServiceTier != "basic" || math.Abs(c.CostPct-(0.019/0.027-1)) > 1e-9 {
		t.Errorf("Basic: %s, %.2f%%", c.To.Row.Quote.ServiceTier, 100*c.CostPct)
	}
	p, err := New(cat, Input{Workload: Workload{ReadsPerSec: 51584, ReadValueBytes: 13441},
		Nodes: []string{"cache.m7g.2xlarge", "cache.m7g.4xlarge"}, WhatIf: WhatIf{CodecRatio: 0.3333}})
	if err != nil {
		t.Fatal(err)
	}
	w, ok := p.WhatIf()
	if !ok || w.Before.Node.Name != "cache.m7g.4xlarge" || w.After.Node.Name != "cache.m7g.2xlarge" || w.After.Nodes != 1 ||
		math.Abs(w.Delta-(0.629-1.257)*730) > 1e-9 {
		t.Errorf("step down: %+v", w)
	}
	if !strings.Contains(p.Why, "its 3.75 Gbps baseline now holds the 1.85 Gbps peak") {
		t.Errorf("why: %s", p.Why)
	}
}
