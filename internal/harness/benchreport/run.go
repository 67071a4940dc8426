package benchreport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
)

// Options configures Run.
type Options struct {
	// Root is the repository's root directory.
	Root string
	// Only, when not empty, runs only these section ids and keeps the
	// other sections of Previous as they were.
	Only []string
	// Full runs the full sizes (make soak): three times the rounds and
	// the benchmark time, ten times the requests of the load generator.
	Full     bool
	Previous *Results
	// Log receives progress lines.
	Log io.Writer
}

// env is what a section's run needs.
type env struct {
	ctx  context.Context
	root string
	bins string // directory of the built test binaries and kura
	log  io.Writer
	// build is the time spent building test binaries and kura.
	build time.Duration
	full  bool
	// reruns are the runs of the current section that failed once.
	reruns []string
	// built are the packages whose test binaries are in bins.
	built map[string]bool
}

// failure is the first line of a failed run's output that says why.
func failure(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasSuffix(l, ".go") || strings.HasPrefix(l, "---") || l == "" || !strings.Contains(l, ".go:") {
			continue
		}
		if _, msg, ok := strings.Cut(l, ": "); ok {
			return msg
		}
	}
	return firstLine(tail(out))
}

// scale returns n, or three times n at full size.
func (e *env) scale(n int) int {
	if e.full {
		return 3 * n
	}
	return n
}

// sized returns a goRun at full size when e.full: rounds, round counts
// in its environment and a benchmark time in seconds tripled (a fixed
// iteration count such as 300x tripled too; 1x stays: those benchmarks
// size themselves).
func (e *env) sized(g goRun) goRun {
	if !e.full {
		return g
	}
	g.Rounds = e.scale(max(1, g.Rounds))
	if n, ok := strings.CutSuffix(g.Benchtime, "s"); ok {
		if v, err := strconv.Atoi(n); err == nil {
			g.Benchtime = strconv.Itoa(3*v) + "s"
		}
	} else if n, ok := strings.CutSuffix(g.Benchtime, "x"); ok && n != "1" {
		if v, err := strconv.Atoi(n); err == nil {
			g.Benchtime = strconv.Itoa(3*v) + "x"
		}
	}
	env := slices.Clone(g.Env)
	for i, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasSuffix(k, "_ROUNDS") {
			if n, err := strconv.Atoi(v); err == nil {
				env[i] = k + "=" + strconv.Itoa(3*n)
			}
		}
	}
	g.Env = env
	return g
}

// Run builds the test binaries, runs every section and returns the
// results. A section that fails is recorded with its error; the others
// still run.
func Run(ctx context.Context, o Options) (*Results, error) {
	start := time.Now()
	if o.Log == nil {
		o.Log = io.Discard
	}
	bins, err := os.MkdirTemp("", "kura-bench-report-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bins)
	e := &env{ctx: ctx, root: o.Root, bins: bins, log: o.Log, full: o.Full, built: map[string]bool{}}
	res := &Results{Schema: Schema, Date: start.UTC().Format(time.RFC3339), Command: "make bench-report", Machine: machine(ctx), Full: o.Full}
	if o.Full {
		res.Command = "make bench-report-full"
	}
	res.Commit, res.Dirty = commit(ctx, o.Root)
	want := map[string]bool{}
	for _, id := range o.Only {
		want[id] = true
	}
	for _, sp := range specs() {
		if len(want) > 0 && !want[sp.ID] {
			if o.Previous != nil {
				if s := o.Previous.Section(sp.ID); s != nil {
					res.Sections = append(res.Sections, *s)
				}
			}
			continue
		}
		fmt.Fprintf(o.Log, "bench-report: %s\n", sp.ID)
		sec := Section{ID: sp.ID, Title: sp.Title, Question: sp.Question, Command: sp.Command, Commit: res.Commit, Started: time.Now().UTC().Format(time.RFC3339)}
		secStart := time.Now()
		sec.Load[0] = loadavg()
		e.reruns = nil
		samples, rounds, err := e.runSpec(sp)
		sec.Reruns = e.reruns
		sec.Load[1] = loadavg()
		sec.Seconds = time.Since(secStart).Round(time.Second).Seconds()
		if err != nil {
			sec.Error = err.Error()
			fmt.Fprintf(o.Log, "bench-report: %s failed: %v\n", sp.ID, err)
		} else {
			fill(&sec, sp, samples, rounds)
		}
		res.Sections = append(res.Sections, sec)
	}
	for _, s := range res.Sections {
		for _, q := range s.Ratios {
			if q.Headline {
				res.Headline = append(res.Headline, q.ID)
			}
		}
	}
	res.Seconds = time.Since(start).Round(time.Second).Seconds()
	res.BuildSeconds = e.build.Round(time.Second).Seconds()
	return res, nil
}

// fill turns samples into the section's rows and ratios. rounds, when
// not nil, gives each sample's round; without it samples pair by
// position.
func fill(sec *Section, sp spec, samples map[string][]float64, rounds map[string][]int) {
	for _, rs := range sp.Rows {
		r := Row{ID: rs.ID, Name: rs.Name, Metric: rs.Metric, Better: rs.Better, Kura: rs.Kura, Target: rs.Target, Analysis: rs.Analysis}
		// A sample that is not a finite number (a benchmark's NaN, a Node
		// round that wrote null) is left out: JSON cannot hold it and a
		// median should not.
		for i, v := range samples[rs.ID] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			r.Samples = append(r.Samples, v)
			if i < len(rounds[rs.ID]) {
				r.Rounds = append(r.Rounds, rounds[rs.ID][i])
			}
		}
		r.finish()
		sec.Rows = append(sec.Rows, r)
	}
	for _, qs := range sp.Ratios {
		q := Ratio{ID: sp.ID + "." + qs.Peer, Label: qs.Label, Kura: qs.Kura, Peer: qs.Peer, Kind: qs.Kind, Target: qs.Target, Headline: qs.Headline, Analysis: qs.Analysis}
		if qs.Kura != "kura" && strings.Count(sp.ID, ".") == 0 {
			// Two ratios against one peer need distinct ids.
			for _, o := range sp.Ratios {
				if o.Peer == qs.Peer && o.Kura != qs.Kura {
					q.ID = sp.ID + "." + qs.Kura + "-vs-" + qs.Peer
				}
			}
		}
		k, p := sec.Row(qs.Kura), sec.Row(qs.Peer)
		if k != nil && p != nil {
			q.finish(k, p)
		}
		sec.Ratios = append(sec.Ratios, q)
	}
}

