package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kuracache/kura/internal/vis"
	"github.com/kuracache/kura/plan"
)

// WriteComparison prints a plan.Comparison: the two fleets side by side
// per instance (threads, load, throughput, CPU, memory, network), the
// ratios the answer rests on, and the verdict.
func WriteComparison(w io.Writer, c *plan.Comparison) error {
	var b strings.Builder
	f, t := c.From, c.To
	fmt.Fprintf(&b, "Resize: %s → %s (per instance)\n\n", vis.Escape(f.Fleet.String()), vis.Escape(t.Fleet.String()))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\t%s\t%s\t\n", vis.Escape(f.Fleet.String()), vis.Escape(t.Fleet.String()))
	fmt.Fprintf(tw, "threads\t%d\t%d\t\n", f.Row.Threads, t.Row.Threads)
	fmt.Fprintf(tw, "load\t1.00×\t%.2f×\t%d / %d instances\n", c.LoadPerNode, f.Fleet.Count, t.Fleet.Count)
	fmt.Fprintf(tw, "throughput\t1.00×\t%.2f×\t%s\n", c.Throughput, vis.Escape(c.Effective.ScalingName()))
	fmt.Fprintf(tw, "CPU\t1.00×\t%.2f×\t%.2f× / %.2f×\n", c.CPUPerNode, c.LoadPerNode, c.Throughput)
	if c.Known {
		fmt.Fprintf(tw, "CPU share\t%.0f%%\t%.0f%%\tceiling %.0f%%\n", 100*f.CPU, 100*t.CPU, 100*t.Row.CPUCeil)
	}
	if f.Memory > 0 {
		fmt.Fprintf(tw, "memory\t%s\t%s\t%s\n", plan.FormatBytes(f.Memory), plan.FormatBytes(t.Memory), use(t, plan.Memory))
	}
	if f.Ops > 0 {
		fmt.Fprintf(tw, "ops/s\t%s\t%s\t\n", count(f.Ops), count(t.Ops))
	}
	if f.Bits > 0 {
		fmt.Fprintf(tw, "network\t%s\t%s\t%s\n", gbpsValue(f.Bits)+" Gbps", gbpsValue(t.Bits)+" Gbps", use(t, plan.Network))
	}
	if f.InstanceGiB > 0 || t.InstanceGiB > 0 {
		fmt.Fprintf(tw, "instance size\t%s\t%s\t%s\n", instGB(f), instGB(t), vis.Escape(tierNote(c)))
	}
	p := c.Plan
	if f.Priced || t.Priced {
		fmt.Fprintf(tw, "price\t%s\t%s\t%s\n", fleetPrice(p, f), fleetPrice(p, t), vis.Escape(t.Row.PriceOrigin(p.Catalog)))
		fmt.Fprintf(tw, "per month\t%s\t%s\t%s\n", fleetMonthly(p, f), fleetMonthly(p, t), costChange(c))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\n%s\n", vis.Escape(c.Why))
	fmt.Fprintf(&b, "\n%s\n", vis.Escape(pricingLine(p)))
	_, err := io.WriteString(w, b.String())
	return err
}

// use is the To fleet's share of a constraint's ceiling, or why it was
// not checked.
func use(t plan.FleetLoad, k plan.Constraint) string {
	nd := t.Row.Needs[k]
	if !nd.Checked {
		return "not checked: " + vis.Escape(nd.Why)
	}
	return fmt.Sprintf("%.0f%% of the ceiling", 100*t.Use[k])
}

func instGB(fl plan.FleetLoad) string {
	if fl.InstanceGiB == 0 {
		return "-"
	}
	return fmt.Sprintf("%g GB", fl.InstanceGiB)
}

// tierNote says whether the instance sizes were given or derived, and the
// service tier the price is for.
func tierNote(c *plan.Comparison) string {
	var parts []string
	if q := c.To.Row.Quote; q != nil && q.ServiceTier != "" {
		s := q.ServiceTier
		if q.IncludesReplica {
			s += ", its replica included"
		}
		parts = append(parts, s)
	}
	if !c.From.Row.InstanceGiven || !c.To.Row.InstanceGiven {
		parts = append(parts, "sizes from the data over the instances at the memory ceiling")
	}
	return strings.Join(parts, "; ")
}

func fleetPrice(p *plan.Plan, fl plan.FleetLoad) string {
	q := fl.Row.Quote
	switch {
	case !fl.Priced || q == nil:
		return "-"
	case q.PerGBHour > 0:
		return p.Price(q.PerGBHour) + "/GB-h"
	}
	return p.Price(q.PerHour) + "/h"
}

func fleetMonthly(p *plan.Plan, fl plan.FleetLoad) string {
	if !fl.Priced {
		return "-"
	}
	return p.Money(fl.MonthlyCost)
}

func costChange(c *plan.Comparison) string {
	if !c.Priced {
		return ""
	}
	return fmt.Sprintf("%s (%s)", c.Plan.Signed(c.CostDelta), plan.Pct(c.CostPct))
}
