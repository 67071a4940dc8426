package demo

import (
	"strings"
	"testing"
)

// TestHealthVerdictSaysOnlyWhatTheNumbersShow: the health card's sentence
// follows its own counts: a fair comparison only under the same load
// (within 10%), "did worse" when the monitor gave more false downs (a run
// once gave the only false down to kura's monitor, 1 vs 0, under less
// than half the load while the card claimed the opposite), and never a
// claim that the monitor avoided a down it did not avoid.
func TestHealthVerdictSaysOnlyWhatTheNumbersShow(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after healthPhase
		want, not     []string
	}{
		{"the reported run", healthPhase{down: 0, pings: 900, loadOps: 80000}, healthPhase{down: 1, pings: 20, loadOps: 36000},
			[]string{"differed", "do not compare", "down once, more than", "did worse"}, []string{"same background load"}},
		{"monitor better", healthPhase{down: 3, pings: 900, loadOps: 80000}, healthPhase{down: 0, pings: 20, loadOps: 79000},
			[]string{"same background load", "down 0 times, per-request PINGs 3 times"}, []string{"did worse", "differed"}},
		{"neither", healthPhase{pings: 900, loadOps: 80000}, healthPhase{pings: 20, loadOps: 80000},
			[]string{"Neither judged", "880 PINGs"}, []string{"did worse"}},
		{"equal downs", healthPhase{down: 2, pings: 900, loadOps: 80000}, healthPhase{down: 2, pings: 20, loadOps: 80000},
			[]string{"Both judged the busy node down 2 times", "did no better"}, []string{"did worse"}},
	} {
		got := healthVerdict(&tc.before, &tc.after)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q says %q", tc.name, got, n)
			}
		}
	}
}