// testBinary builds pkg's test binary once per run and returns its path.
func (e *env) testBinary(pkg string) (string, error) {
	bin := filepath.Join(e.bins, strings.NewReplacer("/", "_", ".", "root").Replace(pkg)+".test")
	if e.built[pkg] {
		return bin, nil
	}
	fmt.Fprintf(e.log, "bench-report:   go test -c %s\n", pkg)
	t0 := time.Now()
	cmd := exec.CommandContext(e.ctx, "go", "test", "-c", "-o", bin, pkg)
	cmd.Dir = e.root
	out, err := cmd.CombinedOutput()
	e.build += time.Since(t0)
	if err != nil {
		return "", fmt.Errorf("go test -c %s: %v\n%s", pkg, err, tail(out))
	}
	e.built[pkg] = true
	return bin, nil
}

// retry runs cmd (made afresh for each try) and, when it fails, once
// more: a benchmark that guards its own premise (a warm set that must not
// miss, a lag that must not grow) can trip on a loaded machine. The page
// says which run was redone and why (what names the run).
func (e *env) retry(what string, cmd func() *exec.Cmd) ([]byte, error) {
	for try := 0; ; try++ {
		out, err := cmd().CombinedOutput()
		if err == nil {
			return out, nil
		}
		if try == 1 || e.ctx.Err() != nil {
			return out, fmt.Errorf("%s: %v\n%s", what, err, tail(out))
		}
		e.reruns = append(e.reruns, fmt.Sprintf("%s: %s", what, failure(out)))
		fmt.Fprintf(e.log, "bench-report:   rerun after: %s\n", e.reruns[len(e.reruns)-1])
	}
}

// runSpec returns each row's samples and the round of each sample.
func (e *env) runSpec(sp spec) (map[string][]float64, map[string][]int, error) {
	if sp.Custom != nil {
		s, err := sp.Custom(e)
		return s, nil, err
	}
	lines := map[string][]result{}
	for _, g := range sp.Go {
		g = e.sized(g)
		bin, err := e.testBinary(g.Pkg)
		if err != nil {
			return nil, nil, err
		}
		args := []string{"-test.run", "^$", "-test.bench", g.Bench, "-test.benchtime", g.Benchtime, "-test.count", "1", "-test.benchmem"}
		for iter := range max(1, g.Rounds) {
			out, err := e.retry(fmt.Sprintf("%s %s", g.Pkg, g.Bench), func() *exec.Cmd {
				cmd := exec.CommandContext(e.ctx, bin, args...)
				cmd.Dir = filepath.Join(e.root, g.Pkg)
				cmd.Env = append(append(os.Environ(), "KURA_REQUIRE_SERVERS=1"), g.Env...)
				return cmd
			})
			if err != nil {
				return nil, nil, err
			}
			for name, rs := range parseBench(out) {
				for _, r := range rs {
					r.Round += 100 * iter
					lines[name] = append(lines[name], r)
				}
			}
		}
	}
	samples := map[string][]float64{}
	rounds := map[string][]int{}
	for _, rs := range sp.Rows {
		for _, r := range lines[rs.Bench] {
			if v, ok := r.Metrics[rs.Metric]; ok {
				samples[rs.ID] = append(samples[rs.ID], v)
				rounds[rs.ID] = append(rounds[rs.ID], r.Round)
			}
		}
		if len(samples[rs.ID]) == 0 {
			return nil, nil, fmt.Errorf("no %s for %s in the output", rs.Metric, rs.Bench)
		}
	}
	return samples, rounds, nil
}

