package demo

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"github.com/kuracache/kura/internal/units"
)

// WriteHTML writes the report as one self-contained HTML page: per
// scenario the problem, kura's answer, its tables, one inline SVG chart per
// measured quantity, the count checks, and the commands that reproduce the
// numbers; at the top, the machine they were measured on. There is no
// script and nothing is fetched.
func (r *Report) WriteHTML(w io.Writer) error {
	return htmlTmpl.Execute(w, r)
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"chart":  chartSVG,
	"status": func(s Status) string { return strings.ReplaceAll(string(s), " ", "-") },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>kura demo: cache problems, reproduced and fixed</title>
<style>
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1060px;padding:24px;color:#1d2330;background:#fafbfc}
h1{font-size:26px;margin:0 0 4px}
h2{font-size:20px;margin:0 0 6px}
.machine{color:#556;font-size:13px}
table.summary{margin:14px 0 20px;background:#fff;border:1px solid #dde3ea;font-size:13.5px;width:100%}
table.summary td,table.summary th{white-space:normal;text-align:left;vertical-align:top}
table.summary td:nth-child(2){white-space:nowrap}
table.summary a{color:#0b4f8a;font-weight:600;text-decoration:none}
section{background:#fff;border:1px solid #dde3ea;border-radius:10px;padding:18px 20px;margin:0 0 20px}
.badge{display:inline-block;font-size:12px;padding:2px 8px;border-radius:10px;margin-left:8px;vertical-align:middle;font-weight:600}
.badge.ran{background:#dff5e3;color:#17612a}.badge.partial{background:#fff3d6;color:#7a5200}
.badge.skipped,.badge.not-built-yet{background:#eceff3;color:#444}
.problem{margin:6px 0}.answer{margin:6px 0;color:#0b4f8a}
table{border-collapse:collapse;margin:10px 0;font-size:13px;max-width:100%}
th,td{border-bottom:1px solid #e6e9ee;padding:4px 8px;text-align:right}
@media (max-width:700px){th,td{overflow-wrap:anywhere;padding:3px 3px}table{font-size:11px}
table.summary,table.summary tbody,table.summary tr,table.summary td,table.summary th{display:block}table.summary tr:first-child{display:none}table.summary td{border:0;padding:2px 6px}table.summary tr{border-bottom:1px solid #e6e9ee;padding:4px 0}}
th:first-child,td:first-child{text-align:left}
caption{text-align:left;font-weight:600;padding:4px 0}
.charts{display:flex;flex-wrap:wrap;gap:14px}
.chart{border:1px solid #eef0f3;border-radius:8px;padding:6px;width:480px;max-width:100%;box-sizing:border-box}
.chart svg{display:block;width:100%;height:auto}
.ctitle{font-size:13px;font-weight:600;margin:0 0 2px}.cnote{font-size:12px;color:#7a5200;margin:0 0 4px}
section,p,li,caption,.machine{overflow-wrap:break-word}
.checks{list-style:none;padding:0;margin:8px 0;font-size:13px}
.checks li.ok::before{content:"✔ ";color:#17612a}.checks li.bad::before{content:"✘ ";color:#b00020}
.missing{color:#7a5200;font-size:13px}
.notes{font-size:13px;color:#444}
pre{background:#f3f5f8;padding:8px 10px;border-radius:6px;font-size:12.5px;white-space:pre-wrap;overflow-wrap:anywhere}
@media (max-width:600px){body{padding:10px}section{padding:12px 10px}}
</style></head><body>
<h1>kura demo: cache problems, reproduced and fixed</h1>
<div class="machine">Measured on {{.Machine}} · {{printf "%.0f" .Seconds}} s ({{printf "%.0f" .SetupSeconds}} s starting the servers and loading the data; building kura before it not counted) · started {{.Started.Format "2006-01-02 15:04 UTC"}} · <code>{{.Command}}</code></div>
<div class="machine">Servers: {{range $i, $s := .Servers}}{{if $i}}; {{end}}{{$s}}{{end}}</div>
<table class="summary"><tr><th>problem</th><th>status</th><th>measured here</th></tr>
{{range .Scenarios}}<tr><td><a href="#{{.Name}}">{{.Title}}</a></td><td><span class="badge {{status .Status}}">{{.Status}}</span></td><td>{{if .Headline}}{{.Headline}}{{else}}{{.Reason}}{{end}}</td></tr>
{{end}}</table>
{{range .Scenarios}}<section id="{{.Name}}" data-status="{{.Status}}">
<h2>{{.Title}}<span class="badge {{status .Status}}">{{.Status}}</span></h2>
<p class="problem"><b>Problem.</b> {{.Problem}}</p>
{{if .Reason}}<p class="missing"><b>{{.Status}}:</b> {{.Reason}}</p>{{end}}
{{if .Tables}}<p class="answer"><b>kura.</b> {{.Answer}}</p>{{end}}
{{if .Charts}}<div class="charts">{{range .Charts}}<div class="chart">{{chart .}}</div>{{end}}</div>{{end}}
{{range .Tables}}<table>{{if .Title}}<caption>{{.Title}}</caption>{{end}}
<tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</table>{{end}}
{{if .Checks}}<ul class="checks">{{range .Checks}}<li class="{{if .Holds}}ok{{else}}bad{{end}}">{{.What}}: {{.Before}} → {{.After}}</li>{{end}}</ul>{{end}}
{{range .Missing}}<p class="missing"><b>Not built yet:</b> {{.}}</p>{{end}}
{{if .Notes}}<div class="notes">{{range .Notes}}<p>{{.}}</p>{{end}}</div>{{end}}
{{if .Commands}}<div class="notes">Reproduce:</div><pre>{{range .Commands}}{{.}}
{{end}}</pre>{{end}}
</section>
{{end}}</body></html>
`))

// chartSVG draws a horizontal bar chart; kura's bars in blue, the others
// in grey. The title and the caveat are HTML above the drawing, so they
// wrap on a narrow screen instead of being clipped; the drawing scales to
// its box.
func chartSVG(c Chart) template.HTML {
	const (
		width  = 480
		labelW = 200
		barH   = 20
		gap    = 8
		top    = 6
	)
	height := top + len(c.Bars)*(barH+gap) + 6
	var maxV float64
	for _, b := range c.Bars {
		maxV = math.Max(maxV, b.Value)
	}
	if maxV <= 0 {
		maxV = 1
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<div class="ctitle">%s</div>`, template.HTMLEscapeString(c.Title))
	if c.Note != "" {
		fmt.Fprintf(&sb, `<div class="cnote">%s</div>`, template.HTMLEscapeString(c.Note))
	}
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" class="bars" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		width, height, width, height, template.HTMLEscapeString(c.Title))
	plotW := float64(width - labelW - 115)
	for i, b := range c.Bars {
		y := top + i*(barH+gap)
		w := plotW * b.Value / maxV
		if b.Value > 0 && w < 1 {
			w = 1
		}
		fill := "#9aa5b1"
		if b.Kura {
			fill = "#1f6feb"
		}
		fmt.Fprintf(&sb, `<text x="%d" y="%d" font-size="12" text-anchor="end" fill="#333">%s</text>`,
			labelW-6, y+barH-6, template.HTMLEscapeString(truncate(b.Label, 28)))
		fmt.Fprintf(&sb, `<rect class="bar" x="%d" y="%d" width="%.1f" height="%d" rx="3" fill="%s"><title>%s: %s</title></rect>`,
			labelW, y, w, barH, fill, template.HTMLEscapeString(b.Label), template.HTMLEscapeString(valueWithUnit(b.Value, c.Unit)))
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" font-size="12" fill="#333">%s</text>`,
			float64(labelW)+w+5, y+barH-6, template.HTMLEscapeString(valueWithUnit(b.Value, c.Unit)))
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String())
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// valueWithUnit prints a bar's value with its unit: sizes with the one
// byte formatter (decimal: 1.3 MB, as kura plan and the tables print
// them), and a count of 1 with the singular ("1 node", "1 row").
func valueWithUnit(v float64, unit string) string {
	if rest, ok := strings.CutPrefix(unit, "bytes"); ok {
		return strings.TrimSpace(units.FormatBytes(v) + rest)
	}
	if v == 1 {
		unit = singular(unit)
	}
	if unit == "" {
		return formatValue(v)
	}
	return formatValue(v) + " " + unit
}

// singular turns a plural unit into its singular, leaving rates ("/s")
// and "ms" alone.
func singular(unit string) string {
	if strings.HasSuffix(unit, "/s") || unit == "ms" || !strings.HasSuffix(unit, "s") {
		return unit
	}
	return strings.TrimSuffix(unit, "s")
}

// count is "1 node" or "12 nodes" for a plural unit.
func count(n int64, unit string) string {
	if n == 1 {
		return "1 " + singular(unit)
	}
	return fmt.Sprintf("%d %s", n, unit)
}

func nodeCount(n int) string { return count(int64(n), "nodes") }

// formatValue prints a count or a time; sizes go through valueWithUnit.
func formatValue(v float64) string {
	switch {
	case v >= 10_000_000:
		return fmt.Sprintf("%.0fM", v/1e6)
	case v >= 1_000_000:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 100_000:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
