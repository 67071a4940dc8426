package demo

import (
	"strings"
	"testing"
)

// TestPricedMoves: the "How many nodes" card prices the two resizes with
// the figures of kura plan's golden tests (cmd/kura/testdata/golden:
// plan-memorystore-resize.txt, plan-network-step-down.txt), and names the
// problem, not a report.
func TestPricedMoves(t *testing.T) {
	var res Result
	if err := pricedMoves(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Tables) != 2 {
		t.Fatalf("%d tables", len(res.Tables))
	}
	row := func(tb Table, first string) []string {
		for _, r := range tb.Rows {
			if r[0] == first {
				return r
			}
		}
		t.Fatalf("table %q has no row %q", tb.Title, first)
		return nil
	}
	tiers := res.Tables[0]
	if r := row(tiers, "per month"); r[1] != "$9,460.80" || r[2] != "$6,132.00" || r[3] != "-$3,328.80 (-35%)" {
		t.Errorf("24 × M2 → 6 × M4 per month: %q", r)
	}
	if r := row(tiers, "CPU"); r[2] != "1.70×" {
		t.Errorf("CPU per instance: %q, want 4 / 2.35 = 1.70×", r)
	}
	if r := row(tiers, "binds"); r[1] != "memory" || r[2] != "memory" {
		t.Errorf("binds: %q, want memory on both", r)
	}
	if r := row(tiers, "instance size"); r[1] != "10 GB" || r[2] != "40 GB" {
		t.Errorf("instance sizes: %q", r)
	}
	step := res.Tables[1]
	if r := row(step, "cache.m7g.2xlarge"); r[2] != "2" || r[4] != "1" || r[5] != "$459.17" {
		t.Errorf("cache.m7g.2xlarge before/after the codec: %q", r)
	}
	if r := row(step, "cache.m7g.4xlarge"); r[2] != "1" || r[3] != "$917.61" {
		t.Errorf("cache.m7g.4xlarge before the codec: %q", r)
	}
	all := strings.ToLower(res.Headline + strings.Join(res.Notes, " ") + tiers.Title + step.Title)
	if !strings.Contains(all, "-$458.44 a month (-50%)") || strings.Contains(all, "seed") || strings.Contains(all, "field report") {
		t.Errorf("card text: %s", all)
	}
}
