package benchreport

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/vistest"
)

const root = "../../.."

func load(t *testing.T) (*Results, string) {
	t.Helper()
	r, err := Load(filepath.Join(root, ResultsPath))
	if err != nil {
		t.Fatalf("%v (make bench-report writes it)", err)
	}
	page, err := os.ReadFile(filepath.Join(root, PagePath))
	if err != nil {
		t.Fatal(err)
	}
	return r, string(page)
}

// TestPageAgreesWithResults: every generated block of BENCHMARKS.md is
// exactly what the results file gives, every chart on disk is the one the
// results draw, the page has a heading per section and stays under ~400
// lines, and the run it quotes was of committed code.
func TestPageAgreesWithResults(t *testing.T) {
	r, page := load(t)
	if r.Dirty {
		t.Errorf("the results come from a tree with uncommitted changes (commit %s): rerun make bench-report on a clean tree", r.Commit)
	}
	have, err := Blocks(page)
	if err != nil {
		t.Fatal(err)
	}
	want := Generated(r)
	for id, body := range want {
		if have[id] != body {
			t.Errorf("block %q of %s differs from the results file (make bench-report RENDER=1 rewrites it):\n got: %.300q\nwant: %.300q", id, PagePath, have[id], body)
		}
	}
	for id := range have {
		if _, ok := want[id]; !ok {
			t.Errorf("%s has a block %q the results file does not know", PagePath, id)
		}
	}
	for i := range r.Sections {
		s := &r.Sections[i]
		if !strings.Contains(page, "\n## "+s.Title+"\n") {
			t.Errorf("%s has no heading %q", PagePath, s.Title)
		}
		svg, err := os.ReadFile(filepath.Join(root, ChartDir, s.ID+".svg"))
		if err != nil || string(svg) != Chart(s) {
			t.Errorf("chart %s.svg is not the one the results draw (%v)", s.ID, err)
		}
		if s.Error != "" {
			t.Errorf("section %s failed in the quoted run: %s", s.ID, firstLine(s.Error))
		}
		if s.Commit == "" || s.Started == "" || s.Command == "" || s.Load[0][0] == 0 {
			t.Errorf("section %s lacks its commit, date, command or load", s.ID)
		}
		for _, q := range s.Ratios {
			if len(q.PerRound) < 2 {
				t.Errorf("ratio %s has %d rounds: a spread needs two or more", q.ID, len(q.PerRound))
			}
		}
	}
	headline, err := os.ReadFile(filepath.Join(root, ChartDir, "headline.svg"))
	if err != nil || string(headline) != HeadlineChart(r) {
		t.Errorf("headline.svg is not the one the results draw (%v)", err)
	}
	if n := strings.Count(page, "\n"); n > 400 {
		t.Errorf("%s has %d lines; the page is for a five-minute read (at most ~400)", PagePath, n)
	}
	if !strings.Contains(strings.Join(strings.SplitN(page, "\n", 8)[:7], "\n"), "make bench-report") {
		t.Errorf("%s's first lines do not say how to rerun make bench-report", PagePath)
	}
	if len(r.Headline) == 0 {
		t.Error("no headline ratios")
	}
	for _, id := range r.Headline {
		if q := r.Ratio(id); q == nil || !q.Headline {
			t.Errorf("headline %q is not a headline ratio of the results", id)
		}
	}
}

