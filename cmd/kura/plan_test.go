package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/browsertest"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// planScenarios are the field reports' sizing decisions as kura plan
// invocations on the catalog as shipped; their output is kept in
// testdata/golden (refresh with go test ./cmd/kura -run TestPlanGolden -update).
var planScenarios = []struct {
	name string
	args []string
}{
	// Memorystore tiers: 24 M2 Standard instances or 6 M4 at the same
	// total memory (120 GiB of data, half of each instance filled: the
	// maintenance rule), today's CPU share a labelled sample (40%).
	{"memorystore-resize", []string{"--from", "24:memorystore-redis-M2", "--to", "6:memorystore-redis-M4", "--data", "120GiB",
		"--memory-ceiling", "0.5", "--replicas", "1", "--cpu-now", "0.4"}},
	// The same data on every tier, the traffic a labelled test value.
	{"memorystore-tiers", []string{"--data", "120GiB", "--memory-ceiling", "0.5", "--replicas", "1",
		"--reads", "150000", "--writes", "150000", "--ops-per-thread", "68877", "--node", "M2", "--node", "M3", "--node", "M4"}},
	// Network bytes: gob vs msgpack+snappy. A 5.55 Gbps peak of 13,441-byte
	// gob values, and a codec that cuts the bytes to a third.
	{"network-step-down", []string{"--reads", "51584", "--read-size", "13441", "--node", "cache.m7g.2xlarge", "--node", "cache.m7g.4xlarge", "--codec-ratio", "0.3333"}},
	// A 1.3 MB value written 15 times a second (the rate is a labelled
	// test value: the field report gives none).
	{"large-value", []string{"--largest-value", "1.3MB", "--writes", "15", "--write-size", "1.3MB", "--large-per-sec", "15",
		"--node", "cache.t2.small", "--node", "cache.m7g.large", "--node", "cache.c7gn.large"}},
}

// TestPlanHelpGolden keeps kura plan --help under review like the other
// commands' (testdata/golden/plan.help.txt, refreshed with -update).
func TestPlanHelpGolden(t *testing.T) {
	out, _, err := kura(t, "plan", "--help")
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "plan.help.txt", out)
	if strings.Contains(strings.ToLower(out), "seed 0") {
		t.Errorf("plan.help.txt names a field report instead of the problem")
	}
}

