package demo

import (
	"bytes"
	"encoding/json"
	"fmt"

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

// The two resizes the card prices, as kura plan commands: fewer, bigger
// Memorystore instances at the same total memory (half of each filled,
// the maintenance rule; today's CPU share a labelled sample), and a step
// down to the smaller ElastiCache node once a codec cut the network bytes
// to a third (a 5.55 Gbps peak of 13,441-byte values).
const (
	tiersCommand    = "kura plan --from 24:memorystore-redis-M2 --to 6:memorystore-redis-M4 --data 120GiB --memory-ceiling 0.5 --replicas 1 --cpu-now 0.4"
	stepDownCommand = "kura plan --reads 51584 --read-size 13441 --codec-ratio 0.3333 --node cache.m7g.2xlarge --node cache.m7g.4xlarge"
	tiersCPUNow     = 0.4 // a labelled sample: the problem gives no CPU share
)

// pricedMoves answers "24 of these or 6 of those" and "one size down
// after the codec" with kura plan on the catalog as shipped, in dollars a
// month, the same figures as its golden tests.
func pricedMoves(res *Result) error {
	cat := plan.DefaultCatalog()
	c, err := plan.Compare(cat, plan.CompareInput{
		Input: plan.Input{Workload: plan.Workload{DataBytes: 120 << 30, Replicas: 1}, Rules: plan.Rules{MemoryCeiling: 0.5}},
		From:  plan.Fleet{Node: "memorystore-redis-M2", Count: 24}, To: plan.Fleet{Node: "memorystore-redis-M4", Count: 6}, FromCPU: tiersCPUNow})
	if err != nil {
		return err
	}
	if !c.Priced {
		return fmt.Errorf("the catalog has no price for %s or %s", c.From.Fleet, c.To.Fleet)
	}
	p := c.Plan
	t := Table{Title: "Fewer, bigger instances: 24 Memorystore M2 or 6 M4 (Standard, one replica each), 120 GiB of data, half of each instance filled (per instance, and the fleet a month)",
		Columns: []string{"", "24 × M2 (1 thread)", "6 × M4 (6 threads)", ""}}
	t.Rows = append(t.Rows,
		[]string{"instance size", fmt.Sprintf("%g GB", c.From.InstanceGiB), fmt.Sprintf("%g GB", c.To.InstanceGiB), "same total memory"},
		[]string{"load", "1.00×", fmt.Sprintf("%.2f×", c.LoadPerNode), ""},
		[]string{"throughput", "1.00×", fmt.Sprintf("%.2f×", c.Throughput), "measured thread curve"},
		[]string{"CPU", "1.00×", fmt.Sprintf("%.2f×", c.CPUPerNode), fmt.Sprintf("%.2f× / %.2f×", c.LoadPerNode, c.Throughput)},
		[]string{"CPU share", fmt.Sprintf("%.0f%%", 100*c.From.CPU), fmt.Sprintf("%.0f%%", 100*c.To.CPU), fmt.Sprintf("ceiling %.0f%%", 100*c.To.Row.CPUCeil)},
		[]string{"binds", c.From.Binding.String(), c.To.Binding.String(), ""},
		[]string{"price per GB-hour", p.Price(c.From.Row.Quote.PerGBHour), p.Price(c.To.Row.Quote.PerGBHour), c.To.Row.PriceOrigin(cat)},
		[]string{"per month", p.Money(c.From.MonthlyCost), p.Money(c.To.MonthlyCost), fmt.Sprintf("%s (%s)", p.Signed(c.CostDelta), plan.Pct(c.CostPct))})
	res.Tables = append(res.Tables, t)
	res.Charts = append(res.Charts, Chart{Title: "Fewer, bigger instances: US dollars a month at the same total memory", Unit: "USD",
		Note: "on-demand prices of the catalog as shipped (" + c.To.Row.PriceOrigin(cat) + "), 730 hours a month",
		Bars: []Bar{{Label: "24 × M2, 10 GB", Value: c.From.MonthlyCost}, {Label: "6 × M4, 40 GB", Value: c.To.MonthlyCost, Kura: true}}})
	res.note("kura plan: %s (The 40%% CPU share today is a sample figure.)", c.Why)

	sd, err := plan.New(cat, plan.Input{Workload: plan.Workload{ReadsPerSec: 51584, ReadValueBytes: 13441},
		Nodes: []string{"cache.m7g.2xlarge", "cache.m7g.4xlarge"}, WhatIf: plan.WhatIf{CodecRatio: 0.3333}})
	if err != nil {
		return err
	}
	w, ok := sd.WhatIf()
	if !ok {
		return fmt.Errorf("the catalog has no price for the ElastiCache step down")
	}
	st := Table{Title: fmt.Sprintf("One node size down: a %.2f Gbps read peak of 13,441-byte values, then a codec that cuts the bytes to a third (%.2f Gbps)",
		sd.Before.Effective.OutBitsPerSec/1e9, sd.Effective.OutBitsPerSec/1e9),
		Columns: []string{"node type", "baseline Gbps", "nodes before", "per month before", "nodes after", "per month after", "change"}}
	for _, r := range sd.Rows {
		old, _ := sd.Before.RowFor(r.Node.Name)
		st.Rows = append(st.Rows, []string{r.Node.Name, fmt.Sprint(r.Node.BaselineGbps), fmt.Sprint(old.Nodes), p.Money(old.MonthlyCost),
			fmt.Sprint(r.Nodes), p.Money(r.MonthlyCost), fmt.Sprintf("%s (%s)", p.Signed(r.MonthlyCost-old.MonthlyCost), plan.Pct((r.MonthlyCost-old.MonthlyCost)/old.MonthlyCost))})
	}
	res.Tables = append(res.Tables, st)
	res.note("kura plan: the cheapest answer goes from %d × %s (%s a month) to %d × %s (%s): %s a month (%s), %s.",
		w.Before.Nodes, w.Before.Node.Name, p.Money(w.Before.MonthlyCost), w.After.Nodes, w.After.Node.Name, p.Money(w.After.MonthlyCost),
		p.Signed(w.Delta), plan.Pct(w.Pct), w.After.PriceOrigin(cat))
	res.Headline += fmt.Sprintf("; priced: 24 × M2 → 6 × M4 %s a month (%s), %s → %s after the codec %s (%s)",
		p.Signed(c.CostDelta), plan.Pct(c.CostPct), w.Before.Node.Name, w.After.Node.Name, p.Signed(w.Delta), plan.Pct(w.Pct))
	res.Commands = append(res.Commands, tiersCommand, stepDownCommand)
	return nil
}
