package codecfit

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/kuracache/kura/internal/units"
	"github.com/kuracache/kura/internal/vis"
)

// WriteJSON writes the report as indented JSON (schema kura.codecs/v1).
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Schema string `json:"schema"`
		*Report
	}{"kura.codecs/v1", r})
}

// WriteText writes the table and the recommendation for a terminal.
func WriteText(w io.Writer, r *Report) error {
	r = visible(r)
	fmt.Fprintf(w, "%d values: dictionaries trained on %d, measured on the other %d (%s of JSON, median %d B serialized)\n",
		r.Values, r.TrainValues, r.TestValues, humanBytes(r.JSONBytes), r.RawP50)
	fmt.Fprintf(w, "CPU times are this process's CPU per value on %s.\n\n", r.Machine)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "candidate\tbytes\tvs JSON\tvs msgpack+snappy\tp50 B\tp99 B\tenc µs\tdec µs\tenc MB/s\tdec MB/s\tallocs enc/dec\tper 1,000 reads\tpareto\t")
	for _, x := range sortByBytes(r.Results) {
		mark := ""
		if x.Name == r.Recommended {
			mark = " *"
		}
		p := ""
		if x.Pareto {
			p = "yes"
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%.3f\t%.3f\t%d\t%d\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f/%.0f\t%s\t%s\t\n",
			x.Name, mark, x.Bytes, x.VsJSON, x.VsSeed, x.P50, x.P99, x.EncodeNs/1e3, x.DecodeNs/1e3,
			x.EncodeMBs, x.DecodeMBs, x.EncodeAllocs, x.DecodeAllocs, humanBytes(x.NetPer1000Reads), p)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nrecommended: %s\n  %s\n", r.Recommended, r.Reason)
	if x, ok := r.Result(r.Recommended); ok && x.Go != "" {
		fmt.Fprintf(w, "  configure: %s\n", x.Go)
	}
	_, err := fmt.Fprintln(w, "MB/s are JSON-equivalent megabytes per second, so rows compare directly.")
	return err
}

// humanBytes prints a size as every kura command does (internal/units:
// decimal units, 1.3 MB).
func humanBytes(n int64) string { return units.FormatBytes(float64(n)) }

// point is one candidate on the chart.
type point struct {
	X, Y           float64
	Name, Label    string
	Pareto, Chosen bool
	Reference      bool
	// Text is where the name is drawn (vis.PlaceLabels: no two names
	// overlap, none covers a point); Leader joins a name set apart to
	// its point.
	Text   *vis.Placed
	Leader bool
}

