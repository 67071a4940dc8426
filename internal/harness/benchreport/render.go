package benchreport

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kuracache/kura/internal/units"
	"github.com/kuracache/kura/internal/vis"
)

// ChartDir is where the page's charts live, relative to the repository.
const ChartDir = "docs/benchmarks/charts"

// ResultsPath is the results file, relative to the repository.
const ResultsPath = "docs/benchmarks/results.json"

// FullResultsPath is where a full-size run (make bench-report-full)
// writes its results; it does not touch the page or the charts.
const FullResultsPath = "docs/benchmarks/results-full.json"

// PagePath is the results page, relative to the repository.
const PagePath = "BENCHMARKS.md"

// Chart draws a section's chart: each ratio's median as a bar, its
// per-round spread as a whisker, its target as a red mark and the peer
// (1x) as a dashed line.
func Chart(s *Section) string {
	c := vis.BarChart{ID: "chart-" + s.ID, Title: s.Title + ": kura / peer, median and spread of the rounds", Format: Ratiof, Base: 1,
		Refs: []vis.Ref{{Value: 1, Label: "peer = 1x"}}}
	lo, hi := math.Inf(1), 0.0
	for _, q := range s.Ratios {
		if len(q.PerRound) == 0 {
			continue
		}
		name := q.Label
		if q.Kind == "size" {
			name += " (lower is better)"
		}
		b := vis.Bar{Name: name, Value: q.Median, Lo: q.Min, Hi: q.Max, Target: q.Target, Highlight: q.Met != nil && *q.Met}
		c.Bars = append(c.Bars, b)
		lo, hi = math.Min(lo, math.Min(q.Min, nonzero(q.Target, q.Min))), math.Max(hi, math.Max(q.Max, q.Target))
	}
	if hi/math.Max(lo, 1e-9) > 20 {
		c.Log = true
		c.Title = s.Title + ": kura / peer (log scale), median and spread"
	}
	if len(c.Bars) == 0 {
		c.Bars = []vis.Bar{{Name: "no result in this run", Value: 0}}
	}
	return c.SVG()
}

// HeadlineChart draws every headline ratio in one chart (the README's).
func HeadlineChart(r *Results) string {
	s := Section{ID: "headline", Title: "kura against its peers"}
	for _, id := range r.Headline {
		if q := r.Ratio(id); q != nil {
			sec, _, _ := strings.Cut(id, ".")
			c := *q
			if x := r.Section(sec); x != nil {
				c.Label = x.Title + ": " + q.Label
			}
			s.Ratios = append(s.Ratios, c)
		}
	}
	return Chart(&s)
}

func nonzero(v, or float64) float64 {
	if v == 0 {
		return or
	}
	return v
}

