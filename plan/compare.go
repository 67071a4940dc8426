package plan

import (
	"fmt"
	"math"
	"strings"
)

// Fleet is a number of nodes of one type: "24 of these".
type Fleet struct {
	Node  string
	Count int
	// GiB is the instance size of a capacity tier (Memorystore for
	// Redis); zero derives it from the data: the data over Count
	// instances at the memory ceiling, whole GB, at least the tier's
	// smallest.
	GiB float64
}

func (f Fleet) String() string { return fmt.Sprintf("%d × %s", f.Count, f.Node) }

// FleetLoad is the workload spread over one fleet: what each instance
// holds and serves, and how much of its capacity that is.
type FleetLoad struct {
	Fleet Fleet
	// Row is the node type sized for the workload (its Needs' PerNode is
	// one instance's capacity under the ceilings; Shards is what the
	// planner would pick, for comparison with Fleet.Count).
	Row Row
	// Memory, Ops and Bits are one instance's share: bytes held, ops/s
	// served, bits/s sent or received (the larger).
	Memory, Ops, Bits float64
	// Use is, per constraint, the instance's share over its capacity
	// under the ceiling (1 = at the ceiling); 0 when not Checked.
	Use [3]float64
	// CPU is the share of the engine's full capacity the instance uses
	// (the figure a CPU graph shows), from the traffic and the CPU cost,
	// or from Comparison.FromCPU scaled; 0 when neither is known.
	CPU float64
	// Binding is the constraint whose share of its ceiling is highest;
	// BindingKnown is false when no share is known.
	Binding      Constraint
	BindingKnown bool
	// InstanceGiB is a capacity tier's instance size.
	InstanceGiB float64
	// Priced is set when the fleet has a price: MonthlyCost is then all
	// its billed nodes for HoursPerMonth, after any discount. Unpriced
	// says why not.
	Priced      bool
	MonthlyCost float64
	Unpriced    string
}

// Comparison answers "N of type A or M of type B": the same workload on
// two fleets, per instance.
type Comparison struct {
	From, To FleetLoad
	// LoadPerNode is how much more each instance of To serves than one
	// of From (From.Count / To.Count: 4 for 24 → 6).
	LoadPerNode float64
	// Throughput is what one instance of To serves over one of From,
	// from their thread counts and the thread-scaling curve (2.35 for 1
	// → 6 threads on the field report's curve).
	Throughput float64
	// CPUPerNode is LoadPerNode / Throughput: how much busier each
	// instance's CPU gets (1.7 for 24 → 6 with 1 → 6 threads).
	CPUPerNode float64
	// FromCPU is the CPU share measured on the From fleet today
	// (CompareInput.FromCPU), when given.
	FromCPU float64
	// Absorbs reports that To's threads absorb the load: its CPU stays
	// under the CPU ceiling. Known is false when neither the traffic and
	// CPU cost nor a measured FromCPU let it be computed.
	Absorbs, Known bool
	// Fits reports, per constraint, that To stays under its ceiling
	// (true when the constraint could not be checked: see Row.Needs).
	Fits [3]bool
	// CostDelta is To's monthly cost less From's, CostPct that over
	// From's (negative: a saving); set when both fleets are priced.
	CostDelta float64
	CostPct   float64
	Priced    bool
	// Why sums the comparison up in a few sentences.
	Why       string
	Effective Effective
	// Plan is the To fleet's plan (its catalog, engine, regions and
	// money formatting).
	Plan *Plan
}

// FleetError says which fleet of a comparison could not be sized (a tier
// whose range misses the instance size, a region without the node type).
type FleetError struct {
	Fleet Fleet
	// To is set for the To fleet, clear for the From fleet.
	To  bool
	Err error
}

func (e *FleetError) Error() string { return fmt.Sprintf("fleet %s: %v", e.Fleet, e.Err) }

// Unwrap returns the planner's error (ErrInput).
func (e *FleetError) Unwrap() error { return e.Err }

// CompareInput is a workload and the two fleets.
type CompareInput struct {
	Input
	From, To Fleet
	// FromCPU, when set, is the CPU share (0 to 1) the From fleet's
	// instances use at peak today, as its monitoring shows it: the
	// comparison scales it instead of computing it from the traffic.
	FromCPU float64
}