// WriteHTML writes a self-contained HTML report: the recommendation, a
// bytes-versus-CPU chart (SVG, no script) with the Pareto frontier drawn
// through the candidates nothing beats, and the table.
func WriteHTML(w io.Writer, r *Report) error {
	const width, height, pad = 720.0, 420.0, 60.0
	var maxX, maxY float64
	for _, x := range r.Results {
		maxX = math.Max(maxX, (x.EncodeNs+x.DecodeNs)/1e3)
		maxY = math.Max(maxY, float64(x.Bytes)/float64(max(1, r.TestValues)))
	}
	maxX, maxY = niceCeil(maxX), niceCeil(maxY)
	r = visible(r)
	var pts []point
	var frontier []point
	for _, x := range sortByCPU(r.Results) {
		p := point{
			X:    pad + (x.EncodeNs+x.DecodeNs)/1e3/maxX*(width-2*pad),
			Y:    height - pad - float64(x.Bytes)/float64(max(1, r.TestValues))/maxY*(height-2*pad),
			Name: x.Name, Pareto: x.Pareto, Chosen: x.Name == r.Recommended, Reference: x.Reference,
			Label: fmt.Sprintf("%s: %.0f B/value, %.1f µs encode+decode", x.Name, float64(x.Bytes)/float64(max(1, r.TestValues)), (x.EncodeNs+x.DecodeNs)/1e3),
		}
		pts = append(pts, p)
		if x.Pareto {
			frontier = append(frontier, p)
		}
	}
	// Names for the frontier, the recommendation and the references,
	// placed so that none overprints another or a point: the chosen one
	// first, then the references, then the frontier; a name with no free
	// place is left to the point's tooltip and the table.
	var order []int
	for pass := 0; pass < 3; pass++ {
		for i, p := range pts {
			if (pass == 0 && p.Chosen) || (pass == 1 && !p.Chosen && p.Reference) || (pass == 2 && !p.Chosen && !p.Reference && p.Pareto) {
				order = append(order, i)
			}
		}
	}
	labels := make([]vis.Label, len(order))
	for j, i := range order {
		labels[j] = vis.Label{AX: pts[i].X, AY: pts[i].Y, Text: pts[i].Name}
	}
	// Unlabelled points are obstacles too.
	var others []vis.Label
	for _, p := range pts {
		if !p.Chosen && !p.Reference && !p.Pareto {
			others = append(others, vis.Label{AX: p.X, AY: p.Y})
		}
	}
	placed := vis.PlaceLabels(append(labels, others...), vis.Rect{X: pad + 2, Y: pad - 12, W: width - pad - 6, H: height - 2*pad + 10}, 11, 7)
	for j, i := range order {
		if placed[j].Shown {
			pts[i].Text, pts[i].Leader = &placed[j], placed[j].Leader
		}
	}
	var line strings.Builder
	for i, p := range frontier {
		if i > 0 {
			line.WriteByte(' ')
		}
		fmt.Fprintf(&line, "%.1f,%.1f", p.X, p.Y)
	}
	type tick struct {
		Pos   float64
		Label string
	}
	var xt, yt []tick
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		xt = append(xt, tick{pad + f*(width-2*pad), trimFloat(f * maxX)})
		yt = append(yt, tick{height - pad - f*(height-2*pad), trimFloat(f * maxY)})
	}
	data := struct {
		R              *Report
		Rows           []Result
		Points         []point
		Frontier       string
		XTicks, YTicks []tick
		W, H, Pad      float64
		Go             string
		OffFrontier    bool
	}{R: r, Rows: sortByBytes(r.Results), Points: pts, Frontier: line.String(), XTicks: xt, YTicks: yt, W: width, H: height, Pad: pad}
	if x, ok := r.Result(r.Recommended); ok {
		data.Go, data.OffFrontier = x.Go, !x.Pareto
	}
	return htmlReport.Execute(w, data)
}

// visible returns a copy of r whose strings (candidate names, the reason,
// the machine, the configuration snippet, which names a --dict-out file)
// have every control and bidi character made visible (vis.Escape): the
// template escapes HTML, not a right-to-left override.
func visible(r *Report) *Report {
	c := *r
	c.Recommended, c.Reason, c.Machine = vis.Escape(r.Recommended), vis.Escape(r.Reason), vis.Escape(r.Machine)
	c.Results = make([]Result, len(r.Results))
	for i, x := range r.Results {
		x.Name, x.Go = vis.Escape(x.Name), vis.Escape(x.Go)
		c.Results[i] = x
	}
	return &c
}

func sortByCPU(rs []Result) []Result {
	out := sortByBytes(rs)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].EncodeNs+out[j].DecodeNs < out[j-1].EncodeNs+out[j-1].DecodeNs; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