// pendingDocs are pages other issues of this round are writing; the page
// may link them ahead of their landing.
var pendingDocs []string

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLinksResolve: every relative link of the page, the README and the
// notebook names a file that exists, and every anchor on the page names
// one of its headings.
func TestLinksResolve(t *testing.T) {
	files := []string{PagePath, "README.md"}
	nb, _ := filepath.Glob(filepath.Join(root, "docs/benchmarks/*.md"))
	for _, f := range nb {
		rel, _ := filepath.Rel(root, f)
		files = append(files, rel)
	}
	page, _ := os.ReadFile(filepath.Join(root, PagePath))
	anchors := map[string]bool{}
	for _, l := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(l, "#") {
			anchors[anchor(strings.TrimSpace(strings.TrimLeft(l, "#")))] = true
		}
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		// Code spans and blocks are not links.
		text = regexp.MustCompile("(?s)```.*?```").ReplaceAllString(text, "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			if path == "" {
				if f == PagePath && !anchors[frag] {
					t.Errorf("%s: anchor #%s names no heading", f, frag)
				}
				continue
			}
			full := filepath.Clean(filepath.Join(filepath.Dir(f), path))
			checked++
			if _, err := os.Stat(filepath.Join(root, full)); err != nil {
				if slices.Contains(pendingDocs, filepath.ToSlash(full)) {
					continue
				}
				t.Errorf("%s: link %q: %s does not exist", f, target, full)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d links checked: is the link pattern broken?", checked)
	}
}

// claim is a place where the README or the docs quote a headline ratio.
type claim struct {
	file  string
	re    *regexp.Regexp // its first group is the figure
	ratio string
}

var claims = []claim{
	{"docs/rings.md", regexp.MustCompile(`the page's (\d+\.\d+)x for all`), "rings.getmany-vs-ring"},
}

// notHeadline are ratios next to a peer's name in the docs that measure
// something no headline ratio does, with the reason.
var notHeadline = []claim{
	{"docs/FORMAT.md", regexp.MustCompile(`17 of text, (2\.4)x what msgpack\+snappy stores`), "a 17-byte value's envelope, not the article corpus"},
	{"docs/dictionaries.md", regexp.MustCompile(`0\.52–(0\.66)x the bytes of msgpack\+snappy end to end`), "trained dictionaries end to end (the notebook's bytes-per-value.md)"},
	{"docs/dictionaries.md", regexp.MustCompile(`0\.66–(0\.77)x its bytes`), "S2 with a dictionary, several corpora"},
	{"docs/dictionaries.md", regexp.MustCompile(`\((?:articles, 3\.7–4\.7 KB a value: )?0\.679x → 0\.682x of msgpack\+snappy with S2\+dict, 0\.532x → 0\.535x with zstd\+dict\)`), "dictionary digests' cost, dictionaries"},
	{"docs/rings.md", regexp.MustCompile(`it reached (1\.06)x a go-redis .Ring.`), "a design that was rejected"},
	{"docs/rings.md", regexp.MustCompile(`all shards at once reached (1\.40)x in the same run`), "the rejected design's own run, not the page's"},
}

// peerWords name the peers of the headline ratios: a ratio near one of
// them in the README or doc.go must be a registered claim.
var peerWords = regexp.MustCompile(`(?i)rueidis|go-redis|redis-benchmark|gomemcache|GetMulti|ioredis|\bRing\b|msgpack\+snappy|keyv|BentoCache|cache-manager|MemCacheStore|RedisCacheStore|dalli|pg_recvlogical`)

var figure = regexp.MustCompile(`(\d+(?:\.\d+)?)x\b`)

