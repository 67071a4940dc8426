// Package demo reproduces, on this machine, the cache problems kura was built
// for, each against a real database and real cache servers, and measures
// kura's answer next to the problem. It backs `kura demo`; the command is a
// thin shell over Run.
//
// Run starts what the scenarios need (a private PostgreSQL, redis-server and
// three memcached), loads a deterministic data set into PostgreSQL (news
// articles; users and their item inventories) and runs the scenarios in turn.
// A scenario whose server cannot be started is skipped with the reason; a
// scenario whose kura capability is not built says so. Nothing is ever
// replaced by an in-process stand-in: every byte and round trip counted
// crossed a real socket to a real server.
//
// The results are plain values (Report) that print as text tables, JSON or
// a self-contained HTML page with inline SVG charts.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Status says whether a scenario ran.
type Status string

// The states of a scenario.
const (
	// Ran: the scenario reproduced the problem and measured kura's answer.
	Ran Status = "ran"
	// Partial: the problem was reproduced, but part of kura's answer is
	// not built yet (Result.Missing says which).
	Partial Status = "partial"
	// Skipped: a server the scenario needs could not be started
	// (Result.Reason says why).
	Skipped Status = "skipped"
	// NotBuilt: the kura capability the scenario shows does not exist yet.
	NotBuilt Status = "not built yet"
)

