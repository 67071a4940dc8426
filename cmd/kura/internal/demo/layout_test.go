package demo_test

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kuracache/kura/cmd/kura/internal/demo"
	"github.com/kuracache/kura/internal/harness/browsertest"
)

// layoutProbe runs in the page after it loaded and lists what a reader
// would see broken: an element whose content is wider than its box (a
// table or a command line running off a phone's screen), chart text
// outside its drawing (a clipped title or label), and wording such as
// "1 nodes", "1 rows" or "MiB bytes".
const layoutProbe = `<script>
window.addEventListener('load', () => {
  const bad = [];
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (typeof el.className === 'string' && el.className ? '.' + el.className : '');
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('svg') || el.id === 'layout-result') continue;
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) {
      bad.push('wider than its box: <' + name(el) + '> ' + el.scrollWidth + ' > ' + el.clientWidth + ' px: ' + (el.textContent || '').trim().slice(0, 70));
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth) {
    bad.push('page wider than the window: ' + document.documentElement.scrollWidth + ' > ' + window.innerWidth + ' px');
  }
  for (const svg of document.querySelectorAll('svg')) {
    const vb = svg.viewBox.baseVal;
    for (const t of svg.querySelectorAll('text')) {
      const b = t.getBBox();
      if (b.x < -0.5 || b.x + b.width > vb.width + 0.5) bad.push('chart text clipped: ' + t.textContent);
    }
  }
  const text = document.body.textContent;
  for (const re of [/\b1 (?:nodes|rows|node types|threads|keys|times|values)\b/, /\w\(s\)/, /[KMG]i?B bytes/]) {
    const m = text.match(re);
    if (m) bad.push('wording "' + m[0] + '" in: ' + text.substr(Math.max(0, m.index - 50), 100).replace(/\s+/g, ' '));
  }
  const result = JSON.stringify({width: window.innerWidth, bad: bad});
  if (window.parent !== window) { window.parent.postMessage(result, '*'); return; }
  const out = document.createElement('pre');
  out.id = 'layout-result';
  out.textContent = result;
  document.body.appendChild(out);
});
</script>`

// frame holds the report in an iframe of the given width: headless
// Chromium will not make its window narrower than 500 px, and a phone's
// screen is 390. The probe in the report posts what it found here.
const frame = `<!DOCTYPE html><html><body style="margin:0">
<iframe src="layout.html" width="%d" height="900" style="border:0"></iframe>
<script>
window.addEventListener('message', e => {
  const out = document.createElement('pre');
  out.id = 'layout-result';
  out.textContent = e.data;
  document.body.appendChild(out);
});
</script></body></html>`

var layoutResult = regexp.MustCompile(`(?s)<pre id="layout-result">(.*?)</pre>`)

// checkLayout loads the report in headless Chromium at a desktop width
// (1280 px) and a phone's (390 px) and fails on anything layoutProbe
// finds.
func checkLayout(t *testing.T, rep *demo.Report) {
	t.Helper()
	for _, width := range []int{1280, 390} {
		for _, b := range layoutProblems(t, rep, width, "") {
			t.Errorf("at %d px: %s", width, b)
		}
	}
}

// layoutProblems is what layoutProbe finds in the report at width px.
func layoutProblems(t *testing.T, rep *demo.Report, width int, plant string) []string {
	t.Helper()
	var page strings.Builder
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "layout.html"), []byte(strings.Replace(page.String(), "</body>", plant+layoutProbe+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	framePath := filepath.Join(dir, "frame.html")
	if err := os.WriteFile(framePath, []byte(fmt.Sprintf(frame, width)), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := browsertest.NewWithOptions(t, browsertest.Options{Width: 1300}).DOM(t, browsertest.FileURL(framePath))
	m := layoutResult.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("at %d px the layout probe did not run", width)
	}
	var got struct {
		Width int      `json:"width"`
		Bad   []string `json:"bad"`
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &got); err != nil {
		t.Fatalf("at %d px: %v", width, err)
	}
	if got.Width != width {
		t.Fatalf("the report was laid out %d px wide, asked for %d", got.Width, width)
	}
	return got.Bad
}

// TestLayoutLongContent: a report with the longest titles, labels,
// commands and tables the scenarios write stays inside a 390 px screen,
// and its counts read "1 node", not "1 nodes"; and the probe the demo's
// end-to-end test runs at 1280 and 390 px (checkLayout) does catch such
// defects. No servers needed.
func TestLayoutLongContent(t *testing.T) {
	long := "PING before every request, shared pool, under the same background load of 9048 GET/s of 10 KB"
	rep := &demo.Report{Command: "kura demo --only health,nodes,login --html /tmp/a/very/long/path/to/the/report/kura-demo.html",
		Machine: demo.Machine{CPU: "AMD EPYC 7B13 64-Core Processor", Cores: 2, OS: "Debian GNU/Linux 12 (bookworm) amd64", Go: "go1.26"},
		Scenarios: []demo.Result{{
			Name: "nodes", Title: "How many nodes", Problem: long, Answer: long, Status: demo.Ran, Headline: long + "; " + long,
			Charts: []demo.Chart{
				{Title: "kura plan: nodes needed, gob vs kura default, for the node types whose count the codec changes", Unit: "nodes",
					Note: "2 cores shared by the server and the load generator: this machine's ceiling, not a node's scaling",
					Bars: []demo.Bar{{Label: "redis-shared-core-nano gob", Value: 1}, {Label: "redis-shared-core-nano kura", Value: 13, Kura: true}}},
				{Title: "Login after one item changed: rows read from PostgreSQL", Unit: "rows", Bars: []demo.Bar{{Label: "kura Index", Value: 1, Kura: true}, {Label: "whole inventory, 1 value", Value: 4000}}},
				{Title: "Bytes on the wire", Unit: "bytes", Bars: []demo.Bar{{Label: "gob", Value: 1_300_000}, {Label: "kura", Value: 512_000, Kura: true}}},
			},
			Tables: []demo.Table{{Title: "kura plan: 1,000,000 articles, 45,000 reads/s and 450 writes/s at peak, CPU per operation from the sweep",
				Columns: []string{"node type", "nodes (gob)", "binds (gob)", "per month (gob)", "nodes (kura)", "binds (kura)", "per month (kura)", "load on the server"},
				Rows:    [][]string{{"redis-shared-core-nano", "13", "memory", "$1,315.46", "6", "memory", "$595.68", "7842 GET/s, 80 MB/s out"}}}},
			Notes:    []string{long},
			Commands: []string{"kura bench redis://HOST:PORT --command get --data-size 10000 --prefill --keys 1000 --connections 32 --pipeline 8 --rate 9048 --duration 5s   # the background load"},
		}},
	}
	// Three planted defects, to show the probe sees what it is there to
	// see: a box whose content cannot wrap, "1 nodes" and "time(s)" in
	// notes (a chart once read "1 threads", a headline "1 time(s)").
	// Anything else it finds is the report's own.
	rep.Scenarios[0].Notes = append(rep.Scenarios[0].Notes, "planted: needs 2 time(s)", "planted: needs 1 nodes")
	plant := `<div id="planted" style="width:100px;overflow:hidden"><span style="white-space:nowrap">` + strings.Repeat("x", 100) + `</span></div>`
	var planted int
	for _, b := range layoutProblems(t, rep, 390, plant) {
		if strings.Contains(b, "div#planted") || strings.Contains(b, "planted: needs") {
			planted++
			continue
		}
		t.Errorf("at 390 px: %s", b)
	}
	if planted != 3 {
		t.Errorf("the layout probe found %d of the 3 planted defects", planted)
	}
}