var htmlReport = template.Must(template.New("report").Funcs(template.FuncMap{
	"f3":  func(f float64) string { return fmt.Sprintf("%.3f", f) },
	"f1":  func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"f0":  func(f float64) string { return fmt.Sprintf("%.0f", f) },
	"us":  func(f float64) string { return fmt.Sprintf("%.1f", f/1e3) },
	"hb":  humanBytes,
	"sub": func(a, b float64) float64 { return a - b },
	"add": func(a, b float64) float64 { return a + b },
	// lx, ly: the end of a name's leader line, the nearest corner of its box.
	"lx": func(p *vis.Placed) float64 { return math.Max(p.Box.X, math.Min(p.AX, p.Box.X+p.Box.W)) },
	"ly": func(p *vis.Placed) float64 { return math.Max(p.Box.Y, math.Min(p.AY, p.Box.Y+p.Box.H)) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kura codecs: which codec fits these values</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}tr.chosen{background:#e8f4e8;font-weight:bold}tr.ref{color:#777}
.reason{background:#f5f5f5;padding:1em;border-left:4px solid #3a3}svg text{font-size:11px}
</style></head><body>
<h1>Which codec fits these values</h1>
<p>{{.R.Values}} values: dictionaries trained on {{.R.TrainValues}}, measured on the other {{.R.TestValues}}
({{hb .R.JSONBytes}} of JSON, median {{.R.RawP50}} B serialized). CPU per value on {{.R.Machine}}.</p>
<div class="reason" id="recommendation"><strong>Recommended: <span id="recommended">{{.R.Recommended}}</span></strong><br>{{.R.Reason}}
{{if .Go}}<br><code>{{.Go}}</code>{{end}}</div>
<h2>Bytes vs CPU</h2>
<svg id="pareto" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {{.W}} {{.H}}" width="{{.W}}" height="{{.H}}" style="max-width:100%;height:auto" role="img" aria-label="stored bytes per value against encode plus decode CPU per value">
<rect x="0" y="0" width="{{.W}}" height="{{.H}}" fill="#fff"/>
<line x1="{{.Pad}}" y1="{{sub .H .Pad}}" x2="{{sub .W .Pad}}" y2="{{sub .H .Pad}}" stroke="#333"/>
<line x1="{{.Pad}}" y1="{{.Pad}}" x2="{{.Pad}}" y2="{{sub .H .Pad}}" stroke="#333"/>
{{range .XTicks}}<text x="{{.Pos}}" y="{{sub $.H 40}}" text-anchor="middle">{{.Label}}</text>{{end}}
{{range .YTicks}}<text x="{{sub $.Pad 6}}" y="{{add .Pos 4}}" text-anchor="end">{{.Label}}</text>{{end}}
<text x="{{sub .W .Pad}}" y="{{sub .H 20}}" text-anchor="end">encode + decode CPU per value (µs)</text>
<text x="10" y="{{sub .Pad 20}}">stored bytes per value</text>
<polyline class="frontier" points="{{.Frontier}}" fill="none" stroke="#3a3" stroke-width="2" stroke-dasharray="5,3"/>
{{range $p := .Points}}<g class="point{{if .Pareto}} pareto{{end}}{{if .Chosen}} chosen{{end}}" data-name="{{.Name}}"><title>{{.Label}}</title>
<circle cx="{{.X}}" cy="{{.Y}}" r="{{if .Chosen}}7{{else}}5{{end}}" fill="{{if .Chosen}}#3a3{{else if .Reference}}#999{{else if .Pareto}}#36c{{else}}#bbb{{end}}"/>
{{with .Text}}{{if $p.Leader}}<line class="leader" x1="{{$p.X}}" y1="{{$p.Y}}" x2="{{f1 (lx .)}}" y2="{{f1 (ly .)}}" stroke="#999" stroke-width="0.8"/>{{end}}<text class="label" x="{{f1 .X}}" y="{{f1 .Y}}">{{$p.Name}}</text>{{end}}</g>
{{end}}</svg>
<p>Dashed line: the Pareto frontier (no other candidate is both smaller and cheaper). Green: the recommendation{{if .OffFrontier}}, <span id="off-frontier">off the frontier for the reason above (the candidate that beats it is a reference or a dictionary that does not earn its keep)</span>{{end}}. Grey: references (JSON, and msgpack+snappy as Go services commonly write cache values). Labels name the frontier, the recommendation and the references; hover any point for its figures.</p>
<h2>All candidates</h2>
<table id="results"><tr><th>candidate</th><th>bytes</th><th>vs JSON</th><th>vs msgpack+snappy</th><th>p50 B</th><th>p90 B</th><th>p99 B</th>
<th>encode µs</th><th>decode µs</th><th>encode MB/s</th><th>decode MB/s</th><th>allocs enc/dec</th><th>network per 1,000 reads</th><th>memory per 1M values</th><th>Pareto</th></tr>
{{range .Rows}}<tr class="{{if eq .Name $.R.Recommended}}chosen{{end}}{{if .Reference}} ref{{end}}"><td>{{.Name}}</td><td>{{.Bytes}}</td><td>{{f3 .VsJSON}}</td><td>{{f3 .VsSeed}}</td>
<td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td><td>{{us .EncodeNs}}</td><td>{{us .DecodeNs}}</td><td>{{f0 .EncodeMBs}}</td><td>{{f0 .DecodeMBs}}</td>
<td>{{f1 .EncodeAllocs}}/{{f1 .DecodeAllocs}}</td><td>{{hb .NetPer1000Reads}}</td><td>{{hb .MemoryPerMillion}}</td><td>{{if .Pareto}}yes{{end}}</td></tr>
{{end}}</table>
<p>MB/s are JSON-equivalent megabytes per second, so rows compare directly. Memory and network are value bytes only (servers add their per-key overhead).</p>
</body></html>
`))
