package plan

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// The fuzz tests cover every parser of the package: a user's catalog
// file, the JSON of kura bench, and the sizes a person types. Each seed
// corpus is in testdata/fuzz/<name>, so plain `go test` runs it.

// FuzzParseCatalog: any bytes give a catalog that validates or an
// ErrCatalog, never a panic; a catalog that parses sizes without error.
func FuzzParseCatalog(f *testing.F) {
	f.Add([]byte(validCatalog))
	f.Add(DefaultCatalogJSON())
	f.Add([]byte(`{"nodes":[{"name":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalog(bytes.NewReader(data))
		if err != nil {
			if c != nil {
				t.Fatal("catalog returned with an error")
			}
			if !errors.Is(err, ErrCatalog) && !strings.HasPrefix(err.Error(), "node catalog:") {
				t.Fatalf("error %v is not a catalog error", err)
			}
			return
		}
		p, err := New(c, Input{Workload: Workload{DataBytes: 1 << 30, ReadsPerSec: 1000, ReadValueBytes: 100, OpsPerSecPerThread: 1e5, MaxValueBytes: 1e6}})
		if err != nil {
			t.Fatalf("a valid catalog could not be planned: %v", err)
		}
		for _, r := range p.Rows {
			if r.Skipped == "" && (r.Shards < 1 || r.Nodes < r.Shards || math.IsNaN(r.MonthlyCost) || r.MonthlyCost < 0) {
				t.Fatalf("row %s: shards %d nodes %d cost %v", r.Node.Name, r.Shards, r.Nodes, r.MonthlyCost)
			}
		}
	})
}

// FuzzPricing: any region, engine, discount, replicas and instance size
// on the shipped catalog give a plan with finite, non-negative costs or an
// ErrInput naming what is wrong; never a panic.
func FuzzPricing(f *testing.F) {
	f.Add("tokyo", "valkey", "memorystore-redis", "1y", 0.0, 1, 40.0, 120.0)
	f.Add("us-east-1,mars", "redis", "elasticache", "", 0.3, 0, 0.0, 1.0)
	f.Add("", "", "nope", "9y", -1.0, 7, 1e9, -5.0)
	cat := DefaultCatalog()
	f.Fuzz(func(t *testing.T, regions, engine, prov, term string, frac float64, replicas int, inst, gbData float64) {
		in := Input{Workload: Workload{DataBytes: gbData * (1 << 30), ReadsPerSec: 1000, OpsPerSecPerThread: 1e5, Replicas: replicas},
			InstanceGiB: inst, Pricing: Pricing{Engine: engine, Discounts: map[string]Discount{prov: {Fraction: frac, Term: term}}}}
		if regions != "" {
			in.Pricing.Regions = strings.Split(regions, ",")
		}
		p, err := New(cat, in)
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatalf("error %v is not an input error", err)
			}
			return
		}
		for _, r := range p.Rows {
			if r.Skipped == "" && (math.IsNaN(r.MonthlyCost) || math.IsInf(r.MonthlyCost, 0) || r.MonthlyCost < 0 || r.Priced && r.Quote == nil) {
				t.Fatalf("row %s: cost %v quote %v", r.Node.Name, r.MonthlyCost, r.Quote)
			}
		}
		if c, err := Compare(cat, CompareInput{Input: in, From: Fleet{Node: "M2", Count: 24}, To: Fleet{Node: "M4", Count: 6, GiB: inst}}); err == nil {
			if c.Priced && (math.IsNaN(c.CostPct) || c.From.MonthlyCost <= 0) {
				t.Fatalf("comparison cost %+v", c)
			}
		} else if !errors.Is(err, ErrInput) {
			t.Fatalf("compare error %v is not an input error", err)
		}
	})
}

// FuzzReadBench: any bytes give a measurement with finite, non-negative
// figures or an error.
func FuzzReadBench(f *testing.F) {
	f.Add([]byte(`{"ops":100,"ops_per_sec":10,"server":{"cpu_seconds_per_1k_ops":0.01,"net_in_bytes":1000,"net_out_bytes":2000}}`))
	f.Add([]byte(`{"param":"io-threads","steps":[{"value":"1","result":{"ops":10,"ops_per_sec":5,"server":{"cpu_seconds":1}}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadBench(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, v := range []float64{m.CPUSecondsPerOp, m.InBytesPerOp, m.OutBytesPerOp, m.OpsPerSec} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("measured %+v", m)
			}
		}
		if m.CPUSecondsPerOp <= 0 {
			t.Fatalf("no CPU per op accepted: %+v", m)
		}
		w := Workload{ReadsPerSec: 1000}
		m.Apply(&w)
		if _, err := New(fuzzCatalog, Input{Workload: w}); err != nil && !errors.Is(err, ErrInput) {
			t.Fatal(err)
		}
	})
}

var fuzzCatalog = DefaultCatalog()

// FuzzParseBytes: a size parses to a finite number from 0 to 10^18 or is
// refused.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1.3MB", "120GB", "512KiB", "4096", "-1", "1e400", "NaN", "0x10", " 2 gib "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseBytes(s)
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatal(err)
			}
			return
		}
		if v < 0 || v > maxBytes || math.IsNaN(v) {
			t.Fatalf("ParseBytes(%q) = %v", s, v)
		}
		_ = FormatBytes(v)
	})
}

// FuzzReadScan: any bytes give scan figures the planner can use, or an
// error.
func FuzzReadScan(f *testing.F) {
	if b, err := os.ReadFile("testdata/scan-v1.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"schema":"kura.scan/v1","histogram":[{"le":-1,"keys":3,"value_bytes":9}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadScan(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatal(err)
			}
			return
		}
		w := Workload{ReadsPerSec: 100}
		s.Apply(&w)
		in := Input{Workload: w}
		for _, r := range s.CodecRatios {
			in.WhatIf.CodecRatio = r
			break
		}
		if _, err := New(fuzzCatalog, in); err != nil && !errors.Is(err, ErrInput) {
			t.Fatal(err)
		}
	})
}

// FuzzReadCodecs: any bytes give codec sizes whose ratios are finite and
// positive, or an error.
func FuzzReadCodecs(f *testing.F) {
	if b, err := os.ReadFile("testdata/codecs-v1.json"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadCodecs(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatal(err)
			}
			return
		}
		for from := range c.Bytes {
			for to := range c.Bytes {
				r, err := c.Ratio(from, to)
				if err != nil || !(r > 0) || math.IsInf(r, 0) {
					t.Fatalf("ratio %s → %s = %v, %v", from, to, r, err)
				}
			}
		}
	})
}
