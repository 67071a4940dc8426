package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/kuracache/kura/loadgen"
)

func TestDefaultCatalog(t *testing.T) {
	c := DefaultCatalog()
	if c.Date == "" || c.Currency != "USD" || c.PriceRegion == "" {
		t.Fatalf("catalog header: %+v", c)
	}
	for _, n := range c.Nodes {
		if n.Date == "" || !strings.Contains(n.Source, "http") {
			t.Errorf("%s: every row names its date and a public source, got %q %q", n.Name, n.Date, n.Source)
		}
	}
	// The field reports' node types are there with the figures they used.
	for name, gbps := range map[string]float64{"cache.t2.small": 0.128, "cache.m7g.2xlarge": 3.75, "cache.m7g.4xlarge": 7.5} {
		n, ok := c.Node(name)
		if !ok || n.BaselineGbps != gbps {
			t.Errorf("%s: baseline %v, want %v", name, n.BaselineGbps, gbps)
		}
	}
	// The stored bytes parse to the same catalog.
	c2, err := ParseCatalog(bytes.NewReader(DefaultCatalogJSON()))
	if err != nil || len(c2.Nodes) != len(c.Nodes) {
		t.Fatalf("DefaultCatalogJSON: %v", err)
	}
	// DefaultCatalog returns a copy: changing it does not change the next.
	c.Nodes[0].PricePerHour = 99
	if DefaultCatalog().Nodes[0].PricePerHour == 99 {
		t.Error("DefaultCatalog shares state between calls")
	}
}

const validCatalog = `{
  "date": "2026-11-23", "currency": "USD", "price_region": "test",
  "providers": [{"name": "p", "reserved_memory_pct": 25, "memory_ceiling": 1, "cpu_ceiling": 0.9}],
  "nodes": [
    {"name": "a", "provider": "p", "memory_gib": 1, "baseline_gbps": 1, "date": "2026-11-23", "source": "x"},
    {"name": "b", "provider": "p", "memory_gib": 2, "baseline_gbps": 2, "burst_gbps": 4, "date": "2026-11-23", "source": "x"}
  ],
  "scaling": {"name": "s", "points": [{"threads": 1, "ops_per_sec": 10}, {"threads": 2, "ops_per_sec": 15}]}
}`

