package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// maxBenchBytes bounds what ReadBench reads; a sweep with per-node
// reports is a few hundred kilobytes at most.
const maxBenchBytes = 16 << 20

// Measured is what a `kura bench --json` run (or an io-threads sweep)
// measured on the user's own server, in the terms the planner uses.
type Measured struct {
	// Target and Command describe the run, for the report.
	Target  string
	Command string
	// Ops and OpsPerSec are the run's operations and throughput.
	Ops       int64
	OpsPerSec float64
	// CPUSecondsPerOp is the server's CPU per operation.
	CPUSecondsPerOp float64
	// InBytesPerOp and OutBytesPerOp are what the server received and
	// sent per operation (its own counters).
	InBytesPerOp  float64
	OutBytesPerOp float64
	// ServerCPUCores is the server's CPU seconds over the run's seconds:
	// near 1 for a single-threaded server means it was saturated.
	ServerCPUCores float64
	// Scaling is the throughput per io-threads step of a sweep; nil for
	// a single run.
	Scaling *Scaling
	// Notes say what the reader of the plan must know about the
	// measurement (a sweep whose server was not saturated).
	Notes []string
}

// benchResult is the part of loadgen.Result the planner reads (the JSON
// of kura bench --json).
type benchResult struct {
	Target          string  `json:"target"`
	Command         string  `json:"command"`
	Ops             int64   `json:"ops"`
	Errors          int64   `json:"errors"`
	OpsPerSec       float64 `json:"ops_per_sec"`
	DurationSeconds float64 `json:"duration_seconds"`
	Server          *struct {
		CPUSeconds         float64 `json:"cpu_seconds"`
		CPUSecondsPer1kOps float64 `json:"cpu_seconds_per_1k_ops"`
		CPUCores           float64 `json:"cpu_cores"`
		NetInBytes         int64   `json:"net_in_bytes"`
		NetOutBytes        int64   `json:"net_out_bytes"`
	} `json:"server"`
}

// benchSweep is loadgen.SweepResult's JSON (kura bench sweep --json).
type benchSweep struct {
	Param string `json:"param"`
	Steps []struct {
		Value  string       `json:"value"`
		Result *benchResult `json:"result"`
	} `json:"steps"`
}

// ReadBench reads the JSON that `kura bench --json` or `kura bench sweep
// --io-threads ... --json` printed. A single run gives the CPU and bytes
// per operation; an io-threads sweep also gives the thread-scaling curve
// (its one-thread step supplies the per-operation figures).
func ReadBench(r io.Reader) (*Measured, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBenchBytes+1))
	if err != nil {
		return nil, fmt.Errorf("bench result: %w", err)
	}
	if len(data) > maxBenchBytes {
		return nil, fmt.Errorf("%w: bench result larger than %d bytes", ErrInput, maxBenchBytes)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: bench result is not the JSON of kura bench --json: %v", ErrInput, err)
	}
	if _, ok := probe["steps"]; ok {
		var sw benchSweep
		if err := json.Unmarshal(data, &sw); err != nil {
			return nil, fmt.Errorf("%w: bench sweep result: %v", ErrInput, err)
		}
		return fromSweep(&sw)
	}
	if _, ok := probe["ops"]; !ok {
		return nil, fmt.Errorf("%w: not the JSON of kura bench --json (it has no \"ops\")", ErrInput)
	}
	var br benchResult
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&br); err != nil {
		return nil, fmt.Errorf("%w: bench result: %v", ErrInput, err)
	}
	return fromResult(&br)
}

