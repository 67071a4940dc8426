// Package benchreport runs the headline benchmarks behind BENCHMARKS.md
// at small sizes (`make bench-report`), writes their results to a
// machine-readable file, draws the page's charts with internal/vis and
// rewrites the page's generated blocks from that file, so that a table
// cannot disagree with its chart or with the results.
//
// The results file is docs/benchmarks/results.json, schema
// "kura.bench-report/v1" (Results below): one Section per question the
// page answers, each with the rows it measured (every sample, the
// median and the spread), the ratios of kura to each peer measured in
// the same run (per round, median, spread, the target and whether it was
// met), a target of a row that has no peer (the change stream's commit ->
// applied p99 against its bound), the machine's load average at the start and end of the section,
// and the command that reproduces it. Results.Headline lists the ids of
// the headline ratios: the figures the README and the docs may quote,
// which TestNoFigureContradictsAHeadline holds them to.
package benchreport

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
)

// Schema names the results file's format.
const Schema = "kura.bench-report/v1"

// Results is the results file.
type Results struct {
	Schema string `json:"schema"`
	// Date is when the run started (RFC 3339, UTC); Seconds how long it
	// took, building the test binaries included.
	Date    string  `json:"date"`
	Seconds float64 `json:"seconds"`
	// BuildSeconds is the part of Seconds spent building the test
	// binaries and kura (on a loaded machine, most of it).
	BuildSeconds float64 `json:"build_seconds"`
	// Commit is the commit the run measured (git rev-parse --short
	// HEAD); Dirty is true when the tree had uncommitted changes to Go,
	// JavaScript or Ruby files (a page must not quote such a run).
	Commit string `json:"commit"`
	Dirty  bool   `json:"dirty"`
	// Full is true for a full-size run (make bench-report-full, under
	// make soak), written to FullResultsPath; the page quotes the
	// small-size run.
	Full    bool    `json:"full,omitempty"`
	Command string  `json:"command"`
	Machine Machine `json:"machine"`
	// Sections, in the page's order.
	Sections []Section `json:"sections"`
	// Headline lists the ids of the headline ratios ("warm-hits.rueidisaside").
	Headline []string `json:"headline"`
}

// Machine is what the run ran on.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPU       string `json:"cpu"`
	OS        string `json:"os"`
	Go        string `json:"go"`
	Redis     string `json:"redis"`
	Memcached string `json:"memcached"`
	Node      string `json:"node"`
	// Ruby and Postgres are `ruby --version`'s and `postgres
	// --version`'s versions, empty where not installed.
	Ruby     string `json:"ruby,omitempty"`
	Postgres string `json:"postgres,omitempty"`
}

// Section is one question of the page and what answered it.
type Section struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Question string `json:"question"`
	// Command reproduces the section's runs by hand.
	Command string `json:"command"`
	// Commit is the commit the section ran at (a rerun of some sections
	// with -only keeps the others' commits).
	Commit string `json:"commit"`
	// Started is when the section started (RFC 3339); Seconds how long
	// it ran.
	Started string  `json:"started"`
	Seconds float64 `json:"seconds"`
	// Load is the 1-, 5- and 15-minute load average at the start and at
	// the end of the section (/proc/loadavg).
	Load   [2][3]float64 `json:"load"`
	Rows   []Row         `json:"rows"`
	Ratios []Ratio       `json:"ratios"`
	// Reruns lists the runs that failed once and were run again, with
	// why (a benchmark's own guard tripping on a loaded machine).
	Reruns []string `json:"reruns,omitempty"`
	// Error is set when the section's run failed; its rows and ratios are
	// then empty and the page says so.
	Error string `json:"error,omitempty"`
}

