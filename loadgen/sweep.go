package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kuracache/kura/internal/vis"
)

// Sweep parameters: the Config field that changes from step to step.
const (
	SweepConnections = "connections"
	SweepPipeline    = "pipeline"
	SweepDataSize    = "data-size"
	SweepIOThreads   = "io-threads"
)

// ServerStarter starts a private server with the given number of threads
// (Redis io-threads, memcached -t) and returns its target URL and a stop
// function.
type ServerStarter func(ctx context.Context, threads int) (target string, stop func(), err error)

// SweepConfig is a series of runs that differ in one parameter.
type SweepConfig struct {
	// Base is the run every step starts from.
	Base Config
	// Param is SweepConnections, SweepPipeline, SweepDataSize or
	// SweepIOThreads.
	Param string
	// Values are the parameter's values, one step each, in order.
	Values []string
	// StartServer is required for SweepIOThreads: each step gets a fresh
	// server with that many threads. loadgen starts no servers itself; the
	// caller (`kura bench sweep`) supplies them.
	StartServer ServerStarter
	// OnStep, when set, is called after each step.
	OnStep func(Step)
}

// Step is one run of a sweep.
type Step struct {
	Value  string  `json:"value"`
	Result *Result `json:"result"`
}

// SweepResult holds every step.
type SweepResult struct {
	Param string `json:"param"`
	Steps []Step `json:"steps"`
	// Command is the command line or description shown in reports.
	Command string `json:"command,omitempty"`
}

// ParseList splits "1,8,64" into its values, for sweep flags.
func ParseList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// SetParam sets the sweepable parameter param (SweepConnections,
// SweepPipeline or SweepDataSize) of c from its flag text. For
// SweepIOThreads it only checks v: the thread count belongs to a server
// that Sweep starts, not to the Config.
func SetParam(c *Config, param, v string) error {
	switch param {
	case SweepConnections, SweepPipeline, SweepIOThreads:
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfgErr("--%s %q: want whole numbers from 1, comma-separated", param, v)
		}
		switch param {
		case SweepConnections:
			c.Connections = n
		case SweepPipeline:
			c.Pipeline = n
		}
	case SweepDataSize:
		c.DataSize = v
	default:
		return cfgErr("sweep over connections, pipeline, data-size or io-threads, not %q", param)
	}
	return nil
}

// stepConfig returns the Config of the step with value v. Sweep checks every
// step before the first runs, so a typo in the last value does not waste
// the earlier steps.
func (sc SweepConfig) stepConfig(v string) (Config, error) {
	c := sc.Base
	if err := SetParam(&c, sc.Param, v); err != nil {
		return c, err
	}
	if sc.Param != SweepIOThreads {
		if _, err := c.validate(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Sweep runs one step per value, one after another, and returns them all.
// A failing step ends the sweep with the steps done so far and the error.
func Sweep(ctx context.Context, sc SweepConfig) (*SweepResult, error) {
	if len(sc.Values) == 0 {
		return nil, cfgErr("a sweep needs values, such as --connections 1,8,64,256")
	}
	if sc.Param == SweepIOThreads {
		if sc.StartServer == nil {
			return nil, cfgErr("an --io-threads sweep starts its own servers; it needs a StartServer")
		}
		if sc.Base.Target != "" {
			return nil, cfgErr("--io-threads starts a private server for each step; drop the target URL")
		}
	}
	for _, v := range sc.Values {
		if _, err := sc.stepConfig(v); err != nil {
			return nil, err
		}
	}
	out := &SweepResult{Param: sc.Param}
	for _, v := range sc.Values {
		c, _ := sc.stepConfig(v)
		var stop func()
		if sc.Param == SweepIOThreads {
			n, _ := strconv.Atoi(v)
			target, st, err := sc.StartServer(ctx, n)
			if err != nil {
				return out, fmt.Errorf("start a server with %s threads: %w", v, err)
			}
			stop = st
			c.Target = target
		}
		res, err := Run(ctx, c)
		if stop != nil {
			stop()
		}
		var ce *ConfigError
		if errors.As(err, &ce) {
			return out, &ConfigError{Reason: fmt.Sprintf("step %s=%s: %s", sc.Param, v, ce.Reason), Err: ce.Err}
		}
		if err != nil {
			return out, fmt.Errorf("step %s=%s: %w", sc.Param, v, err)
		}
		st := Step{Value: v, Result: res}
		out.Steps = append(out.Steps, st)
		if sc.OnStep != nil {
			sc.OnStep(st)
		}
		if res.Interrupted || ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

// WriteText writes one line per step: the value, throughput and p99.
func (sr *SweepResult) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %14s %10s %10s %10s %14s\n", vis.Escape(sr.Param), "ops/s", "p50 ms", "p99 ms", "errors", "srv cpu/1k op")
	for _, st := range sr.Steps {
		r := st.Result
		cpu := "-"
		if r.Server != nil {
			cpu = fmt.Sprintf("%.6f", r.Server.CPUSecondsPer1kOps)
		}
		fmt.Fprintf(&b, "%-12s %14.1f %10.3f %10.3f %10d %14s\n", vis.Escape(st.Value), r.OpsPerSec, r.Latency.P50, r.Latency.P99, r.Errors, cpu)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