func TestPlanGolden(t *testing.T) {
	for _, sc := range planScenarios {
		out, stderr, err := kura(t, append([]string{"plan"}, sc.args...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", sc.name, err, stderr)
		}
		name := "plan-" + sc.name + ".txt"
		checkGolden(t, name, out)
		if strings.Contains(strings.ToLower(out), "seed 0") {
			t.Errorf("%s names a field report instead of the problem", name)
		}
	}
}

// TestPlanFieldReportConclusions reads the conclusions off the CLI's own
// output, so the golden files cannot drift from them unnoticed.
func TestPlanFieldReportConclusions(t *testing.T) {
	run := func(args ...string) string {
		t.Helper()
		out, stderr, err := kura(t, append([]string{"plan"}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		return out
	}
	sc := planScenarios
	// 24 × 10 GB × $0.054 × 730 h = $9,460.80 against 6 × 40 GB × $0.035
	// × 730 h = $6,132.00 (Standard, us-central1): -35%; 4 / 2.35 = 1.7×
	// the CPU per instance; memory binds.
	out := run(sc[0].args...)
	pct := regexp.MustCompile(`per month +\$9,460\.80 +\$6,132\.00 +-\$3,328\.80 \((-\d+)%\)`).FindStringSubmatch(out)
	if pct == nil {
		t.Fatalf("24 × M2 → 6 × M4: no priced per-month line:\n%s", out)
	}
	if v, _ := strconv.Atoi(pct[1]); v < -35 || v > -30 {
		t.Errorf("24 × M2 → 6 × M4 saves %s%%, the report 30%% and the prices 35%%", pct[1])
	}
	if col(out, "CPU", 2) != "1.70×" || col(out, "instance size", 1) != "10 GB" || col(out, "instance size", 2) != "40 GB" ||
		!strings.Contains(out, "memorystore-redis-M4 instance is memory-bound") || !strings.Contains(out, "GCP-BC price data of 2026-04-27") {
		t.Errorf("24 × M2 → 6 × M4: want 1.70× CPU, 10 → 40 GB, memory-bound, the price source:\n%s", out)
	}
	out = run(sc[1].args...)
	if !strings.Contains(out, "memorystore-redis-M4 80GB  3") || !strings.Contains(out, "memorystore-redis-M2 10GB  24") ||
		!strings.Contains(out, "Cheapest of the 3 priced node types: memorystore-redis-M4, 6 nodes") || col(out, "memorystore-redis-M2 10GB", 8) != "$9,460.80" {
		t.Errorf("Memorystore tiers: want 24 × 10 GB M2 at $9,460.80 and M4 the cheapest:\n%s", out)
	}
	out = run(sc[2].args...)
	if col(out, "cache.m7g.2xlarge", 1) != "1" || col(out, "cache.m7g.2xlarge", 9) != "2 · $918.34" ||
		!strings.Contains(out, "its 3.75 Gbps baseline now holds the 1.85 Gbps peak") ||
		!strings.Contains(out, "from 1 × cache.m7g.4xlarge ($917.61 a month) to 1 × cache.m7g.2xlarge ($459.17): -$458.44 a month (-50%)") {
		t.Errorf("network step-down: want one cache.m7g.2xlarge after the codec, priced:\n%s", out)
	}
	out = run(sc[3].args...)
	if l := tableLine(out, "  cache.t2.small"); !strings.Contains(l, "81.2 ms") || !strings.Contains(l, "12.3 a second") || !strings.Contains(l, "queue grows") {
		t.Errorf("t2.small link: %q", l)
	}
	if l := tableLine(out, "  cache.m7g.large"); strings.Contains(l, "queue grows") {
		t.Errorf("m7g.large should carry it: %q", l)
	}
	// The cheapest node's link cannot carry the value: the summary says so
	// and names the cheapest that can.
	if !strings.Contains(out, "But the largest value alone keeps its link 122% busy; the cheapest whose link carries it: cache.m7g.large, 1 node at $115.34 a month.") {
		t.Errorf("the cheapest answer ignores the overloaded link:\n%s", out)
	}
}

// TestPlanHelpExamples runs every kura plan line of kura plan --help's
// examples as written, in a directory holding the files they name
// (testdata/plan-examples: FIXTURE measurements), and keeps their output
// in testdata/golden/plan-help-examples.txt. Lines of other commands are
// only parsed: their flags must exist and take the values given; the
// example addresses are never contacted.
func TestPlanHelpExamples(t *testing.T) {
	fixtures, _ := filepath.Abs(filepath.Join("testdata", "plan-examples"))
	golden, _ := filepath.Abs(filepath.Join("testdata", "golden", "plan-help-examples.txt"))
	dir := t.TempDir()
	ents, err := os.ReadDir(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(fixtures, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(planExample, "\\\n", " "), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "kura ") {
			lines = append(lines, l)
		}
	}
	var b strings.Builder
	plans := 0
	for _, l := range lines {
		args := strings.Fields(l)[1:]
		if i := slices.Index(args, ">"); i >= 0 {
			args = args[:i]
		}
		if args[0] != "plan" {
			root := newRootCmd()
			cmd, rest, err := root.Find(args)
			if err == nil {
				err = cmd.ParseFlags(rest)
			}
			if err != nil || cmd.Name() == root.Name() {
				t.Errorf("%s: %v", l, err)
			}
			continue
		}
		plans++
		out, stderr, err := kura(t, args...)
		if err != nil {
			t.Errorf("%s: %v\n%s", l, err, stderr)
		}
		fmt.Fprintf(&b, "$ %s\n%s%s\n", l, out, stderr)
	}
	if plans < 8 {
		t.Errorf("only %d kura plan lines in the examples", plans)
	}
	if _, err := os.Stat("plan.html"); err != nil {
		t.Errorf("the --html example wrote no page: %v", err)
	}
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != b.String() {
		t.Errorf("%s changed; review and run with -update:\n%s", golden, b.String())
	}
}

// col is column i of the table row that starts with name.
func col(out, name string, i int) string {
	c := columns(tableLine(out, name+" "))
	if i >= len(c) {
		return ""
	}
	return c[i]
}

// columns splits a table line at the runs of two or more spaces the
// table's columns are padded with.
func columns(line string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
}

func tableLine(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func TestPlanArgs(t *testing.T) {
	dir := t.TempDir()
	badCat := filepath.Join(dir, "cat.json")
	cat, _ := os.ReadFile("testdata/plan-fixture-tiers.json")
	if err := os.WriteFile(badCat, bytes.Replace(cat, []byte(`"memory_gib": 20`), []byte(`"memory_gb": 20`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"plan"}, "nothing to size"},
		{[]string{"plan", "--data", "lots"}, "--data"},
		{[]string{"plan", "--data", "-5GB"}, "negative"},
		{[]string{"plan", "--data", "1GB", "--node", "cache.nope"}, `"cache.nope" is not in the catalog`},
		{[]string{"plan", "--data", "1GB", "--price", "cache.t2.small"}, "NAME=HOURLY"},
		{[]string{"plan", "--data", "1GB", "--price", "cache.t2.small=-1"}, "positive"},
		{[]string{"plan", "--data", "1GB", "--codec-ratio", "0"}, "--codec-ratio 0"},
		{[]string{"plan", "--data", "1GB", "--memory-ceiling", "1.5"}, "--memory-ceiling 1.5: is a fraction"},
		{[]string{"plan", "--data", "1GB", "--reserved-memory", "1"}, "--reserved-memory"},
		{[]string{"plan", "--data", "1GB", "--scaling", "1:x"}, "--scaling"},
		{[]string{"plan", "--data", "1GB", "--scaling", "2:5,1:3,1:4"}, "rise"},
		{[]string{"plan", "--data", "1GB", "--ops-per-thread", "5", "--cpu-us-per-op", "3"}, "not both"},
		{[]string{"plan", "--data", "1GB", "--catalog", badCat}, `nodes row 2 ("fixture-M3"): field "memory_gb"`},
		{[]string{"plan", "--data", "1GB", "--catalog", filepath.Join(dir, "none.json")}, "--catalog"},
		{[]string{"plan", "--data", "1GB", "--bench", filepath.Join(dir, "none.json")}, "--bench"},
		{[]string{"plan", "--data", "1GB", "--bench", badCat}, "kura bench"},
		{[]string{"plan", "--data", "1GB", "--html", filepath.Join(dir, "no", "such", "dir.html")}, "cannot write"},
		{[]string{"plan", "extra"}, "unknown command"},
		{[]string{"plan", "--data", "1GB", "--codec", "zstd"}, "--scan"},
		{[]string{"plan", "--scan", "../../plan/testdata/scan-v1.json", "--codec", "lz4"}, "s2, zstd"},
		{[]string{"plan", "--scan", "../../plan/testdata/scan-v1.json", "--codec", "s2", "--codec-ratio", "0.5"}, "not both"},
		{[]string{"plan", "--scan", badCat}, "kura.scan/v1"},
		{[]string{"plan", "--data", "1GB", "--codecs", "../../plan/testdata/codecs-v1.json", "--codec", "lz4"}, `no "lz4"`},
		{[]string{"plan", "--data", "1GB", "--codecs", "../../plan/testdata/codecs-v1.json", "--codec-ratio", "0.5"}, "not both"},
		{[]string{"plan", "--data", "1GB", "--codecs", badCat}, "kura.codecs/v1"},
		{[]string{"plan", "--data", "1GB", "--codec-from", "gob"}, "--codecs"},
		{[]string{"plan", "--reads", "x"}, "--help"},
		{[]string{"plan", "--data", "1GB", "--region", "mars-1"}, "--region mars-1: not in the catalog"},
		{[]string{"plan", "--data", "1GB", "--region", "us-east-1", "--node", "M2"}, "--region us-east-1: node type memorystore-redis-M2 has no price in it"},
		{[]string{"plan", "--data", "1GB", "--engine", "dragonfly"}, "--engine dragonfly"},
		{[]string{"plan", "--data", "1GB", "--discount", "elasticache=1y"}, "--discount elasticache=1y: the catalog has no committed-use discounts"},
		{[]string{"plan", "--data", "1GB", "--discount", "elasticache=-0.1"}, "--discount elasticache=-0.1"},
		{[]string{"plan", "--data", "1GB", "--discount", "elasticache=30"}, "(30% is 0.3)"},
		{[]string{"plan", "--data", "1GB", "--discount", "nope=0.1"}, "--discount nope"},
		{[]string{"plan", "--data", "1GB", "--discount", "memorystore-redis=2y"}, "1y, 3y"},
		{[]string{"plan", "--data", "1GB", "--instance-size", "40GB", "--node", "M2"}, "--instance-size 40 GB is outside memorystore-redis-M2's 5–10 GB"},
		{[]string{"plan", "--data", "1GB", "--instance-size", "1.5GB"}, "--instance-size 1.5GB: a Memorystore instance is a whole number of GB"},
		{[]string{"plan", "--data", "1GB", "--price", "cache.t2.small=-1"}, "--price cache.t2.small=-1"},
		{[]string{"plan", "--data", "1GB", "--price", "M2=0.5"}, "per GB"},
		{[]string{"plan", "--data", "100GB", "--from", "24:M2:40GB", "--to", "6:M4"}, "--from 24:M2:40GB: 40 GB is outside memorystore-redis-M2's 5–10 GB"},
		{[]string{"plan", "--data", "2TB", "--from", "24:M2", "--to", "6:M4"}, "--from 24:M2: the data needs"},
		{[]string{"plan", "--data", "100GB", "--from", "24:M2", "--to", "6:M4:big"}, "--to 6:M4:big: the instance size"},
		{[]string{"plan", "--data", "1GB", "--region", "us-east-1", "--from", "24:M2", "--to", "6:M4"}, "--region us-east-1: node type memorystore-redis-M2"},
		{[]string{"plan", "--data", "1GB", "--discount", "elasticache=0.3", "--discount", "elasticache=0.2"}, "a second discount"},
		{[]string{"plan", "--data", "1GB", "--instance-size", "1e9GB"}, "--instance-size"},
		// hostile or silly flags: each error names its flag
		{[]string{"plan", "--data", "120GB", "--instance-size", "1TB"}, "--instance-size 1TB: a Memorystore instance is a whole number of GB from 1 to 300"},
		{[]string{"plan", "--data", "120GiB", "--from", "24:M2", "--to", "6:M4", "--instance-size", "10GB"}, "--instance-size sizes the ranked plan"},
		{[]string{"plan", "--data", "120GiB", "--from", "24:M2", "--to", "6:M4", "--cpu-now", "NaN"}, "--cpu-now NaN"},
		{[]string{"plan", "--data", "120GiB", "--from", "24:M2", "--to", "6:M4", "--cpu-now", "40"}, "--cpu-now 40: the CPU share today must be 0 to 1 (above 0), such as 0.4 (40% is 0.4)"},
		{[]string{"plan", "--data", "120GiB", "--from", "24:M2", "--to", "6:M4", "--cpu-now", "-0.1"}, "--cpu-now -0.1"},
		{[]string{"plan", "--data", "1GB", "--cpu-now", "0.4"}, "--cpu-now is the CPU share of the --from fleet"},
		{[]string{"plan", "--data", "1GB", "--codec-ratio", "NaN"}, "--codec-ratio NaN"},
		{[]string{"plan", "--data", "1GB", "--reserved-memory", "NaN"}, "--reserved-memory NaN"},
		{[]string{"plan", "--reads", "5", "--cpu-us-per-op", "1e9"}, "--cpu-us-per-op 1e+09"},
		{[]string{"plan", "--reads", "5", "--cpu-us-per-op", "NaN"}, "--cpu-us-per-op NaN"},
		{[]string{"plan", "--data", "1GB", "--reads", "10", "--max-value-size", "0"}, "--max-value-size 0 has no meaning"},
	}
	for _, c := range cases {
		_, _, err := kura(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("kura %s: err = %v, want one line mentioning %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	out, _, err := kura(t, "plan", "--scan", "../../plan/testdata/scan-v1.json", "--reads", "1000", "--codec", "zstd", "--node", "cache.r7g.large")
	if err != nil || !strings.Contains(out, "37.2 MB of data in 100,000 keys") || !strings.Contains(out, "codec ratio 0.52") || !strings.Contains(out, "Largest value, 678 KB") {
		t.Errorf("--scan --codec: %v\n%s", err, out)
	}
	out, _, err = kura(t, "plan", "--data", "1GB", "--codecs", "../../plan/testdata/codecs-v1.json", "--codec-from", "msgpack+snappy", "--node", "cache.r7g.large")
	if err != nil || !strings.Contains(out, "codec ratio 0.625 (msgpack+snappy → zstd-3+dict-16KiB)") {
		t.Errorf("--codecs: %v\n%s", err, out)
	}
	out, _, err = kura(t, "plan", "--print-catalog")
	if err != nil || !strings.Contains(out, `"cache.t2.small"`) || !strings.Contains(out, `"source"`) {
		t.Errorf("--print-catalog: %v", err)
	}
}

// TestPlanFromBench is the path a user takes: kura bench --json against
// their own server (here a private redis-server), then kura plan reads the
// CPU and bytes per operation from it and writes the HTML report, which a
// real headless browser renders.
func TestPlanFromBench(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	dir := t.TempDir()
	out, stderr, err := kura(t, "bench", srv.URL(), "-t", "get", "--prefill", "-r", "2000", "-d", "1000", "-c", "4", "-P", "8", "-n", "40000", "-q", "--json")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	benchFile := filepath.Join(dir, "get.json")
	if err := os.WriteFile(benchFile, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(dir, "plan.html")
	out, stderr, err = kura(t, "plan", "--bench", benchFile, "--data", "40GB", "--reads", "200000", "--writes", "20000",
		"--largest-value", "1.3MB", "--price", "cache.r7g.xlarge=0.5", "--html", html)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr)
	}
	// The measured CPU per operation sized every row: no row says CPU was
	// not checked, and the header shows the figure.
	if !strings.Contains(out, "µs CPU per op") || strings.Contains(out, "no CPU cost per operation") {
		t.Errorf("bench figures not used:\n%s", out)
	}
	l := tableLine(out, "cache.r7g.xlarge")
	if c := columns(l); len(c) != 9 || c[4] == "-" || c[8] == "-" || c[7] != "$0.50 yours" {
		t.Errorf("cache.r7g.xlarge row lacks CPU, cost or the --price mark: %q", c)
	}
	if !strings.Contains(out, "price: yours, from --price") || !strings.Contains(out, "catalog of ") {
		t.Errorf("sources or catalog date missing:\n%s", out)
	}
	checkPlanPage(t, html)
}

// TestPlanFromSweep: an io-threads sweep on private redis-servers gives
// the thread curve; plan reads it and sizes CPU along it. (The curve's
// values depend on this machine; the test checks the path, not them.)
func TestPlanFromSweep(t *testing.T) {
	servertest.Redis(t, servers.RedisConfig{}) // skips or fails here when redis-server is missing
	dir := t.TempDir()
	out, stderr, err := kura(t, "bench", "sweep", "--io-threads", "1,2", "-t", "get", "--prefill", "-r", "500", "-n", "5000", "-c", "4", "-P", "8", "-q", "--json")
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, stderr)
	}
	file := filepath.Join(dir, "threads.json")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = kura(t, "plan", "--bench", file, "--data", "10GB", "--reads", "100000", "--io-threads", "2", "--node", "cache.r7g.large")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr)
	}
	// --io-threads is a what-if: the row adds the plan as asked and the
	// change (11 columns).
	if c := columns(tableLine(out, "cache.r7g.large")); len(c) != 11 || c[4] == "-" || !strings.Contains(out, "thread scaling: io-threads sweep") {
		t.Errorf("the sweep's curve did not size CPU:\n%s", out)
	}
}

// TestPlanFromCodecs: kura codecs --json measured on values, then kura plan
// takes its ratio from JSON to the recommended codec as the codec what-if.
func TestPlanFromCodecs(t *testing.T) {
	values := writeJSONL(t, corpus.Articles(41, 24))
	out, stderr, err := kura(t, "codecs", values, "--json", "-q", "--min-time", "1ms", "--dict-sizes", "4K")
	if err != nil {
		t.Fatalf("codecs: %v\n%s", err, stderr)
	}
	var rep struct {
		Recommended string `json:"recommended"`
		Results     []struct {
			Name   string  `json:"name"`
			VsJSON float64 `json:"vs_json"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	want := 0.0
	for _, r := range rep.Results {
		if r.Name == rep.Recommended {
			want = r.VsJSON
		}
	}
	file := filepath.Join(t.TempDir(), "codecs.json")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = kura(t, "plan", "--codecs", file, "--data", "10GB", "--reads", "10000", "--value-size", "14KB", "--node", "cache.r7g.large")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr)
	}
	line := fmt.Sprintf("codec ratio %.3g (json → %s)", want, rep.Recommended)
	if want == 0 || !strings.Contains(out, line) {
		t.Errorf("want %q in:\n%s", line, out)
	}
}

// checkPlanPage opens the report in headless Chromium: the DOM it built
// holds the table and the three charts, and its screenshot shows the
// memory-bound colour, so the SVG was drawn, not only parsed.
func checkPlanPage(t *testing.T, path string) {
	t.Helper()
	dom := browserDOM(t, path)
	for _, want := range []string{`id="plan"`, `id="nodes-vs-traffic"`, `id="cost-vs-traffic"`, `id="cost-per-type"`, `id="catalog-date"`, "<polyline", "cache.r7g.xlarge"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	if !strings.Contains(dom, `class="region-memory"`) || !(strings.Contains(dom, `class="region-cpu"`) || strings.Contains(dom, `class="region-network"`)) {
		t.Error("the nodes-against-traffic chart lacks a memory-bound region followed by a CPU- or network-bound one")
	}
	if n := strings.Count(dom, "<tr"); n < 10 {
		t.Errorf("rendered table has %d rows", n)
	}
	img := browserScreenshot(t, path)
	// #0072B2, the memory-bound colour of the bars and points.
	if n := countColour(img, 0x00, 0x72, 0xB2); n < 200 {
		t.Errorf("screenshot has %d pixels of the memory-bound colour; the charts did not render", n)
	}
}

// chromium finds a headless Chromium, failing under CI or
// KURA_REQUIRE_SERVERS=1 and skipping otherwise, like the servers.
// browserDOM is the page's DOM after its scripts ran, in headless Chromium.
func browserDOM(t *testing.T, path string) string {
	t.Helper()
	abs, _ := filepath.Abs(path)
	return browsertest.New(t).DOM(t, browsertest.FileURL(abs))
}

// browserScreenshot is a 1200 x 2400 screenshot of the page.
func browserScreenshot(t *testing.T, path string) image.Image {
	t.Helper()
	abs, _ := filepath.Abs(path)
	b := browsertest.NewWithOptions(t, browsertest.Options{Width: 1200, Height: 2400})
	img, err := png.Decode(bytes.NewReader(b.Screenshot(t, browsertest.FileURL(abs), "")))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func countColour(img image.Image, r, g, b uint8) int {
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near8(pr, r) && near8(pg, g) && near8(pb, b) {
				n++
			}
		}
	}
	return n
}

func near8(v uint32, want uint8) bool {
	d := int(v>>8) - int(want)
	return d >= -6 && d <= 6
}

// TestPlanResize reads the field report's resize off kura plan's own
// output: 24 instances to 6 is 4× the load per instance, 1 to 6 threads
// 2.35× the throughput, so 1.7× the CPU, and a CPU share of 40% today
// becomes 68%, under the 90% ceiling. The test recomputes the conclusion
// from the printed numbers.
func TestPlanResize(t *testing.T) {
	out, stderr, err := kura(t, "plan", "--from", "24:memorystore-redis-M2", "--to", "6:memorystore-redis-M4", "--cpu-now", "0.4")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	num := func(row string, i int, unit string) float64 {
		t.Helper()
		c := columns(tableLine(out, row+" "))
		if i >= len(c) {
			t.Fatalf("no column %d in row %q:\n%s", i, row, out)
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(c[i], unit), 64)
		if err != nil {
			t.Fatalf("row %q column %d: %v\n%s", row, i, err, out)
		}
		return v
	}
	// columns: name, the "24 × node" column (3 words), the "6 × node" column (3 words)...
	load, thr, cpu := num("load", 2, "×"), num("throughput", 2, "×"), num("CPU", 2, "×")
	if load != 4 || thr != 2.35 || cpu != 1.70 {
		t.Errorf("load %v×, throughput %v×, CPU %v×; the report: 4× / 2.35× = 1.7×\n%s", load, thr, cpu, out)
	}
	if r := load / thr; r < cpu-0.005 || r > cpu+0.005 {
		t.Errorf("the printed CPU %v× is not the printed load over throughput (%.3f)", cpu, r)
	}
	now, then := num("CPU share", 1, "%"), num("CPU share", 2, "%")
	if now != 40 || then != 68 || !strings.Contains(out, "the threads absorb the load") {
		t.Errorf("CPU share %v%% → %v%%, want 40%% → 68%% and absorbed:\n%s", now, then, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "24:memorystore-redis-M2"}, "--from and --to go together"},
		{[]string{"--from", "24", "--to", "6:memorystore-redis-M4"}, "COUNT:NODE"},
		{[]string{"--from", "0:memorystore-redis-M2", "--to", "6:memorystore-redis-M4"}, "count must be"},
		{[]string{"--from", "24:memorystore-redis-M2", "--to", "6:nope"}, `"nope" is not in the catalog`},
		{[]string{"--from", "24:memorystore-redis-M2", "--to", "6:memorystore-redis-M4", "--cpu-now", "7"}, "0 to 1"},
	} {
		_, stderr, err := kura(t, append([]string{"plan"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error()+stderr, tc.want) {
			t.Errorf("kura plan %v: %v, stderr %q; want an error naming %q", tc.args, err, stderr, tc.want)
		}
	}
}
