package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/kuracache/kura/internal/vis"
	"github.com/kuracache/kura/plan"
)

// Colours per binding constraint (Okabe-Ito, colour-blind safe).
var bindColour = [3]string{"#0072B2", "#E69F00", "#009E73"}

// lineColours for the cost-versus-traffic lines.
var lineColours = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#000000"}

const (
	chartW, chartH = 760, 330
	padL, padR     = 80, 30
	padT, padB     = 30, 58
)

// WriteHTML writes a self-contained page: the table, the cheapest choice
// and why, a chart of node count against traffic with the memory-,
// CPU- and network-bound regions, monthly cost against traffic, monthly
// cost per node type, the largest-value check, notes and sources. The
// charts are inline SVG; there is no script and nothing is fetched.
// points is the output of plan.Traffic for the same input; it may be nil.
func WriteHTML(w io.Writer, p *plan.Plan, points []plan.TrafficPoint) error {
	var b strings.Builder
	title := "kura plan: node count, binding constraint and monthly cost"
	b.WriteString("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>")
	b.WriteString(esc(title))
	b.WriteString(`</title><style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1150px}
h1{font-size:20px} h2{font-size:16px;margin-top:30px}
table{border-collapse:collapse;margin-top:8px;font-size:12px} td,th{padding:4px 9px;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left} .l{text-align:left} .cheap{background:#eef6ee}
svg text{font:12px system-ui,sans-serif} .note{color:#555} .sw{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:-1px}
code{background:#f4f4f4;padding:1px 4px}
</style></head><body>
`)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(title))
	var head strings.Builder
	header(&head, p)
	for _, line := range strings.Split(strings.TrimPrefix(strings.TrimSpace(head.String()), "kura plan: "), "\n") {
		fmt.Fprintf(&b, "<p>%s</p>\n", html.EscapeString(line)) // header escaped its strings (vis.Escape)
	}
	fmt.Fprintf(&b, "<p id=\"summary\">%s</p>\n", esc(p.Why))

	b.WriteString("<h2>Node types, fewest nodes first</h2>\n<table id=\"plan\"><tr><th>node type</th><th>nodes</th><th>binds</th><th>memory</th><th>CPU</th><th>network</th><th>baseline / burst Gbps</th><th>per hour</th><th>per month</th></tr>\n")
	for i, r := range p.Rows {
		if r.Skipped != "" {
			continue
		}
		cls := ""
		if i == p.Fewest {
			cls = ` class="cheap"`
		}
		fmt.Fprintf(&b, "<tr%s><td>%s</td><td>%s</td><td class=l><span class=sw style=\"background:%s;margin-left:0\"></span>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
			cls, esc(r.Node.Name), esc(nodes(r, p)), bindColour[r.Binding], r.Binding,
			esc(need(r, plan.Memory)), esc(need(r, plan.CPU)), esc(need(r, plan.Network)), esc(gbps(r.Node)), esc(hourly(r, p)), esc(monthly(r, p)))
	}
	b.WriteString("</table>\n<p class=note>Memory, CPU, network: the nodes that constraint alone needs · the share of its ceiling used at the planned count (100% minus that is the headroom). A dash: not checked, see the notes. A price is the catalog's (dated, its source under Sources) or yours (--price); not found: no public price, so no cost.</p>\n")
	var skipped []string
	for _, r := range p.Rows {
		if r.Skipped != "" {
			skipped = append(skipped, esc(r.Node.Name)+": "+esc(r.Skipped))
		}
	}
	if len(skipped) > 0 {
		b.WriteString("<p class=note>Not sized: " + strings.Join(skipped, "; ") + "</p>\n")
	}

	legend := func() {
		b.WriteString("<p>")
		for c, name := range []string{"memory-bound", "CPU-bound", "network-bound"} {
			fmt.Fprintf(&b, "<span class=sw style=\"background:%s\"></span>%s", bindColour[c], name)
		}
		b.WriteString("</p>\n")
	}
	if focus := focusRow(p); focus != "" && len(points) > 1 {
		fmt.Fprintf(&b, "<h2>Nodes against traffic: %s</h2>\n", esc(focus))
		b.WriteString("<p class=note>The data stays as it is; the peak traffic is multiplied. Shaded regions show which constraint sets the node count.</p>\n")
		legend()
		nodesChart(&b, points, focus)
		if names := pricedNames(p, 5); len(names) > 0 {
			b.WriteString("<h2>Monthly cost against traffic</h2>\n")
			costChart(&b, points, names)
		}
	}
	if priced := pricedRows(p); len(priced) > 0 {
		b.WriteString("<h2>Monthly cost per node type at today's peak</h2>\n")
		legend()
		costBars(&b, p, priced)
	}
	if lv := largestRows(p); len(lv) > 0 {
		fmt.Fprintf(&b, "<h2>Largest value, %s, on each node's link</h2>\n<table id=\"largest\"><tr><th>node type</th><th>one transfer at baseline (burst)</th><th>transfers a second that fill the link</th>", esc(plan.FormatBytes(p.Effective.MaxValueBytes)))
		rate := p.Effective.LargePerSec > 0
		if rate {
			b.WriteString("<th class=l>at peak</th>")
		}
		b.WriteString("</tr>\n")
		for _, r := range lv {
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td>", esc(r.Node.Name), esc(transfer(r.Largest)), esc(count3(r.Largest.PerSecToSaturate)))
			if rate {
				fmt.Fprintf(&b, "<td class=l>%s</td>", esc(busy(r.Largest, p)))
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</table>\n")
	}
	if len(p.Notes) > 0 {
		b.WriteString("<h2>Notes</h2>\n<ul>\n")
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "<li>%s</li>\n", esc(n))
		}
		b.WriteString("</ul>\n")
	}
	fmt.Fprintf(&b, "<h2>Sources</h2>\n<p id=\"catalog-date\">Node catalog of %s, prices in %s. %s Prices change: check the provider's page before you buy.</p>\n<table><tr><th>node type</th><th>gathered</th><th class=l>source</th></tr>\n",
		esc(p.Catalog.Date), esc(p.Catalog.Currency), esc(pricingLine(p)))
	for _, r := range p.Rows {
		src := r.Node.Source
		switch {
		case r.PriceFlag:
			src += "; price from --price"
		case r.Priced:
			src += "; price: " + r.PriceOrigin(p.Catalog)
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td class=l>%s</td></tr>\n", esc(r.Node.Name), esc(r.Node.Date), esc(src))
	}
	b.WriteString("</table>\n")
	seen := map[string]bool{}
	for _, r := range p.Rows {
		if seen[r.Provider.Name] || len(r.Provider.Sources) == 0 {
			continue
		}
		seen[r.Provider.Name] = true
		fmt.Fprintf(&b, "<p class=note>%s rules:</p><ul class=note>\n", esc(r.Provider.Name))
		for _, s := range r.Provider.Sources {
			fmt.Fprintf(&b, "<li>%s</li>\n", esc(s))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// esc makes a string safe for the page: catalog entries, --price names and
// notes are the user's (vis.HTML: controls and bidi overrides made
// visible, then HTML-escaped).
func esc(s string) string { return vis.HTML(s) }

// focusRow is the node type the nodes-against-traffic chart follows: the
// cheapest, else the first sized row.
func focusRow(p *plan.Plan) string {
	if p.Cheapest >= 0 {
		return p.Rows[p.Cheapest].Node.Name
	}
	for _, r := range p.Rows {
		if r.Skipped == "" {
			return r.Node.Name
		}
	}
	return ""
}

func pricedRows(p *plan.Plan) []plan.Row {
	var out []plan.Row
	for _, r := range p.Rows {
		if r.Priced && r.Skipped == "" {
			out = append(out, r)
		}
	}
	return out
}

func pricedNames(p *plan.Plan, n int) []string {
	var out []string
	for _, r := range pricedRows(p) {
		if len(out) == n {
			break
		}
		out = append(out, r.Node.Name)
	}
	return out
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*e {
			return m * e
		}
	}
	return 10 * e
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}

// axes draws the frame, y grid and x tick labels; it returns the x of
// each point and a function mapping a y value to pixels.
func axes(b *strings.Builder, id string, xs []string, ymax float64, xlabel, ylabel string, yfmt func(float64) string) ([]float64, func(float64) float64) {
	fmt.Fprintf(b, "<svg id=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" xmlns=\"http://www.w3.org/2000/svg\">\n", id, chartW, chartH, chartW, chartH)
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	y := func(v float64) float64 { return float64(padT) + plotH*(1-v/ymax) }
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>", padL, chartW-padR, y(v), y(v))
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", padL-6, y(v)+4, esc(yfmt(v)))
	}
	pos := make([]float64, len(xs))
	for i, lab := range xs {
		pos[i] = float64(padL) + plotW*(float64(i)+0.5)/float64(len(xs))
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", pos[i], chartH-padB+16, esc(lab))
	}
	fmt.Fprintf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#999\"/><line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n",
		padL, chartW-padR, chartH-padB, chartH-padB, padL, padL, padT, chartH-padB)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", padL+int(plotW/2), chartH-12, esc(xlabel))
	fmt.Fprintf(b, "<text transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\">%s</text>\n", padT+int(plotH/2), esc(ylabel))
	return pos, y
}