// TestNoFigureContradictsAHeadline: every quote of a headline ratio in
// the README and the docs lies within the spread the results file
// measured (rounded to the quote's digits), and every ratio the README,
// doc.go, docs/, js/ or rb/ give next to a peer's name is such a registered
// quote or listed, with the reason, as measuring something else.
func TestNoFigureContradictsAHeadline(t *testing.T) {
	r, _ := load(t)
	texts := map[string]string{}
	read := func(f string) string {
		if s, ok := texts[f]; ok {
			return s
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = strings.Join(strings.Fields(string(b)), " ")
		return texts[f]
	}
	for _, c := range claims {
		q := r.Ratio(c.ratio)
		if q == nil || !q.Headline {
			t.Errorf("claim in %s refers to %q, not a headline ratio", c.file, c.ratio)
			continue
		}
		ms := c.re.FindAllStringSubmatch(read(c.file), -1)
		if len(ms) == 0 {
			t.Errorf("%s no longer quotes %s (update the claims list)", c.file, c.ratio)
		}
		for _, m := range ms {
			v, _ := strconv.ParseFloat(m[1], 64)
			if v < q.Min-0.005 || v > q.Max+0.005 {
				t.Errorf("%s says %q: outside the measured %s–%s (median %s, %s at %s)", c.file, m[0], Ratiof(q.Min), Ratiof(q.Max), Ratiof(q.Median), c.ratio, r.Commit)
			}
		}
	}
	files := []string{"README.md", "doc.go"}
	for _, g := range []string{"docs/*.md", "js/*.md", "rb/*.md"} {
		m, _ := filepath.Glob(filepath.Join(root, g))
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			files = append(files, filepath.ToSlash(rel))
		}
	}
	for _, f := range files {
		s := read(f)
		for _, loc := range figure.FindAllStringIndex(s, -1) {
			lo, hi := max(0, loc[0]-120), min(len(s), loc[1]+120)
			if !peerWords.MatchString(s[lo:hi]) {
				continue
			}
			covered := false
			for _, c := range append(slices.Clone(claims), notHeadline...) {
				if c.file != f {
					continue
				}
				for _, m := range c.re.FindAllStringIndex(s, -1) {
					if m[0] <= loc[0] && loc[1] <= m[1] {
						covered = true
					}
				}
			}
			if !covered {
				t.Errorf("%s quotes %q next to a peer's name (%q): point at BENCHMARKS.md, or register it in claims (a headline) or notHeadline (with the reason)", f, s[loc[0]:loc[1]], s[lo:hi])
			}
		}
	}
}

// TestChartsInBrowser: the page's charts, in headless Chromium at 1280
// and 390 px: no label overlaps another, none is cut off.
func TestChartsInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	files, _ := filepath.Glob(filepath.Join(root, ChartDir, "*.svg"))
	if len(files) < 9 {
		t.Fatalf("%d charts in %s", len(files), ChartDir)
	}
	var svgs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		svgs = append(svgs, string(b))
	}
	for _, l := range vistest.CheckLayout(t, vistest.SVGPage(svgs...), 1280, 390) {
		if l.Charts != len(files) {
			t.Errorf("at %d px: %d charts drawn of %d", l.Width, l.Charts, len(files))
		}
	}
}

// TestParseBench: round levels and the -GOMAXPROCS suffix are dropped,
// every metric kept, samples in order.
func TestParseBench(t *testing.T) {
	out := `goos: linux
BenchmarkReadPath/round1/kura-2         	  100000	     12000 ns/op	  83000 ops/s	  2500 B/op	      14 allocs/op
BenchmarkReadPath/round2/kura-2         	  100000	     11000 ns/op	  90000 ops/s
BenchmarkInvalidationStorm/round1/redis/kura-leases-2   1   5000000000 ns/op   1.000 loads/removing-invalidation   12.5 wait-p99-ms
BenchmarkEncode/msgpack+snappy-2   300   60500 ns/op   6893 B/value
PASS`
	got := parseBench([]byte(out))
	if rp := got["ReadPath/kura"]; len(rp) != 2 || rp[1].Metrics["ops/s"] != 90000 || rp[0].Metrics["allocs/op"] != 14 || rp[0].Round != 1 || rp[1].Round != 2 {
		t.Errorf("ReadPath: %v", rp)
	}
	if got["InvalidationStorm/redis/kura-leases"][0].Metrics["wait-p99-ms"] != 12.5 {
		t.Errorf("storm: %v", got)
	}
	if got["Encode/msgpack+snappy"][0].Metrics["B/value"] != 6893 {
		t.Errorf("encode: %v", got)
	}
	// A benchmark that logs while it runs: the name, the log, then the figures.
	got = parseBench([]byte("BenchmarkReadThrough/kura-2         \t2024/11/29 04:00:00 redis: reconnecting\n  200000\t      5000 ns/op\t  71021 ops/s\n"))
	if rt := got["ReadThrough/kura"]; len(rt) != 1 || rt[0].Metrics["ops/s"] != 71021 {
		t.Errorf("split line: %v", got)
	}
}