var (
	benchLine  = regexp.MustCompile(`^Benchmark(\S+)\s+(\d+)\s+(\S+ ns/op.*)$`)
	benchName  = regexp.MustCompile(`^Benchmark(\S+)`)
	resultRest = regexp.MustCompile(`^(\d+)\s+(\S+ ns/op.*)$`)
	roundPart  = regexp.MustCompile(`(^|/)round(\d+)/`)
	procsPart  = regexp.MustCompile(`-\d+$`)
)

// result is one benchmark result line: its round (the N of a "roundN/"
// level, 0 without one) and its metrics.
type result struct {
	Round   int
	Metrics map[string]float64
}

// parseBench reads `go test -bench` output: per benchmark name (without
// "Benchmark", a "roundN/" level and the -GOMAXPROCS suffix), its results
// in order. A benchmark that logs while it runs splits its line (the name
// is printed before the run, the figures after): the figures are given to
// the last name printed alone.
func parseBench(out []byte) map[string][]result {
	res := map[string][]result{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	pending := ""
	add := func(raw, fields string) {
		name := procsPart.ReplaceAllString(raw, "")
		round := 0
		if m := roundPart.FindStringSubmatch(name); m != nil {
			round, _ = strconv.Atoi(m[2])
		}
		name = roundPart.ReplaceAllString(name, "$1")
		f := strings.Fields(fields)
		metrics := map[string]float64{}
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				metrics[f[i+1]] = v
			}
		}
		res[name] = append(res[name], result{round, metrics})
	}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := benchLine.FindStringSubmatch(line); m != nil {
			add(m[1], m[3])
			pending = ""
			continue
		}
		if m := benchName.FindStringSubmatch(line); m != nil {
			pending = m[1]
			continue
		}
		if m := resultRest.FindStringSubmatch(line); m != nil && pending != "" {
			add(pending, m[2])
			pending = ""
		}
	}
	return res
}

func tail(b []byte) string {
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// runLoadgen starts a private redis-server and runs `kura bench` and
// redis-benchmark back to back on it, alternating which goes first, for
// GET and SET at -P 16 and GET at -P 1.
func runLoadgen(e *env) (map[string][]float64, error) {
	rb, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return nil, errors.New("redis-benchmark is not installed (make servers)")
	}
	kura := filepath.Join(e.bins, "kura")
	cmd := exec.CommandContext(e.ctx, "go", "build", "-o", kura, "./cmd/kura")
	cmd.Dir = e.root
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	e.build += time.Since(t0)
	if err != nil {
		return nil, fmt.Errorf("go build ./cmd/kura: %v\n%s", err, out)
	}
	srv, err := servers.StartRedis(e.ctx, servers.RedisConfig{})
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	url := "redis://" + srv.Addr
	_, port, _ := strings.Cut(srv.Addr, ":")
	if out, err := exec.CommandContext(e.ctx, kura, "bench", url, "-t", "set", "-r", "100000", "-d", "100", "-n", "100000", "-q", "--prefill").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kura bench --prefill: %v\n%s", err, out)
	}
	reqsPerSec := regexp.MustCompile(`([0-9.]+) requests per second`)
	samples := map[string][]float64{}
	type cfg struct {
		t, p, n  string
		kura, rb string
	}
	cfgs := []cfg{{"get", "16", "1000000", "kura-get-p16", "rb-get-p16"}, {"set", "16", "1000000", "kura-set-p16", "rb-set-p16"}, {"get", "1", "100000", "kura-get-p1", "rb-get-p1"}}
	if e.full {
		for i := range cfgs {
			cfgs[i].n += "0"
		}
	}
	for round := range e.scale(3) {
		for _, c := range cfgs {
			runKura := func() error {
				out, err := exec.CommandContext(e.ctx, kura, "bench", url, "-t", c.t, "-c", "50", "-n", c.n, "-d", "100", "-r", "100000", "-P", c.p, "-q", "--json").Output()
				if err != nil {
					return fmt.Errorf("kura bench: %v\n%s", err, out)
				}
				var r struct {
					OpsPerSec float64 `json:"ops_per_sec"`
				}
				if err := json.Unmarshal(out, &r); err != nil || r.OpsPerSec <= 0 {
					return fmt.Errorf("kura bench --json: %v: %.200s", err, out)
				}
				samples[c.kura] = append(samples[c.kura], r.OpsPerSec)
				return nil
			}
			runRB := func() error {
				out, err := exec.CommandContext(e.ctx, rb, "-p", port, "-t", c.t, "-c", "50", "-n", c.n, "-d", "100", "-r", "100000", "-P", c.p, "-q").CombinedOutput()
				if err != nil {
					return fmt.Errorf("redis-benchmark: %v\n%s", err, out)
				}
				m := reqsPerSec.FindAllSubmatch(bytes.ReplaceAll(out, []byte("\r"), []byte("\n")), -1)
				if len(m) == 0 {
					return fmt.Errorf("redis-benchmark printed no rate: %.200s", out)
				}
				v, _ := strconv.ParseFloat(string(m[len(m)-1][1]), 64)
				samples[c.rb] = append(samples[c.rb], v)
				return nil
			}
			first, second := runKura, runRB
			if round%2 == 1 {
				first, second = runRB, runKura
			}
			if err := first(); err != nil {
				return nil, err
			}
			if err := second(); err != nil {
				return nil, err
			}
		}
	}
	return samples, nil
}