// Table is a table of a scenario, already formatted for a person.
type Table struct {
	Title   string     `json:"title,omitempty"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
}

// Bar is one bar of a Chart.
type Bar struct {
	Label string  `json:"label"`
	Value float64 `json:"value"`
	// Kura marks the bars that are kura's answer (drawn in its colour).
	Kura bool `json:"kura,omitempty"`
}

// Chart is a horizontal bar chart: one measured quantity per bar.
type Chart struct {
	Title string `json:"title"`
	// Note is a caveat printed with the chart, under its title, for what
	// the bars must not be read as.
	Note string `json:"note,omitempty"`
	// Unit names the quantity ("bytes", "ms", "round trips").
	Unit string `json:"unit"`
	Bars []Bar  `json:"bars"`
}

// Check is one before/after comparison on a count (never on a time): the
// problem's number and kura's, and which way kura's must go.
type Check struct {
	// What is counted, in words ("bytes the server sent").
	What   string `json:"what"`
	Before int64  `json:"before"`
	After  int64  `json:"after"`
	// Want is "less" (kura's count must be lower), "more" (kura's must be
	// higher: a warning that only kura gives), "no more" or "equal".
	Want string `json:"want"`
}

// Holds reports whether the comparison went the way it should.
func (c Check) Holds() bool {
	switch c.Want {
	case "equal":
		return c.Before == c.After
	case "more":
		return c.After > c.Before
	case "no more":
		return c.After <= c.Before
	default:
		return c.After < c.Before
	}
}

// Result is what one scenario showed.
type Result struct {
	// Name is the --only name ("bytes").
	Name string `json:"name"`
	// Title names the problem ("Network bytes and value size").
	Title string `json:"title"`
	// Problem states the problem in one sentence a user recognises.
	Problem string `json:"problem"`
	// Answer states kura's answer in one sentence.
	Answer string `json:"answer"`
	Status Status `json:"status"`
	// Reason explains a skip or what is not built.
	Reason string `json:"reason,omitempty"`
	// Headline is the scenario's result in one line (before -> after).
	Headline string `json:"headline,omitempty"`
	// Missing lists the parts of kura's answer that are not built yet.
	Missing []string `json:"missing,omitempty"`
	Tables  []Table  `json:"tables,omitempty"`
	Charts  []Chart  `json:"charts,omitempty"`
	Checks  []Check  `json:"checks,omitempty"`
	// Counts holds the scenario's raw counts by name, for scripts
	// ("cold.per_key.round_trips").
	Counts   map[string]int64 `json:"counts,omitempty"`
	Notes    []string         `json:"notes,omitempty"`
	Commands []string         `json:"commands,omitempty"`
	// Seconds is how long the scenario took.
	Seconds float64 `json:"seconds"`
}

func (r *Result) count(name string, v int64) {
	if r.Counts == nil {
		r.Counts = map[string]int64{}
	}
	r.Counts[name] = v
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Size scales every scenario. Full is what `kura demo` runs; Small is the
// reduced size of the end-to-end test.
type Size struct {
	Articles      int           // rows in the articles table
	Reads         int           // Fetches per codec
	DictSamples   int           // articles the zstd dictionary is trained on
	Concurrency   int           // reading goroutines
	Items         int           // items of the user who logs in
	SweepDuration time.Duration // per step of the bench sweep
	LoadDuration  time.Duration // the health scenario's saturation phase
	StallDuration time.Duration // the health scenario's stalled-server phase
	HugeBytes     int           // the huge value's size
}

// FullSize is the size `kura demo` runs (well under 4 minutes on 2 cores).
func FullSize() Size {
	return Size{Articles: 1000, Reads: 20000, DictSamples: 100, Concurrency: 16, Items: 2000,
		SweepDuration: 3 * time.Second, LoadDuration: 5 * time.Second, StallDuration: 2 * time.Second, HugeBytes: 1_300_000}
}

// SmallSize is the size of the end-to-end test (every scenario, seconds
// each).
func SmallSize() Size {
	return Size{Articles: 40, Reads: 200, DictSamples: 8, Concurrency: 4, Items: 300,
		SweepDuration: 300 * time.Millisecond, LoadDuration: time.Second, StallDuration: 700 * time.Millisecond, HugeBytes: 1_300_000}
}

// Config configures Run. The zero value runs every scenario at FullSize.
type Config struct {
	// Only names the scenarios to run (see Names); empty runs all.
	Only []string
	// Size scales the scenarios; the zero value means FullSize.
	Size Size
	// Seed makes the data set reproducible; 0 means 1.
	Seed int64
	// Progress receives one line per step (nil discards them).
	Progress io.Writer
	// Command is how the demo was started, for the report ("kura demo").
	// If blank, "kura demo".
	Command string
}

// ErrUnknownScenario is returned for an --only name that is not a scenario.
var ErrUnknownScenario = errors.New("kura: demo: unknown scenario")

type scenario struct {
	name, title, problem, answer string
	// needs lists the servers: "postgres", "redis", "memcached".
	needs []string
	run   func(ctx context.Context, env *Env, res *Result) error
}

func scenarios() []scenario {
	return []scenario{bytesScenario(), loginScenario(), nodesScenario(), healthScenario(), hugeScenario(), staleScenario()}
}

// Names returns the scenario names, in the order they run.
func Names() []string {
	var out []string
	for _, s := range scenarios() {
		out = append(out, s.name)
	}
	return out
}

// Run starts the servers the chosen scenarios need, loads the data set,
// runs the scenarios and returns the report. A scenario that fails is
// reported with its error as the reason; Run itself fails only for a bad
// Config or a cancelled context.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Size == (Size{}) {
		cfg.Size = FullSize()
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Command == "" {
		cfg.Command = "kura demo"
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	chosen, err := choose(cfg.Only)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Command: cfg.Command, Machine: describeMachine(), Started: start.UTC()}
	needs := map[string]bool{}
	for _, s := range chosen {
		for _, n := range s.needs {
			needs[n] = true
		}
	}
	env := startEnv(ctx, needs, cfg, progress)
	defer env.Close()
	rep.SetupSeconds = time.Since(start).Seconds()
	rep.Servers = env.describe()
	for _, s := range chosen {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res := &Result{Name: s.name, Title: s.title, Problem: s.problem, Answer: s.answer, Status: Ran}
		t0 := time.Now()
		if why := env.missing(s.needs); why != "" {
			res.Status, res.Reason = Skipped, why
			fmt.Fprintf(progress, "%s: skipped: %s\n", s.title, why)
		} else {
			fmt.Fprintf(progress, "%s ...\n", s.title)
			if err := s.run(ctx, env, res); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				res.Status, res.Reason = Skipped, "failed: "+err.Error()
				fmt.Fprintf(progress, "%s: failed: %v\n", s.title, err)
			}
		}
		if res.Status == Ran && len(res.Missing) > 0 {
			res.Status = Partial
		}
		res.Seconds = time.Since(t0).Seconds()
		rep.Scenarios = append(rep.Scenarios, *res)
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

func choose(only []string) ([]scenario, error) {
	all := scenarios()
	if len(only) == 0 {
		return all, nil
	}
	var out []scenario
	for _, name := range only {
		name = strings.TrimSpace(strings.ToLower(name))
		found := false
		for _, s := range all {
			if s.name == name {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w %q (the scenarios are: %s)", ErrUnknownScenario, name, strings.Join(Names(), ", "))
		}
	}
	return out, nil
}