// Compare puts the input's workload on the From fleet and on the To fleet
// and compares them per instance: memory, traffic and network per
// instance, and whether To's threads absorb the load each instance gains
// (the field report's question before going from 24 instances to 6).
func Compare(cat *Catalog, in CompareInput) (*Comparison, error) {
	if cat == nil {
		return nil, fmt.Errorf("%w: no catalog", ErrInput)
	}
	for _, f := range []*Fleet{&in.From, &in.To} {
		if f.Count <= 0 || f.Count > 1e6 {
			return nil, fmt.Errorf("%w: fleet %q: count must be 1 to 1,000,000, got %d", ErrInput, f.Node, f.Count)
		}
		n, ok := cat.Node(f.Node)
		if !ok {
			return nil, fmt.Errorf("%w: fleet node type %q is not in the catalog", ErrInput, f.Node)
		}
		if f.GiB < 0 || math.IsNaN(f.GiB) || f.GiB > 1e6 {
			return nil, fmt.Errorf("%w: fleet %s: instance size %v GB is not a size", ErrInput, f, f.GiB)
		}
		f.Node = n.Name // an alias ("M4") names the row
	}
	if !(in.FromCPU >= 0 && in.FromCPU <= 1) {
		return nil, fmt.Errorf("%w: the CPU share measured today must be 0 to 1, got %v", ErrInput, in.FromCPU)
	}
	x := in.Input
	has := x.hasWorkload()
	if !has {
		// Ratios need no workload: a placeholder keeps New's check happy
		// and every per-instance figure at zero.
		x.Workload.Notes = append(x.Workload.Notes, "no workload given: only the ratios per instance are compared")
		x.Workload.ReadsPerSec = 1
	}
	fleet := func(f Fleet) (FleetLoad, *Plan, error) {
		node, _ := cat.Node(f.Node)
		y := x
		y.Nodes = []string{node.Name}
		if node.MaxGiB > 0 {
			y.fleet = &fleetSize{count: f.Count, gib: f.GiB}
		}
		p, err := New(cat, y)
		if err != nil {
			return FleetLoad{}, nil, &FleetError{Fleet: f, To: f == in.To, Err: err}
		}
		r := p.Rows[0]
		fl := FleetLoad{Fleet: f, Row: r, InstanceGiB: r.InstanceGiB}
		n := float64(f.Count)
		if has {
			fl.Memory, fl.Ops = p.Effective.DataBytes/n, p.Effective.Ops()/n
			fl.Bits = math.Max(p.Effective.InBitsPerSec, p.Effective.OutBitsPerSec) / n
		}
		for i, nd := range r.Needs {
			if nd.Checked && nd.PerNode > 0 && has {
				fl.Use[i] = nd.Demand / n / nd.PerNode
			}
		}
		if r.Needs[CPU].Checked && has && r.CPUCeil > 0 {
			fl.CPU = fl.Use[CPU] * r.CPUCeil
		}
		switch {
		case r.Skipped != "":
			fl.Unpriced = r.Skipped
		case node.MaxGiB > 0 && f.GiB == 0 && p.Effective.DataBytes == 0:
			fl.Unpriced = "the instance size is not known: give the data size (--data) or the size as COUNT:NODE:SIZE"
		case !r.Priced:
			fl.Unpriced = r.Unpriced
		default:
			billed := f.Count * (1 + p.Effective.Replicas)
			if r.Quote.IncludesReplica {
				billed = f.Count
			}
			fl.Priced = true
			fl.MonthlyCost = r.HourlyPrice * HoursPerMonth * float64(billed) * (1 - r.Discount)
		}
		return fl, p, nil
	}
	c := &Comparison{FromCPU: in.FromCPU}
	var err error
	if c.From, _, err = fleet(in.From); err != nil {
		return nil, err
	}
	if c.To, c.Plan, err = fleet(in.To); err != nil {
		return nil, err
	}
	c.Effective = c.Plan.Effective
	c.LoadPerNode = float64(in.From.Count) / float64(in.To.Count)
	sc := c.Effective.Scaling
	c.Throughput = threadFactor(sc, c.To.Row.Threads) / threadFactor(sc, c.From.Row.Threads)
	c.CPUPerNode = c.LoadPerNode / c.Throughput
	if in.FromCPU > 0 {
		c.From.CPU = in.FromCPU
		c.To.CPU = in.FromCPU * c.CPUPerNode
	}
	ceil := c.To.Row.CPUCeil
	if c.To.CPU > 0 {
		c.Known = true
		c.Absorbs = c.To.CPU <= ceil
	}
	for i := range c.Fits {
		c.Fits[i] = !c.To.Row.Needs[i].Checked || !has || c.To.Use[i] <= 1
	}
	for _, fl := range []*FleetLoad{&c.From, &c.To} {
		use := fl.Use
		if fl.CPU > 0 && fl.Row.CPUCeil > 0 {
			use[CPU] = fl.CPU / fl.Row.CPUCeil
		}
		for k, u := range use {
			if u > 0 && (!fl.BindingKnown || u > use[fl.Binding]) {
				fl.Binding, fl.BindingKnown = Constraint(k), true
			}
		}
	}
	if c.From.Priced && c.To.Priced {
		c.Priced = true
		c.CostDelta = c.To.MonthlyCost - c.From.MonthlyCost
		c.CostPct = c.CostDelta / c.From.MonthlyCost
	}
	c.Why = c.explain(has)
	return c, nil
}

