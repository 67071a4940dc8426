// Package report prints a plan.Plan: a text table for the terminal and a
// self-contained HTML page with SVG charts. It is a consumer of the
// model's results and holds no sizing logic of its own.
package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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
	fmt.Fprintln(tw, "NODE TYPE\tNODES\tBINDS\tMEMORY\tCPU\tNETWORK\tBASE/BURST Gbps\tPER HOUR\tPER MONTH")
	var skipped []plan.Row
	for _, r := range p.Rows {
		if r.Skipped != "" {
			skipped = append(skipped, r)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", vis.Escape(r.Node.Name), nodes(r, p), r.Binding,
			need(r, plan.Memory), need(r, plan.CPU), need(r, plan.Network), gbps(r.Node), vis.Escape(hourly(r, p)), vis.Escape(monthly(r, p))) // the currency is the catalog's text
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("MEMORY, CPU, NETWORK: nodes that constraint alone needs · share of its ceiling used at the planned count\n")
	b.WriteString("(100% minus that is the headroom left); - : not checked, see the notes. Ranked by nodes needed.\n")
	b.WriteString("PER HOUR: the catalog's price (dated, source below) or yours (--price); not found: no public price, no cost.\n")
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
	for _, r := range p.Rows {
		src := r.Node.Source
		if r.PriceFlag {
			src += "; price: yours, from --price"
		} else if r.Priced {
			src += "; price: the catalog's, gathered " + r.Node.Date
		}
		fmt.Fprintf(&b, "  %s (%s): %s\n", vis.Escape(r.Node.Name), vis.Escape(r.Node.Date), vis.Escape(src))
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
	c, e := p.Catalog, p.Effective
	fmt.Fprintf(b, "kura plan: node catalog of %s, prices in %s for %s\n", vis.Escape(c.Date), vis.Escape(c.Currency), vis.Escape(c.PriceRegion))
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
	fmt.Fprintf(b, "Workload: %s\n", strings.Join(parts, "; "))
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
	if !r.Priced {
		return "not found"
	}
	if r.PriceFlag {
		return p.Price(r.HourlyPrice) + " yours"
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
func count(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && c != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// count3 prints a rate with three significant digits.
func count3(v float64) string {
	if v >= 1000 {
		return count(v)
	}
	return fmt.Sprintf("%.3g", v)
}