func trafficLabels(points []plan.TrafficPoint) []string {
	xs := make([]string, len(points))
	for i, pt := range points {
		xs[i] = short(pt.Ops)
	}
	return xs
}

// nodesChart is node count against traffic for one node type, each
// traffic level shaded by the constraint that binds there.
func nodesChart(b *strings.Builder, points []plan.TrafficPoint, name string) {
	ymax := 1.0
	rows := make([]plan.Row, len(points))
	ok := make([]bool, len(points))
	for i, pt := range points {
		rows[i], ok[i] = pt.Plan.RowFor(name)
		ok[i] = ok[i] && rows[i].Skipped == ""
		if ok[i] {
			ymax = math.Max(ymax, float64(rows[i].Nodes))
		}
	}
	ymax = niceMax(ymax)
	xs, y := axes(b, "nodes-vs-traffic", trafficLabels(points), ymax, "peak ops/s (data unchanged)", "nodes", func(v float64) string { return fmt.Sprintf("%.3g", v) })
	step := float64(chartW-padL-padR) / float64(len(points))
	for i := range points {
		if !ok[i] {
			continue
		}
		fmt.Fprintf(b, "<rect class=\"region-%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" fill-opacity=\"0.13\"><title>%s-bound</title></rect>\n",
			strings.ToLower(rows[i].Binding.String()), xs[i]-step/2, padT, step, chartH-padT-padB, bindColour[rows[i].Binding], rows[i].Binding)
	}
	var pts []string
	for i := range points {
		if ok[i] {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs[i], y(float64(rows[i].Nodes))))
		}
	}
	fmt.Fprintf(b, "<polyline fill=\"none\" stroke=\"#333\" stroke-width=\"2\" points=\"%s\"/>\n", strings.Join(pts, " "))
	for i, pt := range points {
		if !ok[i] {
			continue
		}
		fmt.Fprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"><title>%s ops/s: %d nodes, %s-bound</title></circle>\n",
			xs[i], y(float64(rows[i].Nodes)), bindColour[rows[i].Binding], count(pt.Ops), rows[i].Nodes, rows[i].Binding)
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n", xs[i], y(float64(rows[i].Nodes))-9, rows[i].Nodes)
	}
	b.WriteString("</svg>\n")
}

