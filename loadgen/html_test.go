package loadgen

import (
	"bytes"
	"testing"

	"github.com/kuracache/kura/internal/harness/vistest"
)

// TestSweepHTMLNeutralizesHostileStrings: every string of a sweep result
// (the target, the workload line, the step values, the command line,
// error samples: a user's flags and a server's answers) reaches the page
// with its controls and bidi overrides made visible, not obeyed; so do
// the text summaries.
func TestSweepHTMLNeutralizesHostileStrings(t *testing.T) {
	step := func() *Result {
		return &Result{OpsPerSec: 1000, Latency: Latency{Avg: 0.2, P50: 0.1, P95: 0.3, P99: 0.5, P999: 0.9, Max: 2},
			ErrorSamples: []string{"x"},
			Server:       &ServerReport{Nodes: 1, CPUCores: 0.5, CPUSecondsPer1kOps: 0.01, Commands: map[string]int64{"get": 1}, PerNode: []NodeReport{{Addr: "a"}}}}
	}
	sr := &SweepResult{Param: "p", Command: "c", Steps: []Step{{Value: "1", Result: step()}, {Value: "2", Result: step()}}}
	vistest.Fill(sr)
	var b bytes.Buffer
	if err := sr.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	vistest.CheckPage(t, "sweep report", b.String())
	b.Reset()
	if err := sr.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, st := range sr.Steps {
		if err := st.Result.WriteText(&b); err != nil {
			t.Fatal(err)
		}
	}
	vistest.CheckText(t, "sweep and run text", b.String())
}