// runNode runs js/bench/fetch.mjs (after npm ci when js/node_modules
// is missing, and the TypeScript build) and reads its per-round figures.
func runNode(e *env) (map[string][]float64, error) {
	js := filepath.Join(e.root, "js")
	run := func(env []string, name string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(e.ctx, name, args...)
		cmd.Dir = js
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return out, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(out))
		}
		return out, nil
	}
	if _, err := os.Stat(filepath.Join(js, "node_modules")); err != nil {
		if _, err := run(nil, "npm", "ci", "--no-audit", "--no-fund"); err != nil {
			return nil, err
		}
	}
	if _, err := run(nil, "npm", "run", "build"); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "kura-node-bench-*.json")
	if err != nil {
		return nil, err
	}
	f.Close()
	defer os.Remove(f.Name())
	if _, err := run([]string{"ROUNDS=" + strconv.Itoa(e.scale(3)), "ROUND_MS=1000", "RESULTS_JSON=" + f.Name()}, "node", "bench/fetch.mjs"); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return nil, err
	}
	var rounds map[string][]float64
	if err := json.Unmarshal(b, &rounds); err != nil {
		return nil, fmt.Errorf("bench/fetch.mjs RESULTS_JSON: %w", err)
	}
	ids := map[string]string{
		"kura fetch":             "kura",
		"plain GET + JSON.parse": "plain",
		"GET + snappy + JSON.parse (the field report)": "snappy",
		"keyv get (@keyv/redis)":                       "keyv",
		"cache-manager wrap (keyv redis store)":        "cache-manager",
		"BentoCache getOrSet (Redis layer, no L1)":     "bentocache",
	}
	samples := map[string][]float64{}
	for name, id := range ids {
		if len(rounds[name]) == 0 {
			return nil, fmt.Errorf("bench/fetch.mjs has no rounds for %q", name)
		}
		samples[id] = rounds[name]
	}
	return samples, nil
}

func loadavg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

func machine(ctx context.Context) Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	version := func(re string, name string, args ...string) string {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			return ""
		}
		if s := regexp.MustCompile(re).FindStringSubmatch(string(out)); s != nil {
			return s[1]
		}
		return strings.TrimSpace(string(out))
	}
	m.Redis = version(`v=(\S+)`, "redis-server", "--version")
	m.Memcached = version(`memcached (\S+)`, "memcached", "-V")
	m.Node = version(`(v\S+)`, "node", "--version")
	m.Ruby = version(`ruby (\S+)`, "ruby", "--version")
	if pg, err := servers.LookPath("postgres"); err == nil {
		m.Postgres = version(`\) (\S+)`, pg, "--version")
	}
	return m
}

// commit returns the short commit of root's HEAD, and whether Go,
// JavaScript or Ruby files differ from it.
func commit(ctx context.Context, root string) (string, bool) {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown", true
	}
	st, _ := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--", "*.go", "*.mjs", "*.ts", "*.rb", "go.mod", "go.sum").Output()
	return strings.TrimSpace(string(out)), len(bytes.TrimSpace(st)) > 0
}
