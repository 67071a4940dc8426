package demo

import (
	"bytes"
	"encoding/json"

	"github.com/kuracache/kura/loadgen"
	"github.com/kuracache/kura/plan"
)

// planRow is one node type of a plan, formatted for the demo's tables.
type planRow struct {
	node, binding, monthly string
	nodes                  int
	largestSeconds         float64
	largestFits            bool
}

// planNodes sizes the article cache for every node type of kura plan's
// catalog from the sweep's measured numbers, as `kura plan --bench` would
// from the sweep's JSON.
func planNodes(sr *loadgen.SweepResult, w planWorkload) ([]planRow, []string, error) {
	js, err := json.Marshal(sr)
	if err != nil {
		return nil, nil, err
	}
	m, err := plan.ReadBench(bytes.NewReader(js))
	if err != nil {
		return nil, nil, err
	}
	wl := plan.Workload{Keys: w.keys, KeyBytes: 20, AvgValueBytes: w.valueBytes,
		ReadsPerSec: w.readsPerSec, WritesPerSec: w.writesPerSec}
	m.Apply(&wl)
	p, err := plan.New(plan.DefaultCatalog(), plan.Input{Workload: wl, WhatIf: plan.WhatIf{CodecRatio: w.codecRatio}})
	if err != nil {
		return nil, nil, err
	}
	var out []planRow
	for _, r := range p.Rows {
		if r.Skipped != "" {
			continue
		}
		monthly := "-"
		if r.Priced {
			monthly = p.Money(r.MonthlyCost)
		}
		out = append(out, planRow{node: r.Node.Name, binding: r.Binding.String(), monthly: monthly, nodes: r.Nodes})
	}
	notes := append([]string{p.Why}, m.Notes...)
	return out, notes, nil
}

// planLargest checks a value of size bytes, read perSec times a second,
// against every node type's link.
func planLargest(size, perSec float64) ([]planRow, error) {
	p, err := plan.New(plan.DefaultCatalog(), plan.Input{Workload: plan.Workload{
		Keys: 1, AvgValueBytes: size, MaxValueBytes: size, ReadsPerSec: perSec, LargeValuesPerSec: perSec}})
	if err != nil {
		return nil, err
	}
	var out []planRow
	for _, r := range p.Rows {
		if r.Skipped != "" || r.Largest == nil {
			continue
		}
		monthly := "-"
		if r.Priced {
			monthly = p.Money(r.MonthlyCost)
		}
		out = append(out, planRow{node: r.Node.Name, monthly: monthly, nodes: r.Nodes,
			largestSeconds: r.Largest.Seconds, largestFits: r.Largest.Utilisation < 1})
	}
	return out, nil
}