// Block is a section's generated part of the page: chart, tables, and
// the run's machine, load, date, commit and command.
func Block(r *Results, s *Section) string {
	var b strings.Builder
	fmt.Fprintf(&b, "![%s: kura / peer, median and spread of the rounds](%s/%s.svg)\n\n", s.Title, ChartDir, s.ID)
	if s.Error != "" {
		fmt.Fprintf(&b, "**This section's run failed** (%s); its figures are missing until `make bench-report` runs it again.\n\n", firstLine(s.Error))
	}
	for _, why := range s.Reruns {
		fmt.Fprintf(&b, "One run failed and was run again: `%s`.\n\n", strings.ReplaceAll(firstLine(why), "`", "'"))
	}
	if len(s.Rows) > 0 {
		// A target column only in a section with a row that has one (a
		// figure with no peer, held to a bound of its own).
		targets := slices.ContainsFunc(s.Rows, func(r Row) bool { return r.Target > 0 })
		if targets {
			b.WriteString("| contender | median | spread (min–max) | rounds | target |\n|---|---:|---:|---:|---|\n")
		} else {
			b.WriteString("| contender | median | spread (min–max) | rounds |\n|---|---:|---:|---:|\n")
		}
		for _, row := range s.Rows {
			name := row.Name
			if row.Kura {
				name = "**" + name + "**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %d |", name, Format(row.Median, row.Metric), spread(row), len(row.Samples))
			if targets {
				fmt.Fprintf(&b, " %s |", rowTargetText(row))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n| ratio (same rounds) | median | spread (min–max) | target |\n|---|---:|---:|---|\n")
		for _, q := range s.Ratios {
			fmt.Fprintf(&b, "| %s | **%s** | %s–%s | %s |\n", q.Label, Ratiof(q.Median), Ratiof(q.Min), Ratiof(q.Max), targetText(q))
		}
		b.WriteString("\n")
	}
	l := s.Load
	fmt.Fprintf(&b, "Run %s (%s s), commit `%s`, %d cores (%s), load average %.1f at the start and %.1f at the end "+
		"(1 min, on %d cores: above that the run waited for CPU, so read the ratios, measured within the table, before absolute figures). "+
		"Reproduce: `%s`.\n", day(s.Started), strconv.FormatFloat(s.Seconds, 'f', 0, 64), s.Commit, r.Machine.CPUs, r.Machine.CPU, l[0][0], l[1][0], r.Machine.CPUs, s.Command)
	return b.String()
}

// spread is a row's "min–max", the unit once when both share it.
func spread(r Row) string {
	a, b := Format(r.Min, r.Metric), Format(r.Max, r.Metric)
	if i, j := strings.LastIndexByte(a, ' '), strings.LastIndexByte(b, ' '); i > 0 && j > 0 && a[i:] == b[j:] {
		a = a[:i]
	}
	return a + "–" + b
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.ReplaceAll(s, "|", "/")
}

func day(rfc string) string {
	t, err := time.Parse(time.RFC3339, rfc)
	if err != nil {
		return rfc
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func targetText(q Ratio) string {
	if q.Target == 0 || q.Met == nil {
		return "—"
	}
	op := "≥"
	if q.Kind == "size" {
		op = "≤"
	}
	return judged(op+" "+Ratiof(q.Target), *q.Met, q.Analysis)
}

// rowTargetText is a row's target cell: its bound in its own unit.
func rowTargetText(r Row) string {
	if r.Target == 0 || r.Met == nil {
		return "—"
	}
	op := "≥"
	if r.Better == "lower" {
		op = "≤"
	}
	return judged(op+" "+Format(r.Target, r.Metric), *r.Met, r.Analysis)
}

// judged is a target cell: the target, met or missed, and where a miss
// is analysed.
func judged(target string, met bool, analysis string) string {
	if met {
		return target + ": met"
	}
	t := target + ": **missed**"
	if analysis != "" {
		t += fmt.Sprintf(" ([why](%s))", analysis)
	}
	return t
}

// Ratiof formats a ratio as the page shows it.
func Ratiof(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0fx", v)
	case v >= 10:
		return fmt.Sprintf("%.1fx", v)
	}
	return fmt.Sprintf("%.2fx", v)
}

// Format formats a row's figure with its unit.
func Format(v float64, metric string) string {
	switch metric {
	case "ops/s", "rows/s":
		return thousands(v) + " " + metric
	case "ns/op":
		switch {
		case v >= 1e6:
			return fmt.Sprintf("%.2f ms", v/1e6)
		case v >= 1e3:
			return fmt.Sprintf("%.1f µs", v/1e3)
		}
		return fmt.Sprintf("%.0f ns", v)
	case "B/value":
		return thousands(v) + " B"
	}
	if strings.HasSuffix(metric, "-ms") {
		if v >= 1000 {
			return thousands(v) + " ms"
		}
		if v < 1 {
			return fmt.Sprintf("%.3f ms", v)
		}
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func thousands(v float64) string {
	return units.Group(strconv.FormatFloat(math.Round(v), 'f', 0, 64))
}

// Glance is the page's table of headline ratios.
func Glance(r *Results) string {
	var b strings.Builder
	b.WriteString("| question | kura against | median | spread | target | load average |\n|---|---|---:|---:|---|---:|\n")
	for _, id := range r.Headline {
		q := r.Ratio(id)
		sec, _, _ := strings.Cut(id, ".")
		s := r.Section(sec)
		if q == nil || s == nil {
			continue
		}
		fmt.Fprintf(&b, "| [%s](#%s) | %s | **%s** | %s–%s | %s | %.0f–%.0f |\n", s.Title, anchor(s.Title), q.Label, Ratiof(q.Median), Ratiof(q.Min), Ratiof(q.Max), targetText(*q),
			math.Min(s.Load[0][0], s.Load[1][0]), math.Max(s.Load[0][0], s.Load[1][0]))
	}
	return b.String()
}

// anchor is GitHub's anchor for a heading.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 0x7f:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// RunBlock is the page's summary of the whole run.
func RunBlock(r *Results) string {
	m := r.Machine
	dirty := ""
	if r.Dirty {
		dirty = " **(with uncommitted changes: rerun before quoting)**"
	}
	commit := "`" + r.Commit + "`"
	var others []string
	for _, s := range r.Sections {
		if s.Commit != "" && s.Commit != r.Commit {
			others = append(others, fmt.Sprintf("%s at `%s`", s.ID, s.Commit))
		}
	}
	if len(others) > 0 {
		commit += " (sections kept from earlier runs: " + strings.Join(others, ", ") + ")"
	}
	more := ""
	if m.Ruby != "" {
		more += ", Ruby " + m.Ruby
	}
	if m.Postgres != "" {
		more += ", PostgreSQL " + m.Postgres
	}
	return fmt.Sprintf("Last run: %s, commit %s%s, `%s` in %s s (%s s of it building the test binaries) on %d cores (%s), %s, Go %s, redis-server %s, memcached %s, Node %s%s. "+
		"Results file: [`%s`](%s) (schema `%s`).\n",
		day(r.Date), commit, dirty, r.Command, strconv.FormatFloat(r.Seconds, 'f', 0, 64), strconv.FormatFloat(r.BuildSeconds, 'f', 0, 64), m.CPUs, m.CPU, m.OS, strings.TrimPrefix(m.Go, "go"), m.Redis, m.Memcached, m.Node, more,
		ResultsPath, ResultsPath, r.Schema)
}

var blockRE = regexp.MustCompile(`(?s)<!-- bench-report:begin ([a-z0-9-]+) -->\n.*?<!-- bench-report:end ([a-z0-9-]+) -->`)

// Generated returns, per block id, what the page's block must hold.
func Generated(r *Results) map[string]string {
	g := map[string]string{"run": RunBlock(r), "glance": Glance(r)}
	for i := range r.Sections {
		g[r.Sections[i].ID] = Block(r, &r.Sections[i])
	}
	return g
}

// Blocks returns the generated blocks found in page, by id.
func Blocks(page string) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range blockRE.FindAllStringSubmatch(page, -1) {
		if m[1] != m[2] {
			return nil, fmt.Errorf("block %q ends as %q", m[1], m[2])
		}
		body := strings.TrimPrefix(m[0], "<!-- bench-report:begin "+m[1]+" -->\n")
		body = strings.TrimSuffix(body, "<!-- bench-report:end "+m[1]+" -->")
		out[m[1]] = body
	}
	return out, nil
}

// Rewrite returns page with every generated block replaced from r. A
// block of the page that r does not know, or a section of r the page has
// no block for, is an error.
func Rewrite(page string, r *Results) (string, error) {
	g := Generated(r)
	have, err := Blocks(page)
	if err != nil {
		return "", err
	}
	for id := range g {
		if _, ok := have[id]; !ok {
			return "", fmt.Errorf("%s has no block %q (add <!-- bench-report:begin %s --> … <!-- bench-report:end %s -->)", PagePath, id, id, id)
		}
	}
	var bad error
	out := blockRE.ReplaceAllStringFunc(page, func(m string) string {
		id := blockRE.FindStringSubmatch(m)[1]
		body, ok := g[id]
		if !ok {
			bad = fmt.Errorf("%s has a block %q the results file does not know", PagePath, id)
			return m
		}
		return "<!-- bench-report:begin " + id + " -->\n" + body + "<!-- bench-report:end " + id + " -->"
	})
	return out, bad
}

// WriteAll writes the results file, the charts and the page under root.
// Targets are judged again (the rule may have changed since the run; the
// figures are the run's).
func WriteAll(root string, r *Results) error {
	for i := range r.Sections {
		for j := range r.Sections[i].Rows {
			r.Sections[i].Rows[j].judge()
		}
		for j := range r.Sections[i].Ratios {
			r.Sections[i].Ratios[j].judge()
		}
	}
	if err := r.Save(filepath.Join(root, ResultsPath)); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, ChartDir), 0o755); err != nil {
		return err
	}
	for i := range r.Sections {
		if err := os.WriteFile(filepath.Join(root, ChartDir, r.Sections[i].ID+".svg"), []byte(Chart(&r.Sections[i])), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, ChartDir, "headline.svg"), []byte(HeadlineChart(r)), 0o644); err != nil {
		return err
	}
	page, err := os.ReadFile(filepath.Join(root, PagePath))
	if err != nil {
		return err
	}
	out, err := Rewrite(string(page), r)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, PagePath), []byte(out), 0o644)
}