// TestRatios: speed ratios put kura on top whichever way the metric
// goes; size ratios are kura's bytes over the peer's; targets are judged
// on the median.
func TestRatios(t *testing.T) {
	ops := func(v ...float64) *Row { return &Row{Better: "higher", Samples: v} }
	ns := func(v ...float64) *Row { return &Row{Better: "lower", Samples: v} }
	q := Ratio{Kind: "speed", Target: 1.5}
	q.finish(ops(300, 200, 100), ops(100, 100, 100))
	if q.Median != 2 || q.Min != 1 || q.Max != 3 || q.Met == nil || !*q.Met {
		t.Errorf("ops/s: %+v", q)
	}
	q = Ratio{Kind: "speed", Target: 1.5}
	q.finish(ns(100, 100), ns(120, 130))
	if q.Median != 1.25 || *q.Met {
		t.Errorf("ns/op: %+v", q)
	}
	// Rounds pair samples: a round one side lacks is left out.
	q = Ratio{Kind: "speed"}
	q.finish(&Row{Better: "higher", Samples: []float64{300, 100}, Rounds: []int{0, 200}}, &Row{Better: "higher", Samples: []float64{100, 50, 100}, Rounds: []int{0, 100, 200}})
	if len(q.PerRound) != 2 || q.PerRound[0] != 3 || q.PerRound[1] != 1 {
		t.Errorf("rounds: %+v", q)
	}
	q = Ratio{Kind: "size", Target: 1}
	q.finish(ns(1002, 1000), ns(1000, 1000))
	if !*q.Met {
		t.Errorf("1.001x shown as 1.00x misses a 1.00x target: %+v", q)
	}
	q = Ratio{Kind: "size", Target: 1}
	q.finish(ns(99, 99, 99), ns(100, 100, 100))
	if q.Median != 0.99 || !*q.Met {
		t.Errorf("size: %+v", q)
	}
	if spread(Row{Min: 27573, Max: 148251, Metric: "ops/s"}) != "27,573–148,251 ops/s" || spread(Row{Min: 900e3, Max: 1.2e6, Metric: "ns/op"}) != "900.0 µs–1.20 ms" {
		t.Error("spread")
	}
	if Ratiof(0.994) != "0.99x" || Ratiof(315) != "315x" || Format(1234567, "ns/op") != "1.23 ms" || Format(83456.4, "ops/s") != "83,456 ops/s" ||
		Format(5041.9, "login-ms") != "5,042 ms" || Format(249.66, "p99-ms") != "249.7 ms" || Format(10449.2, "rows/s") != "10,449 rows/s" {
		t.Error("formatting")
	}
}

// synthetic returns results for every section of the page with figures
// from extreme to tiny, as a bad run on a busy machine could give.
func synthetic() *Results {
	r := &Results{Schema: Schema, Date: "2026-11-29T04:00:00Z", Commit: "abc1234", Command: "make bench-report", Machine: Machine{CPUs: 2, CPU: "AMD EPYC"}}
	for k, sp := range specs() {
		sec := Section{ID: sp.ID, Title: sp.Title, Question: sp.Question, Command: sp.Command, Commit: "abc1234", Started: r.Date, Load: [2][3]float64{{12, 10, 8}, {14, 11, 9}}}
		samples := map[string][]float64{}
		for i, rs := range sp.Rows {
			base := []float64{1, 1000, 0.001, 250000, 3}[(i+k)%5]
			samples[rs.ID] = []float64{base, base * (1.3 + float64(i)/10), base * (0.7 - float64(i)/20)}
		}
		fill(&sec, sp, samples, nil)
		r.Sections = append(r.Sections, sec)
		for _, q := range sec.Ratios {
			if q.Headline {
				r.Headline = append(r.Headline, q.ID)
			}
		}
	}
	return r
}