// TestCatalogErrorsNameRowAndField: a bad user catalog is refused with an
// error that says which row and which field.
func TestCatalogErrorsNameRowAndField(t *testing.T) {
	if _, err := ParseCatalog(strings.NewReader(validCatalog)); err != nil {
		t.Fatalf("valid catalog refused: %v", err)
	}
	cases := []struct {
		old, new string
		want     []string
	}{
		{`"baseline_gbps": 2,`, `"baseline_gbps": -2,`, []string{`nodes row 2 ("b")`, `field "baseline_gbps"`, "negative"}},
		{`"baseline_gbps": 2,`, `"baseline_gpbs": 2,`, []string{`nodes row 2 ("b")`, `field "baseline_gpbs"`, "unknown field"}},
		{`"memory_gib": 2,`, `"memory_gib": "lots",`, []string{`nodes row 2 ("b")`, `field "memory_gib"`, "number"}},
		{`"name": "b", "provider": "p"`, `"name": "b", "provider": "q"`, []string{`nodes row 2`, `field "provider"`, `"q" is not in providers`}},
		{`"name": "b"`, `"name": "a"`, []string{`nodes row 2 ("a")`, `field "name"`, "twice"}},
		{`"burst_gbps": 4`, `"burst_gbps": 1`, []string{`nodes row 2`, `field "burst_gbps"`, "below baseline"}},
		{`"memory_gib": 1, "baseline_gbps": 1, "date": "2026-11-23", "source": "x"`, `"memory_gib": 1, "baseline_gbps": 1, "date": "2026-11-23", "source": ""`, []string{`nodes row 1 ("a")`, `field "source"`}},
		{`"memory_gib": 1, "baseline_gbps": 1, "date": "2026-11-23"`, `"memory_gib": 1, "baseline_gbps": 1, "date": "23/11/2026"`, []string{`nodes row 1`, `field "date"`, "YYYY-MM-DD"}},
		{`"memory_gib": 1,`, `"memory_gib": 1, "price_per_hour": 1, "price_per_gb_hour": 1,`, []string{`nodes row 1`, `field "price_per_gb_hour"`, "not both"}},
		{`"memory_gib": 1,`, `"memory_gib": 1e9,`, []string{`nodes row 1`, `field "memory_gib"`, "unit"}},
		{`"memory_gib": 1,`, `"memory_gib": 1, "prices": [{"region": "test", "per_hour": -1, "source": "s", "date": "2026-11-23"}],`, []string{`nodes row 1`, `field "prices"`, "positive"}},
		{`"memory_gib": 1,`, `"memory_gib": 1, "prices": [{"region": "test", "per_hour": 1, "source": "", "date": "2026-11-23"}],`, []string{`nodes row 1`, `field "prices"`, "source missing"}},
		{`"memory_gib": 1,`, `"memory_gib": 1, "prices": [{"region": "test", "per_hour": 1, "per_gb_hour": 1, "source": "s", "date": "2026-11-23"}],`, []string{`field "prices"`, "one of them"}},
		{`"memory_gib": 1,`, `"min_gib": 5, "max_gib": 1,`, []string{`nodes row 1`, `field "max_gib"`, "min first"}},
		{`"memory_gib": 1,`, `"memory_gib": 1, "min_gib": 1, "max_gib": 5,`, []string{`field "memory_gib"`, "not both"}},
		{`"memory_gib": 1,`, `"memory_gib": 1e-300,`, []string{`nodes row 1`, `field "memory_gib"`, "below"}},
		{`"baseline_gbps": 2,`, `"baseline_gbps": 1e-300,`, []string{`nodes row 2`, `field "baseline_gbps"`, "below"}},
		{`"memory_gib": 1,`, `"memory_gib": 1, "vcpus": -4,`, []string{`nodes row 1`, `field "vcpus"`}},
		{`"memory_gib": 1,`, `"memory_gib": 1, "reserved_memory_pct": 100,`, []string{`nodes row 1`, `field "reserved_memory_pct"`}},
		{`"cpu_ceiling": 0.9`, `"cpu_ceiling": 90`, []string{`providers row 1 ("p")`, `field "cpu_ceiling"`, "fraction"}},
		{`"reserved_memory_pct": 25,`, `"reserved_memory_pct": 25, "colour": "red",`, []string{`providers row 1`, `field "colour"`}},
		{`{"threads": 2, "ops_per_sec": 15}`, `{"threads": 1, "ops_per_sec": 15}`, []string{`scaling`, `field "threads"`, "rise"}},
		{`"ops_per_sec": 10`, `"ops_per_sec": 0`, []string{`scaling`, `field "ops_per_sec"`}},
		{`"date": "2026-11-23", "currency"`, `"date": "", "currency"`, []string{`field "date"`, "missing"}},
		{`"currency": "USD",`, `"currency": "USD", "extra": 1,`, []string{`field "extra"`}},
		{`"nodes": [`, `"nodes": 7, "x": [`, []string{`field "nodes"`}},
	}
	for _, c := range cases {
		if !strings.Contains(validCatalog, c.old) {
			t.Fatalf("test case does not apply: %q", c.old)
		}
		bad := strings.Replace(validCatalog, c.old, c.new, 1)
		_, err := ParseCatalog(strings.NewReader(bad))
		if err == nil {
			t.Errorf("%s → %s: accepted", c.old, c.new)
			continue
		}
		if !errors.Is(err, ErrCatalog) {
			t.Errorf("%v: not ErrCatalog", err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s → %s: error %q lacks %q", c.old, c.new, err, w)
			}
		}
	}
	for _, junk := range []string{"", "[]", "{", `{"date":"2026-11-23"} trailing`, strings.Repeat(" ", maxCatalogBytes+1)} {
		if _, err := ParseCatalog(strings.NewReader(junk)); err == nil {
			t.Errorf("%.30q accepted", junk)
		}
	}
}

