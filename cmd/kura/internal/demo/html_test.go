package demo

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteHTMLEscapes checks, without servers, that every chart becomes
// one SVG and that text from a result cannot break out of the page.
func TestWriteHTMLEscapes(t *testing.T) {
	rep := &Report{Command: "kura demo", Machine: Machine{CPU: "cpu <b>", Cores: 2, OS: "linux", Go: "go"},
		Scenarios: []Result{{
			Name: "bytes", Title: "Network <bytes>", Problem: "p", Answer: "a", Status: Ran,
			Headline: `<script>alert(1)</script>`,
			Charts: []Chart{{Title: "t", Unit: "bytes", Bars: []Bar{{Label: "x<y", Value: 3}, {Label: "kura", Value: 1, Kura: true}}},
				{Title: "zero", Unit: "ms", Bars: []Bar{{Label: "a", Value: 0}}}},
			Tables: []Table{{Columns: []string{"c"}, Rows: [][]string{{"<i>"}}}},
			Checks: []Check{{What: "w", Before: 2, After: 1, Want: "less"}},
		}, {Name: "nodes", Title: "How many nodes", Status: NotBuilt, Reason: "not built yet"}},
	}
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(page, "<svg"); n != 2 {
		t.Fatalf("%d charts, want 2", n)
	}
	for _, bad := range []string{"<script>", "<i>", "cpu <b>", "x<y"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	if !strings.Contains(page, `id="nodes"`) || !strings.Contains(page, "not built yet") {
		t.Error("a scenario that did not run has no section saying why")
	}
}

func TestCheckHolds(t *testing.T) {
	for _, c := range []struct {
		c    Check
		want bool
	}{
		{Check{Before: 2, After: 1, Want: "less"}, true},
		{Check{Before: 1, After: 1, Want: "less"}, false},
		{Check{Before: 1, After: 1, Want: "equal"}, true},
		{Check{Before: 0, After: 1, Want: "more"}, true},
		{Check{Before: 0, After: 0, Want: "no more"}, true},
		{Check{Before: 0, After: 1, Want: "no more"}, false},
	} {
		if got := c.c.Holds(); got != c.want {
			t.Errorf("%+v: Holds %v, want %v", c.c, got, c.want)
		}
	}
}