// TestChartsOfAnyRunFit: whatever the figures (ratios from 0.001x to
// 10^6x), the charts' labels neither overlap nor get cut off in
// Chromium, and the page's blocks round-trip through Rewrite.
func TestChartsOfAnyRunFit(t *testing.T) {
	r := synthetic()
	var svgs []string
	for i := range r.Sections {
		svgs = append(svgs, Chart(&r.Sections[i]))
	}
	svgs = append(svgs, HeadlineChart(r))
	page := "# x\n"
	for id := range Generated(r) {
		page += "<!-- bench-report:begin " + id + " -->\nold\n<!-- bench-report:end " + id + " -->\n"
	}
	out, err := Rewrite(page, r)
	if err != nil {
		t.Fatal(err)
	}
	blocks, _ := Blocks(out)
	for id, want := range Generated(r) {
		if blocks[id] != want {
			t.Errorf("block %s does not round-trip", id)
		}
	}
	r.Sections[0].Commit = "0ld0ld0"
	if rb := RunBlock(r); !strings.Contains(rb, "sections kept from earlier runs: "+r.Sections[0].ID+" at `0ld0ld0`") {
		t.Errorf("a section from an earlier run is not named: %s", rb)
	}
	if _, err := Rewrite(page+"<!-- bench-report:begin nosuch -->\n<!-- bench-report:end nosuch -->\n", r); err == nil {
		t.Error("a block the results do not know was accepted")
	}
	if testing.Short() {
		return
	}
	vistest.CheckLayout(t, vistest.SVGPage(svgs...), 1280, 390)
}

// TestFullSizes: a full-size run triples rounds, benchmark time and the
// rounds a benchmark counts itself, and leaves self-sizing 1x alone.
func TestFullSizes(t *testing.T) {
	e := &env{full: true}
	g := e.sized(goRun{Benchtime: "1s", Rounds: 3, Env: []string{"KURA_BENCH_ROUNDS=3", "X=1"}})
	if g.Benchtime != "3s" || g.Rounds != 9 || g.Env[0] != "KURA_BENCH_ROUNDS=9" || g.Env[1] != "X=1" {
		t.Errorf("%+v", g)
	}
	if g := e.sized(goRun{Benchtime: "1x", Rounds: 1}); g.Benchtime != "1x" || g.Rounds != 3 {
		t.Errorf("%+v", g)
	}
	if g := e.sized(goRun{Benchtime: "300x"}); g.Benchtime != "900x" {
		t.Errorf("%+v", g)
	}
	if g := (&env{}).sized(goRun{Benchtime: "1s", Rounds: 3}); g.Benchtime != "1s" || g.Rounds != 3 {
		t.Errorf("small size changed: %+v", g)
	}
}

// TestFailure: a failed run is summed up by its test's message.
func TestFailure(t *testing.T) {
	out := "BenchmarkReadPath/round3/kura-2                         \t--- FAIL: BenchmarkReadPath/round3/kura-2\n    l1_bench_test.go:170: the warm set missed: the benchmark would measure the loader\n--- FAIL: BenchmarkReadPath\nFAIL\n"
	if got := failure([]byte(out)); got != "the warm set missed: the benchmark would measure the loader" {
		t.Errorf("failure: %q", got)
	}
}

// TestNonFiniteSamples: a NaN or an infinity never reaches the results
// file (JSON cannot hold it), and rounds stay paired.
func TestNonFiniteSamples(t *testing.T) {
	sp := spec{ID: "x", Rows: []rowSpec{{ID: "k", Metric: "ops/s", Better: "higher", Kura: true}, {ID: "p", Metric: "ops/s", Better: "higher"}},
		Ratios: []ratioSpec{{Kura: "k", Peer: "p", Kind: "speed"}}}
	var sec Section
	fill(&sec, sp, map[string][]float64{"k": {math.NaN(), 200, 300}, "p": {100, math.Inf(1), 100}}, map[string][]int{"k": {1, 2, 3}, "p": {1, 2, 3}})
	r := &Results{Schema: Schema, Sections: []Section{sec}}
	if err := r.Save(filepath.Join(t.TempDir(), "r.json")); err != nil {
		t.Fatal(err)
	}
	if q := sec.Ratios[0]; len(q.PerRound) != 1 || q.PerRound[0] != 3 {
		t.Errorf("ratio: %+v", q)
	}
}