// hasWorkload reports whether the input gives anything to size.
func (in Input) hasWorkload() bool {
	w := in.Workload
	return w.DataBytes > 0 || w.Keys > 0 || w.ReadsPerSec > 0 || w.WritesPerSec > 0
}

func (c *Comparison) explain(workload bool) string {
	var b strings.Builder
	f, t := c.From, c.To
	fmt.Fprintf(&b, "From %s to %s, each instance serves %s the load; %s instead of %d give %s the throughput (%s), so CPU per instance rises %s / %s = %s.",
		f.Fleet, t.Fleet, ratio(c.LoadPerNode), threads(t.Row.Threads), f.Row.Threads, ratio(c.Throughput), c.Effective.ScalingName(), ratio(c.LoadPerNode), ratio(c.Throughput), ratio(c.CPUPerNode))
	switch {
	case c.Known && c.Absorbs:
		fmt.Fprintf(&b, " CPU per instance goes from %.0f%% to %.0f%%, under the %.0f%% ceiling: the threads absorb the load.", 100*f.CPU, 100*t.CPU, 100*t.Row.CPUCeil)
	case c.Known:
		fmt.Fprintf(&b, " CPU per instance goes from %.0f%% to %.0f%%, over the %.0f%% ceiling: the threads do not absorb the load.", 100*f.CPU, 100*t.CPU, 100*t.Row.CPUCeil)
		if nd := t.Row.Needs[CPU]; nd.Checked {
			fmt.Fprintf(&b, " The CPU alone needs %d × %s.", nd.Nodes, t.Fleet.Node)
		}
	default:
		b.WriteString(" Whether that fits is unknown: give the peak traffic with a CPU cost (--bench or --ops-per-thread), or the CPU share the instances use today (--cpu-now).")
	}
	if t.BindingKnown {
		fmt.Fprintf(&b, " Each %s instance is %s-bound (%.0f%% of its %s ceiling).", t.Fleet.Node, t.Binding, 100*bindingUse(t), t.Binding)
	}
	if workload {
		for _, k := range []Constraint{Memory, Network} {
			nd := t.Row.Needs[k]
			switch {
			case !nd.Checked:
			case c.Fits[k]:
				fmt.Fprintf(&b, " %s per instance: %.0f%% of the ceiling.", capital(k.String()), 100*t.Use[k])
			default:
				fmt.Fprintf(&b, " %s per instance: %.0f%% of the ceiling, too much: %s needs %d instances.", capital(k.String()), 100*t.Use[k], t.Fleet.Node, nd.Nodes)
			}
		}
	}
	p := c.Plan
	switch {
	case c.Priced:
		fmt.Fprintf(&b, " %s cost %s a month, %s %s: %s a month (%s); %s.", f.Fleet, p.Money(f.MonthlyCost), t.Fleet, p.Money(t.MonthlyCost),
			p.Signed(c.CostDelta), Pct(c.CostPct), t.Row.PriceOrigin(p.Catalog))
	case !f.Priced && !t.Priced:
		fmt.Fprintf(&b, " No cost: %s.", f.Unpriced)
	case !f.Priced:
		fmt.Fprintf(&b, " No cost for %s: %s.", f.Fleet, f.Unpriced)
	default:
		fmt.Fprintf(&b, " No cost for %s: %s.", t.Fleet, t.Unpriced)
	}
	return b.String()
}

// bindingUse is the fleet's share of its binding constraint's ceiling.
func bindingUse(fl FleetLoad) float64 {
	if fl.Binding == CPU && fl.CPU > 0 && fl.Row.CPUCeil > 0 {
		return fl.CPU / fl.Row.CPUCeil
	}
	return fl.Use[fl.Binding]
}

func capital(s string) string {
	if s == "" || s == "CPU" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// ScalingName names the thread curve the effective workload was sized
// with.
func (e Effective) ScalingName() string {
	if e.Scaling == nil || e.Scaling.Name == "" {
		return "no thread curve: one thread's throughput assumed"
	}
	return e.Scaling.Name
}

// ratio prints a multiplier with two decimals: 4.00×.
func ratio(v float64) string { return fmt.Sprintf("%.2f×", v) }

// threads is "1 thread" or "N threads".
func threads(n int) string {
	if n == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}