// costChart is monthly cost against traffic, one line per node type.
func costChart(b *strings.Builder, points []plan.TrafficPoint, names []string) {
	ymax := 0.0
	for _, pt := range points {
		for _, n := range names {
			if r, ok := pt.Plan.RowFor(n); ok && r.Priced {
				ymax = math.Max(ymax, r.MonthlyCost)
			}
		}
	}
	ymax = niceMax(ymax)
	cur := points[0].Plan
	xs, y := axes(b, "cost-vs-traffic", trafficLabels(points), ymax, "peak ops/s (data unchanged)", "per month", func(v float64) string { return short(v) })
	for k, n := range names {
		col := lineColours[k%len(lineColours)]
		var pts []string
		for i, pt := range points {
			if r, ok := pt.Plan.RowFor(n); ok && r.Priced {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs[i], y(r.MonthlyCost)))
			}
		}
		fmt.Fprintf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"><title>%s</title></polyline>\n", col, strings.Join(pts, " "), esc(n))
		for i, pt := range points {
			if r, ok := pt.Plan.RowFor(n); ok && r.Priced {
				fmt.Fprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s at %s ops/s: %s</title></circle>\n", xs[i], y(r.MonthlyCost), col, esc(n), count(pt.Ops), esc(cur.Money(r.MonthlyCost)))
			}
		}
		fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"3\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n", padL+10, padT+6+16*k, col, padL+26, padT+11+16*k, esc(n))
	}
	b.WriteString("</svg>\n")
}

// costBars is one bar per priced node type, coloured by its binding
// constraint.
func costBars(b *strings.Builder, p *plan.Plan, rows []plan.Row) {
	const rowH, labelW, right = 24, 190, 290
	h := padT + rowH*len(rows) + 20
	fmt.Fprintf(b, "<svg id=\"cost-per-type\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" xmlns=\"http://www.w3.org/2000/svg\">\n", chartW, h, chartW, h)
	max := 0.0
	for _, r := range rows {
		max = math.Max(max, r.MonthlyCost)
	}
	if max == 0 {
		max = 1
	}
	width := float64(chartW - labelW - right)
	for i, r := range rows {
		y := padT + i*rowH
		wpx := math.Max(1, width*r.MonthlyCost/max)
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", labelW-8, y+15, esc(r.Node.Name))
		fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s-bound</title></rect>", labelW, y+3, wpx, rowH-6, bindColour[r.Binding], r.Binding)
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\">%s · %s nodes · %s-bound</text>\n", float64(labelW)+wpx+6, y+15, esc(p.Money(r.MonthlyCost)), esc(nodes(r, p)), r.Binding)
	}
	b.WriteString("</svg>\n")
}