func fromResult(br *benchResult) (*Measured, error) {
	good := br.Ops - br.Errors
	switch {
	case br.Ops <= 0 || good <= 0:
		return nil, fmt.Errorf("%w: bench result has no successful operation", ErrInput)
	case br.Server == nil:
		return nil, fmt.Errorf("%w: bench result has no server counters (kura could not read INFO from %s), so the CPU per operation is unknown", ErrInput, br.Target)
	}
	s := br.Server
	for _, v := range []float64{s.CPUSeconds, s.CPUSecondsPer1kOps, s.CPUCores, float64(s.NetInBytes), float64(s.NetOutBytes), br.OpsPerSec} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: bench result has a negative or non-finite counter", ErrInput)
		}
	}
	m := &Measured{
		Target:          br.Target,
		Command:         br.Command,
		Ops:             br.Ops,
		OpsPerSec:       br.OpsPerSec,
		CPUSecondsPerOp: s.CPUSecondsPer1kOps / 1000,
		InBytesPerOp:    float64(s.NetInBytes) / float64(good),
		OutBytesPerOp:   float64(s.NetOutBytes) / float64(good),
		ServerCPUCores:  s.CPUCores,
	}
	if m.CPUSecondsPerOp == 0 && s.CPUSeconds > 0 {
		m.CPUSecondsPerOp = s.CPUSeconds / float64(good)
	}
	if m.CPUSecondsPerOp == 0 {
		return nil, fmt.Errorf("%w: bench result shows no server CPU (a run too short to measure?): run kura bench longer", ErrInput)
	}
	if m.CPUSecondsPerOp > 10 {
		return nil, fmt.Errorf("%w: bench result shows %g CPU seconds per operation", ErrInput, m.CPUSecondsPerOp)
	}
	return m, nil
}

func fromSweep(sw *benchSweep) (*Measured, error) {
	if sw.Param != "io-threads" {
		return nil, fmt.Errorf("%w: a sweep over %q has no thread curve: give a single kura bench --json run, or a sweep over --io-threads", ErrInput, sw.Param)
	}
	type step struct {
		threads int
		res     *benchResult
	}
	var steps []step
	for _, st := range sw.Steps {
		t, err := strconv.Atoi(st.Value)
		if err != nil || t < 1 || t > 1024 {
			return nil, fmt.Errorf("%w: io-threads sweep step %q is not a thread count", ErrInput, st.Value)
		}
		if st.Result == nil || !(st.Result.OpsPerSec > 0) || math.IsInf(st.Result.OpsPerSec, 0) {
			return nil, fmt.Errorf("%w: io-threads sweep step %d has no throughput", ErrInput, t)
		}
		steps = append(steps, step{t, st.Result})
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("%w: io-threads sweep has no steps", ErrInput)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].threads < steps[j].threads })
	sc := &Scaling{Name: "io-threads sweep (kura bench sweep)"}
	for i, st := range steps {
		if i > 0 && st.threads == steps[i-1].threads {
			return nil, fmt.Errorf("%w: io-threads sweep has step %d twice", ErrInput, st.threads)
		}
		sc.Points = append(sc.Points, ScalePoint{Threads: st.threads, OpsPerSec: st.res.OpsPerSec})
	}
	if err := sc.validate(); err != nil {
		return nil, fmt.Errorf("%w: io-threads sweep: %v", ErrInput, err)
	}
	m, err := fromResult(steps[0].res)
	if err != nil {
		return nil, err
	}
	m.Scaling = sc
	if one := steps[0]; one.threads == 1 && one.res.Server != nil && one.res.Server.CPUCores < 0.8 {
		m.Notes = append(m.Notes, fmt.Sprintf("the io-threads sweep's one-thread step kept the server only %.0f%% busy: its curve measures the load generator more than the server (run kura bench sweep from another machine, or with more connections and --pipeline)",
			100*one.res.Server.CPUCores))
	}
	return m, nil
}

// Apply fills the workload's per-operation figures from the measurement,
// leaving what the user set.
func (m *Measured) Apply(w *Workload) {
	if w.CPUSecondsPerOp == 0 && w.OpsPerSecPerThread == 0 {
		w.CPUSecondsPerOp = m.CPUSecondsPerOp
	}
	if w.InBytesPerOp == 0 && w.OutBytesPerOp == 0 && w.ReadValueBytes == 0 && w.WriteValueBytes == 0 {
		w.InBytesPerOp, w.OutBytesPerOp = m.InBytesPerOp, m.OutBytesPerOp
	}
	if w.Scaling == nil && m.Scaling != nil {
		w.Scaling = m.Scaling
	}
	w.Notes = append(w.Notes, m.Notes...)
}