// TestRowTargets: a row with no peer is held to its own bound (at most
// for lower-is-better, at least otherwise), judged on its median; its
// section's table gets a target column, with the analysis linked on a
// miss, and a section without such a row keeps its four columns.
func TestRowTargets(t *testing.T) {
	sp := spec{ID: "x", Rows: []rowSpec{
		{ID: "kura", Metric: "rows/s", Better: "higher", Kura: true}, {ID: "peer", Metric: "rows/s", Better: "higher"},
		{ID: "p99", Name: "commit to applied, p99 (ms)", Metric: "p99-ms", Better: "lower", Kura: true, Target: 50, Analysis: "docs/benchmarks/cdc.md"},
		{ID: "rate", Name: "rate", Metric: "rows/s", Better: "higher", Kura: true, Target: 1000},
	}, Ratios: []ratioSpec{{Kura: "kura", Peer: "peer", Kind: "speed"}}}
	var sec Section
	fill(&sec, sp, map[string][]float64{"kura": {1, 2}, "peer": {2, 2}, "p99": {40, 70, 60}, "rate": {900, 1100, 1000}}, nil)
	p99, rate := sec.Row("p99"), sec.Row("rate")
	if p99.Met == nil || *p99.Met || rate.Met == nil || !*rate.Met {
		t.Fatalf("p99 %+v, rate %+v", p99, rate)
	}
	r := &Results{Schema: Schema, Machine: Machine{CPUs: 2}, Sections: []Section{sec}}
	b := Block(r, &r.Sections[0])
	for _, want := range []string{"| rounds | target |", "| ≤ 50.0 ms: **missed** ([why](docs/benchmarks/cdc.md)) |", "| ≥ 1,000 rows/s: met |", "| 2 | — |"} {
		if !strings.Contains(b, want) {
			t.Errorf("block lacks %q:\n%s", want, b)
		}
	}
	// Judged again when written: a row whose target was added (or
	// changed) after the run is judged on the run's median.
	p99.Target = 80
	p99.judge()
	if !*p99.Met {
		t.Errorf("p99 %v against 80: %+v", p99.Median, p99)
	}
	sp.Rows[2].Target, sp.Rows[3].Target = 0, 0
	sec = Section{}
	fill(&sec, sp, map[string][]float64{"kura": {1, 2}, "peer": {2, 2}, "p99": {40}, "rate": {900}}, nil)
	if b := Block(r, &sec); strings.Contains(b, "target |\n|---|---:|---:|---:|---|") || !strings.Contains(b, "| contender | median | spread (min–max) | rounds |\n") {
		t.Errorf("a section without row targets grew a column:\n%s", b)
	}
}

// TestReadFigures: an external benchmark's figures by row id; a side the
// page does not show is left out, a side the page shows and the file
// lacks is an error naming it.
func TestReadFigures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(path, []byte(`{"a side": [1, 2], "b side": [3], "not shown": [4]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readFigures(path, "bench", map[string]string{"a side": "a", "b side": "b"})
	if err != nil || len(got) != 2 || got["a"][1] != 2 || got["b"][0] != 3 {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := readFigures(path, "bench", map[string]string{"a side": "a", "c side": "c"}); err == nil || !strings.Contains(err.Error(), `"c side"`) {
		t.Errorf("a missing side: %v", err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readFigures(path, "bench", map[string]string{"a side": "a"}); err == nil {
		t.Error("an empty file (a benchmark that skipped) was accepted")
	}
}

// TestRubyNamesInBench: every side the Ruby section reads is one
// rb/bench/bench.rb names, so a renamed side fails here rather than in
// the next make bench-report.
func TestRubyNamesInBench(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "rb/bench/bench.rb"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range rubyIDs {
		part, side, _ := strings.Cut(name, ": ")
		whole := strings.Contains(string(b), "'"+name+"'")
		if !whole && (!strings.Contains(string(b), "'"+side+"'") || !strings.Contains(string(b), `RESULTS["`+strings.Fields(part)[0])) {
			t.Errorf("rb/bench/bench.rb has no side %q (part %q) for the page's %q", side, part, rubyIDs[name])
		}
	}
}
