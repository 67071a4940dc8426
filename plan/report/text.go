// Package report prints a plan.Plan: a text table for the terminal and a
// self-contained HTML page with SVG charts. It is a consumer of the
// model's results and holds no sizing logic of its own.
package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/kuracache/kura/internal/units"
	"github.com/kuracache/kura/internal/vis"
	"github.com/kuracache/kura/plan"
)

// WriteText prints the plan as a table ranked by the nodes each type
// needs, the summary (fewest nodes and what binds them, then the prices), the largest value against each link, the
// notes, and every row's source and date.
func WriteText(w io.Writer, p *plan.Plan) error {
	var b strings.Builder
	header(&b, p)
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	head := "NODE TYPE\tNODES\tBINDS\tMEMORY\tCPU\tNETWORK\tBASE/BURST Gbps\tPER HOUR\tPER MONTH"
	if p.Before != nil {
		head += "\tAS ASKED\tWHAT-IF"
	}
	fmt.Fprintln(tw, head)
	var skipped []plan.Row
	for _, r := range p.Rows {
		if r.Skipped != "" {
			skipped = append(skipped, r)
			continue
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", vis.Escape(nodeName(r)), nodes(r, p), r.Binding,
			need(r, plan.Memory), need(r, plan.CPU), need(r, plan.Network), gbps(r.Node), vis.Escape(hourly(r, p)), vis.Escape(monthly(r, p))) // the currency is the catalog's text
		if p.Before != nil {
			line += "\t" + vis.Escape(asAsked(r, p)) + "\t" + vis.Escape(change(r, p))
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("MEMORY, CPU, NETWORK: nodes that constraint alone needs · share of its ceiling used at the planned count\n")
	b.WriteString("(100% minus that is the headroom left); - : not checked, see the notes.\n")
	b.WriteString("PER HOUR: one node's (one instance's) on-demand price and its source, listed below, or yours (--price);\n")
	b.WriteString("PER MONTH: the billed nodes × 730 hours, after discounts. Ranked by monthly cost; rows without a price\n")
	b.WriteString("(none: see the notes) are never ranked on cost and follow, by nodes needed.\n")
	if p.Before != nil {
		b.WriteString("AS ASKED: nodes and monthly cost without the what-if; WHAT-IF: the change per month it makes.\n")
	}
	if len(skipped) > 0 {
		b.WriteString("\nNot sized:\n")
		for _, r := range skipped {
			fmt.Fprintf(&b, "  %s: %s\n", vis.Escape(r.Node.Name), vis.Escape(r.Skipped))
		}
	}
	fmt.Fprintf(&b, "\n%s\n", vis.Escape(p.Why))
	if lv := largestRows(p); len(lv) > 0 {
		fmt.Fprintf(&b, "\nLargest value, %s, on each node's link (baseline; at burst in brackets):\n", plan.FormatBytes(p.Effective.MaxValueBytes))
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, r := range lv {
			line := fmt.Sprintf("  %s\t%s\t%s", vis.Escape(r.Node.Name), transfer(r.Largest), saturate(r.Largest))
			if p.Effective.LargePerSec > 0 {
				line += "\t" + busy(r.Largest, p)
			}
			fmt.Fprintln(tw, line)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(p.Notes) > 0 {
		b.WriteString("\nNotes:\n")
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "  - %s\n", vis.Escape(n))
		}
	}
	fmt.Fprintf(&b, "\nSources (catalog of %s; prices change, check before you buy):\n", vis.Escape(p.Catalog.Date))
	used := map[string]bool{}
	for _, r := range p.Rows {
		src := r.Node.Source
		switch {
		case r.PriceFlag:
			src += "; price: yours, from --price"
		case r.Priced && r.Quote != nil:
			q := r.Quote
			if _, ok := p.Catalog.Source(q.Source); ok {
				used[q.Source] = true
				src += fmt.Sprintf("; price: %s of %s, %s", q.Source, q.Date, q.Region)
				if q.Note != "" {
					src += " (" + q.Note + ")"
				}
			} else {
				src += "; price: the catalog's, gathered " + q.Date
			}
		}
		fmt.Fprintf(&b, "  %s (%s): %s\n", vis.Escape(r.Node.Name), vis.Escape(r.Node.Date), vis.Escape(src))
	}
	for _, s := range p.Catalog.Sources {
		if used[s.Key] {
			fmt.Fprintf(&b, "  price source %s (data of %s): %s\n", vis.Escape(s.Key), vis.Escape(s.Date), vis.Escape(s.Title))
		}
	}
	for _, pr := range p.Catalog.Providers {
		if d, ok := p.Discounts[pr.Name]; ok {
			fmt.Fprintf(&b, "  discount %s %s: %s\n", vis.Escape(pr.Name), vis.Escape(discountText(d)), vis.Escape(d.Source))
		}
	}
	seen := map[string]bool{}
	for _, r := range p.Rows {
		if seen[r.Provider.Name] {
			continue
		}
		seen[r.Provider.Name] = true
		for _, s := range r.Provider.Sources {
			fmt.Fprintf(&b, "  %s rule, %s\n", vis.Escape(r.Provider.Name), vis.Escape(s))
		}
	}
	if e := p.Effective; e.Scaling != nil && !e.ScalingDefault {
		fmt.Fprintf(&b, "  thread scaling: %s\n", vis.Escape(e.Scaling.Name))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func header(b *strings.Builder, p *plan.Plan) {
	c := p.Catalog
	fmt.Fprintf(b, "kura plan: node catalog of %s, prices in %s\n", vis.Escape(c.Date), vis.Escape(c.Currency))
	fmt.Fprintf(b, "%s\n", vis.Escape(pricingLine(p)))
	if p.Before != nil {
		fmt.Fprintf(b, "Workload as asked: %s\n", workload(p.Before.Effective))
		fmt.Fprintf(b, "With the what-if:  %s\n", workload(p.Effective))
	} else {
		fmt.Fprintf(b, "Workload: %s\n", workload(p.Effective))
	}
	e := p.Effective
	var what []string
	if e.CodecRatio > 0 && e.CodecRatio != 1 {
		c := fmt.Sprintf("codec ratio %.3g (bytes after / before)", e.CodecRatio)
		if e.CodecName != "" {
			c = fmt.Sprintf("codec ratio %.3g (%s)", e.CodecRatio, vis.Escape(e.CodecName))
		}
		what = append(what, c)
	}
	if e.GuardBytes > 0 {
		what = append(what, "value-size guard "+plan.FormatBytes(e.GuardBytes))
	}
	if e.ThreadsWhatIf > 0 {
		what = append(what, fmt.Sprintf("%d engine threads on every node", e.ThreadsWhatIf))
	}
	if len(what) > 0 {
		fmt.Fprintf(b, "What-if: %s\n", strings.Join(what, "; "))
	}
}

// pricingLine says which prices a plan uses: the engine, each provider's
// region, on demand or the discounts, and the 730-hour month.
func pricingLine(p *plan.Plan) string {
	var regions []string
	for _, pr := range p.Catalog.Providers {
		if r, ok := p.Regions[pr.Name]; ok && r != "" {
			regions = append(regions, pr.Name+" "+r)
		}
	}
	terms := "on demand"
	if len(p.Discounts) > 0 {
		var ds []string
		for _, pr := range p.Catalog.Providers {
			if d, ok := p.Discounts[pr.Name]; ok {
				ds = append(ds, pr.Name+" "+discountText(d))
			}
		}
		terms = "on demand less " + strings.Join(ds, ", ")
	}
	return fmt.Sprintf("Prices: %s engine; %s; %s; a month is %d hours.", p.EngineTitle(), strings.Join(regions, ", "), terms, plan.HoursPerMonth)
}

func discountText(d plan.Discount) string {
	if d.Term != "" {
		return fmt.Sprintf("%.0f%% (%s commitment)", 100*d.Fraction, d.Term)
	}
	return fmt.Sprintf("%.0f%% (yours)", 100*d.Fraction)
}

// workload describes the workload sized: data, traffic, bytes on the
// wire, CPU figure, replicas.
func workload(e plan.Effective) string {
	var parts []string
	if e.DataBytes > 0 {
		s := plan.FormatBytes(e.DataBytes) + " of data"
		if e.Keys > 0 {
			s += fmt.Sprintf(" in %s keys", count(float64(e.Keys)))
		}
		parts = append(parts, s)
	}
	if e.Ops() > 0 {
		parts = append(parts, fmt.Sprintf("%s ops/s at peak (%s reads, %s writes)", count(e.Ops()), count(e.ReadsPerSec), count(e.WritesPerSec)))
		parts = append(parts, fmt.Sprintf("%s Gbps in, %s Gbps out", gbpsValue(e.InBitsPerSec), gbpsValue(e.OutBitsPerSec)))
	}
	switch {
	case e.CPUSecondsOp > 0:
		parts = append(parts, fmt.Sprintf("%.3g µs CPU per op", e.CPUSecondsOp*1e6))
	case e.OpsPerThread > 0:
		parts = append(parts, fmt.Sprintf("%s ops/s per engine thread", count(e.OpsPerThread)))
	}
	if e.Replicas > 0 {
		r := "replicas"
		if e.Replicas == 1 {
			r = "replica"
		}
		parts = append(parts, fmt.Sprintf("%d %s per primary", e.Replicas, r))
	}
	if e.MaxValueBytes > 0 {
		parts = append(parts, "largest value "+plan.FormatBytes(e.MaxValueBytes))
	}
	return strings.Join(parts, "; ")
}

// nodeName is the row's node type, with the instance size of a capacity
// tier.
func nodeName(r plan.Row) string {
	if r.InstanceGiB > 0 {
		return fmt.Sprintf("%s %gGB", r.Node.Name, r.InstanceGiB)
	}
	return r.Node.Name
}

func asAsked(r plan.Row, p *plan.Plan) string {
	old, ok := p.Before.RowFor(r.Node.Name)
	if !ok || old.Skipped != "" {
		return "-"
	}
	if !old.Priced {
		return fmt.Sprint(old.Nodes)
	}
	return fmt.Sprintf("%d · %s", old.Nodes, p.Money(old.MonthlyCost))
}

func change(r plan.Row, p *plan.Plan) string {
	old, ok := p.Before.RowFor(r.Node.Name)
	if !ok || old.Skipped != "" || !old.Priced || !r.Priced || old.MonthlyCost == 0 {
		return "-"
	}
	d := r.MonthlyCost - old.MonthlyCost
	return fmt.Sprintf("%s (%s)", p.Signed(d), plan.Pct(d/old.MonthlyCost))
}

func gbpsValue(bits float64) string {
	g := bits / 1e9
	switch {
	case g == 0:
		return "0"
	case g < 0.001:
		return "<0.001"
	}
	return fmt.Sprintf("%.3g", g)
}

func nodes(r plan.Row, p *plan.Plan) string {
	if p.Effective.Replicas > 0 {
		return fmt.Sprintf("%d×%d", r.Shards, 1+p.Effective.Replicas)
	}
	return fmt.Sprint(r.Nodes)
}

func need(r plan.Row, c plan.Constraint) string {
	n := r.Needs[c]
	if !n.Checked {
		return "-"
	}
	return fmt.Sprintf("%d · %.0f%%", n.Nodes, 100*n.Utilisation)
}

func gbps(n plan.NodeType) string {
	base, burst := "?", "-"
	if n.BaselineGbps > 0 {
		base = fmt.Sprint(n.BaselineGbps)
	}
	if n.BurstGbps > 0 {
		burst = fmt.Sprint(n.BurstGbps)
	}
	return base + "/" + burst
}

func hourly(r plan.Row, p *plan.Plan) string {
	switch {
	case !r.Priced:
		return "none"
	case r.PriceFlag:
		return p.Price(r.HourlyPrice) + " yours"
	case r.Quote != nil:
		if _, ok := p.Catalog.Source(r.Quote.Source); ok {
			return p.Price(r.HourlyPrice) + " " + r.Quote.Source
		}
	}
	return p.Price(r.HourlyPrice) + " catalog"
}

func monthly(r plan.Row, p *plan.Plan) string {
	if !r.Priced {
		return "-"
	}
	return p.Money(r.MonthlyCost)
}

func largestRows(p *plan.Plan) []plan.Row {
	var out []plan.Row
	for _, r := range p.Rows {
		if r.Largest != nil {
			out = append(out, r)
		}
	}
	return out
}

func transfer(lv *plan.LargeValue) string {
	s := duration(lv.Seconds)
	if lv.BurstSeconds > 0 {
		s += " (" + duration(lv.BurstSeconds) + ")"
	}
	return s
}

func saturate(lv *plan.LargeValue) string {
	return fmt.Sprintf("%s a second fill the link", count3(lv.PerSecToSaturate))
}

func busy(lv *plan.LargeValue, p *plan.Plan) string {
	if p.Effective.LargePerSec == 0 {
		return ""
	}
	s := fmt.Sprintf("at %s/s: link %.0f%% busy", count3(p.Effective.LargePerSec), 100*lv.Utilisation)
	if lv.Utilisation > 1 {
		s += fmt.Sprintf(", the queue grows %.2f s every second", lv.Utilisation-1)
	}
	return s
}

func duration(sec float64) string {
	switch {
	case sec >= 1:
		return fmt.Sprintf("%.2f s", sec)
	case sec >= 1e-3:
		return fmt.Sprintf("%.3g ms", sec*1e3)
	default:
		return fmt.Sprintf("%.3g µs", sec*1e6)
	}
}

// count prints a whole count with thousands separators.
func count(v float64) string { return units.Group(fmt.Sprintf("%.0f", v)) }

// count3 prints a rate with three significant digits.
func count3(v float64) string {
	if v >= 1000 {
		return count(v)
	}
	return fmt.Sprintf("%.3g", v)
}