// Row is one contender's figure: every sample, in round order.
type Row struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Metric is the unit ("ops/s", "ns/op", "B/value").
	Metric string `json:"metric"`
	// Better is "higher" or "lower".
	Better  string    `json:"better"`
	Kura    bool      `json:"kura"`
	Samples []float64 `json:"samples"`
	// Rounds is each sample's round (100 x process + the benchmark's own
	// round number), when the run knows it: ratios pair samples of the
	// same round. Without it samples pair by position.
	Rounds []int   `json:"rounds,omitempty"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// Target is a bound on the row's own median (in its metric; 0: none),
	// for a figure with no peer to divide by: at most Target when lower is
	// better, at least when higher. Met is whether the median reaches it,
	// Analysis where a miss is analysed.
	Target   float64 `json:"target,omitempty"`
	Met      *bool   `json:"met,omitempty"`
	Analysis string  `json:"analysis,omitempty"`
}

// Ratio is kura against one peer, from samples of the same rounds:
// Value(kura)/Value(peer) when higher is better for the metric, the
// inverse when lower is better (so a ratio above 1 always means kura did
// better), except for sizes (Kind "size"), where it is kura's bytes over
// the peer's and lower is better.
type Ratio struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Kura  string `json:"kura"`
	Peer  string `json:"peer"`
	// Kind is "speed" (higher is better) or "size" (lower is better).
	Kind     string    `json:"kind"`
	PerRound []float64 `json:"per_round"`
	Median   float64   `json:"median"`
	Min      float64   `json:"min"`
	Max      float64   `json:"max"`
	// Target is the target for the ratio (0: none); Met whether
	// the median reaches it.
	Target float64 `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
	// Headline marks the figures the README and docs may quote.
	Headline bool `json:"headline"`
	// Analysis links where a missed target is analysed.
	Analysis string `json:"analysis,omitempty"`
}

// Load reads a results file.
func Load(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("benchreport: %s: %w", path, err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("benchreport: %s: schema %q, want %q", path, r.Schema, Schema)
	}
	return &r, nil
}

// Save writes r as indented JSON.
func (r *Results) Save(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Section returns the section with id.
func (r *Results) Section(id string) *Section {
	for i := range r.Sections {
		if r.Sections[i].ID == id {
			return &r.Sections[i]
		}
	}
	return nil
}

// Ratio returns the ratio with id ("section.peer").
func (r *Results) Ratio(id string) *Ratio {
	for i := range r.Sections {
		for j := range r.Sections[i].Ratios {
			if r.Sections[i].Ratios[j].ID == id {
				return &r.Sections[i].Ratios[j]
			}
		}
	}
	return nil
}

// Row returns the section's row with id.
func (s *Section) Row(id string) *Row {
	for i := range s.Rows {
		if s.Rows[i].ID == id {
			return &s.Rows[i]
		}
	}
	return nil
}

// summary returns the median, minimum and maximum of xs (0s when empty).
func summary(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// finish computes a row's summary.
func (r *Row) finish() {
	r.Median, r.Min, r.Max = summary(r.Samples)
	r.judge()
}

// judge sets a row's Met from its median and its target.
func (r *Row) judge() {
	r.Met = nil
	if r.Target <= 0 || len(r.Samples) == 0 {
		return
	}
	met := r.Median >= r.Target
	if r.Better == "lower" {
		met = r.Median <= r.Target
	}
	r.Met = &met
}

// finish computes a ratio from its rows' samples, pairing them by round.
func (q *Ratio) finish(k, p *Row) {
	q.PerRound = nil
	type pair struct{ a, b float64 }
	var pairs []pair
	if len(k.Rounds) == len(k.Samples) && len(p.Rounds) == len(p.Samples) && len(k.Rounds) > 0 {
		for i, rk := range k.Rounds {
			if j := slices.Index(p.Rounds, rk); j >= 0 {
				pairs = append(pairs, pair{k.Samples[i], p.Samples[j]})
			}
		}
	} else {
		for i := 0; i < len(k.Samples) && i < len(p.Samples); i++ {
			pairs = append(pairs, pair{k.Samples[i], p.Samples[i]})
		}
	}
	for _, x := range pairs {
		a, b := x.a, x.b
		var v float64
		switch {
		case q.Kind == "size":
			v = a / b
		case k.Better == "higher":
			v = a / b
		default:
			v = b / a
		}
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			q.PerRound = append(q.PerRound, v)
		}
	}
	q.Median, q.Min, q.Max = summary(q.PerRound)
	q.judge()
}

// judge sets Met from the median and the target, judged on the median as
// the page shows it (two decimals below 10x): 1.002 loads against 1.000
// is "1.00x", at the target.
func (q *Ratio) judge() {
	q.Met = nil
	if q.Target <= 0 || len(q.PerRound) == 0 {
		return
	}
	m := q.Median
	if m < 10 {
		m = math.Round(m*100) / 100
	}
	met := m >= q.Target
	if q.Kind == "size" {
		met = m <= q.Target
	}
	q.Met = &met
}