// TestReadBench reads what kura bench --json prints (loadgen's own types,
// so a renamed JSON field breaks this test and not users).
func TestReadBench(t *testing.T) {
	res := loadgen.Result{
		Target: "redis://127.0.0.1:6379", Command: "get", Ops: 10000, OpsPerSec: 50000,
		Server: &loadgen.ServerReport{CPUSeconds: 0.05, CPUSecondsPer1kOps: 0.005, CPUCores: 0.25, NetInBytes: 300000, NetOutBytes: 1100000},
	}
	b, _ := json.Marshal(&res)
	m, err := ReadBench(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !near(m.CPUSecondsPerOp, 5e-6) || !near(m.InBytesPerOp, 30) || !near(m.OutBytesPerOp, 110) || m.Command != "get" {
		t.Errorf("measured %+v", m)
	}
	var w Workload
	m.Apply(&w)
	if w.CPUSecondsPerOp != m.CPUSecondsPerOp || w.OutBytesPerOp != 110 {
		t.Errorf("Apply: %+v", w)
	}
	// What the user set wins.
	w = Workload{OpsPerSecPerThread: 1000, ReadValueBytes: 5}
	m.Apply(&w)
	if w.CPUSecondsPerOp != 0 || w.OutBytesPerOp != 0 {
		t.Errorf("Apply overrode the user's figures: %+v", w)
	}

	sweep := loadgen.SweepResult{Param: loadgen.SweepIOThreads}
	for _, s := range []struct {
		v   string
		ops float64
	}{{"4", 90000}, {"1", 50000}, {"2", 80000}} {
		r := res
		r.OpsPerSec = s.ops
		sweep.Steps = append(sweep.Steps, loadgen.Step{Value: s.v, Result: &r})
	}
	b, _ = json.Marshal(&sweep)
	m, err = ReadBench(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if m.Scaling == nil || len(m.Scaling.Points) != 3 || m.Scaling.Points[0].Threads != 1 || !near(threadFactor(m.Scaling, 4), 1.8) {
		t.Errorf("sweep curve: %+v", m.Scaling)
	}

	noServer := res
	noServer.Server = nil
	pipeSweep := sweep
	pipeSweep.Param = loadgen.SweepPipeline
	for _, v := range []any{noServer, loadgen.Result{Ops: 0, Server: res.Server}, pipeSweep, "text", 12} {
		b, _ := json.Marshal(v)
		if _, err := ReadBench(bytes.NewReader(b)); !errors.Is(err, ErrInput) {
			t.Errorf("%s: err = %v, want ErrInput", b, err)
		}
	}
}

// TestReadScan reads a report in the documented kura.scan/v1 form
// (docs/scan.md's example, extended to three patterns).
func TestReadScan(t *testing.T) {
	f, err := os.Open("testdata/scan-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ReadScan(f)
	if err != nil {
		t.Fatal(err)
	}
	if s.Keys != 100000 || s.MemoryBytes != 60200000 || s.MaxValueBytes != 1.3e6 || !s.Complete || len(s.ValueSizes) != 3 {
		t.Fatalf("scan: %+v", s)
	}
	if last := s.ValueSizes[2]; last.MaxBytes != 1.3e6 || last.Keys != 10 {
		t.Errorf("open-ended bucket: %+v", last)
	}
	// s2: 9 MB + 16.8 MB stored, the hash pattern 1.3 MB as it is, over
	// 48.1 MB; zstd did not run on sess:*, which counts as it is.
	if !near(s.CodecRatios["s2"], (9e6+16.8e6+1.3e6)/48.1e6) || !near(s.CodecRatios["zstd"], (7e6+16.8e6+1.3e6)/48.1e6) {
		t.Errorf("codec ratios %v", s.CodecRatios)
	}
	w := Workload{Keys: 5}
	s.Apply(&w)
	if w.DataBytes != 60200000 || w.Keys != 5 || !near(w.AvgValueBytes, 481) || w.MaxValueBytes != 1.3e6 {
		t.Errorf("Apply: %+v", w)
	}
	for _, bad := range []string{`{}`, `{"schema":"kura.scan/v2"}`, `{"schema":"kura.scan/v1","keys":-1}`,
		`{"schema":"kura.scan/v1","histogram":[{"le":-5,"keys":1}]}`, `[`} {
		if _, err := ReadScan(strings.NewReader(bad)); !errors.Is(err, ErrInput) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

// TestReadCodecs reads a report in the kura.codecs/v1 form (FIXTURE sizes).
func TestReadCodecs(t *testing.T) {
	f, err := os.Open("testdata/codecs-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := ReadCodecs(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.Recommended != "zstd-3+dict-16KiB" || len(c.Bytes) != 3 {
		t.Fatalf("codecs: %+v", c)
	}
	if r, err := c.Ratio("json", c.Recommended); err != nil || !near(r, 3894600.0/11684000) {
		t.Errorf("json → recommended: %v %v", r, err)
	}
	if r, err := c.Ratio("msgpack+snappy", "zstd-3+dict-16KiB"); err != nil || !near(r, 3894600.0/6231200) {
		t.Errorf("msgpack+snappy → zstd: %v %v", r, err)
	}
	if _, err := c.Ratio("gob", "json"); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "json, msgpack+snappy") {
		t.Errorf("unknown codec: %v", err)
	}
	for _, bad := range []string{`{}`, `{"schema":"kura.codecs/v2"}`, `{"schema":"kura.codecs/v1","results":[{"name":"a","bytes":1}]}`, `nope`} {
		if _, err := ReadCodecs(strings.NewReader(bad)); !errors.Is(err, ErrInput) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

// TestCatalogPricesAreSourced: every row of the shipped catalog is priced
// in its provider's default region (or says why not), every price names a
// source of the catalog and a date, and every source is dated and listed
// in docs/plan.md: a new price needs a dated public source, never a guess.
func TestCatalogPricesAreSourced(t *testing.T) {
	doc, err := os.ReadFile("../docs/plan.md")
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultCatalog()
	if len(c.Sources) == 0 {
		t.Fatal("the catalog names no price sources")
	}
	for _, s := range c.Sources {
		if !strings.Contains(string(doc), s.Key) || !strings.Contains(string(doc), s.Date) {
			t.Errorf("docs/plan.md does not say where %s's prices (data of %s) came from", s.Key, s.Date)
		}
		if s.Refresh == "" {
			t.Errorf("source %s does not say where today's prices are read", s.Key)
		}
	}
	for _, n := range c.Nodes {
		p, _ := c.Provider(n.Provider)
		if len(n.Prices) == 0 {
			if n.Unpriced == "" {
				t.Errorf("%s has no price and no written reason", n.Name)
			}
			continue
		}
		def := p.Regions[0].Name
		got := map[string]bool{}
		for _, pr := range n.Prices {
			if _, ok := c.Source(pr.Source); !ok || pr.Date == "" {
				t.Errorf("%s: price %+v has no catalog source or date", n.Name, pr)
			}
			if pr.Region == def {
				got[pr.Engine] = true
			}
		}
		for _, e := range p.Engines {
			if !got[e] && !got[""] {
				t.Errorf("%s: no %s price in %s, the provider's default region", n.Name, e, def)
			}
		}
	}
}

// TestValkeyIsEightTenths: on every ElastiCache node type and region the
// catalog prices both engines, Valkey is 0.8 × Redis OSS (the ElastiCache
// FAQ's "up to 20% lower cost per node", exact in the price data).
func TestValkeyIsEightTenths(t *testing.T) {
	pairs := 0
	for _, n := range DefaultCatalog().Nodes {
		if n.Provider != "elasticache" {
			continue
		}
		by := map[string]map[string]float64{}
		for _, pr := range n.Prices {
			if by[pr.Region] == nil {
				by[pr.Region] = map[string]float64{}
			}
			by[pr.Region][pr.Engine] = pr.PerHour
		}
		for region, e := range by {
			r, v := e["redis"], e["valkey"]
			if r == 0 || v == 0 {
				t.Errorf("%s %s: redis %v, valkey %v: want both", n.Name, region, r, v)
				continue
			}
			pairs++
			if math.Abs(v-0.8*r) > 5e-5 {
				t.Errorf("%s %s: valkey %v is not 0.8 × redis %v", n.Name, region, v, r)
			}
		}
	}
	if pairs < 20 {
		t.Errorf("only %d Redis/Valkey price pairs", pairs)
	}
}

// TestMemorystoreTiers: an instance is priced at the rate of the tier its
// size falls in (a 40 GB instance at M4's), Standard's per-GB price covers
// its replica, and a size a tier's range misses is refused naming the size.
func TestMemorystoreTiers(t *testing.T) {
	c := DefaultCatalog()
	var prev float64
	for i, tier := range []string{"M1", "M2", "M3", "M4", "M5"} {
		n, ok := c.Node(tier)
		if !ok || n.Name != "memorystore-redis-"+tier || n.MinGiB <= prev || n.MaxGiB < n.MinGiB {
			t.Fatalf("tier %s: %+v", tier, n)
		}
		if i > 0 && n.MinGiB != prev+1 {
			t.Errorf("tier %s starts at %g GB, the one before ends at %g", tier, n.MinGiB, prev)
		}
		prev = n.MaxGiB
	}
	p, err := New(c, Input{Workload: Workload{DataBytes: 30 * gib, Replicas: 1}, InstanceGiB: 40, Nodes: []string{"M4"}})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Rows[0]
	if r.Quote == nil || r.Quote.PerGBHour != 0.035 || r.Quote.ServiceTier != "standard" || r.Billed != 1 || r.Nodes != 2 ||
		math.Abs(r.MonthlyCost-40*0.035*730) > 1e-9 {
		t.Errorf("40 GB Standard M4: %+v, quote %+v", r, r.Quote)
	}
	if _, err := New(c, Input{Workload: Workload{DataBytes: 30 * gib}, InstanceGiB: 40, Nodes: []string{"M2"}}); err == nil ||
		!strings.Contains(err.Error(), "instance size") || !strings.Contains(err.Error(), "5–10 GB") {
		t.Errorf("40 GB on M2: %v", err)
	}
	// Committed use: 20% off for a year, not on M1.
	p, err = New(c, Input{Workload: Workload{DataBytes: 2 * gib}, Nodes: []string{"M1", "M2"},
		Pricing: Pricing{Discounts: map[string]Discount{"memorystore-redis": {Term: "1y"}}}})
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := p.RowFor("memorystore-redis-M1")
	m2, _ := p.RowFor("memorystore-redis-M2")
	if m1.Discount != 0 || m2.Discount != 0.2 || math.Abs(m2.MonthlyCost-5*0.027*730*0.8) > 1e-9 {
		t.Errorf("1y commitment: M1 %v, M2 %v ($%v)", m1.Discount, m2.Discount, m2.MonthlyCost)
	}
}

// TestRegionsAndEngines: --region picks each provider's prices, a region
// without a price leaves the row unpriced and unranked, an unknown region
// or engine is an error naming it.
func TestRegionsAndEngines(t *testing.T) {
	c := DefaultCatalog()
	in := Input{Workload: Workload{DataBytes: 10 * gib}, Pricing: Pricing{Regions: []string{"tokyo"}}}
	p, err := New(c, in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Regions["elasticache"] != "ap-northeast-1" || p.Regions["memorystore-redis"] != "asia-northeast1" {
		t.Errorf("tokyo: %v", p.Regions)
	}
	r, _ := p.RowFor("cache.r7g.large")
	m, _ := p.RowFor("cache.m7g.large")
	if !r.Priced || r.HourlyPrice != 0.263 || m.Priced || !strings.Contains(m.Unpriced, "ap-northeast-1") {
		t.Errorf("Tokyo: r7g.large %v %v, m7g.large %v %q", r.Priced, r.HourlyPrice, m.Priced, m.Unpriced)
	}
	in.Pricing = Pricing{Engine: "valkey"}
	p, err = New(c, in)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := p.RowFor("cache.r7g.large"); r.HourlyPrice != 0.1752 {
		t.Errorf("valkey r7g.large: %v", r.HourlyPrice)
	}
	if r, _ := p.RowFor("memorystore-redis-M2"); !strings.Contains(r.Skipped, "Redis OSS") {
		t.Errorf("Memorystore for Redis under --engine valkey: %q", r.Skipped)
	}
	for _, bad := range []Pricing{{Regions: []string{"mars-1"}}, {Engine: "dragonfly"},
		{Discounts: map[string]Discount{"elasticache": {Term: "1y"}}}, {Discounts: map[string]Discount{"elasticache": {Fraction: -0.1}}},
		{Discounts: map[string]Discount{"nope": {Fraction: 0.1}}}} {
		if _, err := New(c, Input{Workload: Workload{DataBytes: gib}, Pricing: bad}); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: err = %v", bad, err)
		}
	}
}
