package report

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/kuracache/kura/plan"
)

// hostileCatalog has FIXTURE figures and names that would break a page
// that did not escape them.
const hostileCatalog = `{
  "date": "2026-11-23", "currency": "USD", "price_region": "<b>fixture</b>",
  "providers": [{"name": "p&q", "reserved_memory_pct": 25, "memory_ceiling": 1, "cpu_ceiling": 0.9, "sources": ["rule <i>source</i>"]}],
  "nodes": [
    {"name": "<script>alert(1)</script>", "provider": "p&q", "memory_gib": 10, "threads": 1, "baseline_gbps": 1, "burst_gbps": 5, "price_per_hour": 0.5, "date": "2026-11-23", "source": "fixture \"quoted\" & <tagged>"},
    {"name": "big", "provider": "p&q", "memory_gib": 40, "threads": 4, "baseline_gbps": 4, "price_per_hour": 1.6, "date": "2026-11-23", "source": "fixture"},
    {"name": "unpriced", "provider": "p&q", "memory_gib": 20, "baseline_gbps": 2, "date": "2026-11-23", "source": "fixture"}
  ]
}`

func hostilePlan(t *testing.T) (*plan.Plan, []plan.TrafficPoint) {
	t.Helper()
	cat, err := plan.ParseCatalog(strings.NewReader(hostileCatalog))
	if err != nil {
		t.Fatal(err)
	}
	in := plan.Input{Workload: plan.Workload{
		DataBytes: 60 << 30, ReadsPerSec: 50000, WritesPerSec: 5000, ReadValueBytes: 2000, WriteValueBytes: 2000,
		OpsPerSecPerThread: 80000, MaxValueBytes: 1.3e6, LargeValuesPerSec: 3,
	}}
	p, err := plan.New(cat, in)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Traffic(cat, in, plan.DefaultMultipliers())
	if err != nil {
		t.Fatal(err)
	}
	return p, pts
}

// TestHTMLEscapesAndParses: every name and source is escaped, and the page
// is well-formed enough for an XML parser once the doctype is dropped.
func TestHTMLEscapesAndParses(t *testing.T) {
	p, pts := hostilePlan(t)
	var b strings.Builder
	if err := WriteHTML(&b, p, pts); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script>", "<b>fixture", "<i>source", "<tagged>"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	for _, want := range []string{`id="nodes-vs-traffic"`, `id="cost-vs-traffic"`, `id="cost-per-type"`, `id="plan"`, `id="largest"`, "2026-11-23", "memory-bound", "region-"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, "http://") && !strings.Contains(page, "xmlns=\"http://www.w3.org/2000/svg\"") {
		t.Error("page fetches something")
	}
	// Void elements aside, the page is balanced markup.
	body := strings.TrimPrefix(page, "<!doctype html>\n")
	body = strings.ReplaceAll(body, "<meta charset=\"utf-8\">", "")
	dec := xml.NewDecoder(strings.NewReader(body))
	dec.Strict = false
	dec.AutoClose = xml.HTMLAutoClose
	dec.Entity = xml.HTMLEntity
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("page does not parse: %v", err)
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		}
	}
	if depth != 0 {
		t.Errorf("unbalanced markup: depth %d at the end", depth)
	}
}

// TestTextReport: the table holds every sized row, priced rows by cost
// first and the unpriced after them, each price says whose it is, and the
// sources name every row.
func TestTextReport(t *testing.T) {
	p, _ := hostilePlan(t)
	var b strings.Builder
	if err := WriteText(&b, p); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	iBig, iSmall, iUnpriced := strings.Index(out, "\nbig "), strings.Index(out, "\n<script>"), strings.Index(out, "\nunpriced ")
	if iBig < 0 || iSmall < 0 || iUnpriced < 0 {
		t.Fatalf("rows missing:\n%s", out)
	}
	// big costs $2,336.00, <script> $2,920.00, unpriced none: ranked by
	// cost, the unpriced row last whatever it needs.
	if !(iBig < iSmall && iSmall < iUnpriced) {
		t.Errorf("rows not ranked by cost, unpriced last:\n%s", out)
	}
	for _, want := range []string{"catalog of 2026-11-23", "Fewest nodes: big, 2 nodes", "Cheapest of the 2 priced node types: big", "1 node type has no price", "$1.60 catalog", "price: the catalog's, gathered 2026-11-23", "none", "a month is 730 hours", "Largest value, 1.3 MB", "at 3/s", "Sources", "p&q rule, rule <i>source</i>"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}
