package report

import (
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/vistest"
)

// TestHTMLNeutralizesHostileStrings: every string of a plan (node and
// provider names, sources, dates, the currency, notes: a catalog file
// and --price are the user's) reaches the page with its controls and
// bidi overrides made visible, not obeyed; so does the text report.
func TestHTMLNeutralizesHostileStrings(t *testing.T) {
	p, pts := hostilePlan(t)
	vistest.Fill(p)
	vistest.Fill(&pts)
	// Fill made every row "not sized": keep that for the first row only,
	// so the table, the charts and the skipped list all show names.
	for i := range p.Rows[1:] {
		p.Rows[1+i].Skipped = ""
	}
	var b strings.Builder
	if err := WriteHTML(&b, p, pts); err != nil {
		t.Fatal(err)
	}
	vistest.CheckPage(t, "plan report", b.String())
	b.Reset()
	if err := WriteText(&b, p); err != nil {
		t.Fatal(err)
	}
	vistest.CheckText(t, "plan text", b.String())
}
