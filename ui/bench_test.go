package ui_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/browsertest"
	"github.com/kuracache/kura/internal/results"
	"github.com/kuracache/kura/loadgen"
	"github.com/kuracache/kura/ui"
)

// TestBenchResultIsAPage: a saved `kura bench` result opens as a page
// (its figures in tables, in headless Chromium), not as raw JSON; the
// raw JSON is a link away; text a hostile file carries (a terminal's
// screen clear, a right-to-left override, markup) is escaped; and a file
// with 20,000 server commands and a 200 KB error sample makes a page of
// bounded size. Before, the results list linked bench results to the raw
// JSON and /bench did not exist.
func TestBenchResultIsAPage(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	res := &loadgen.Result{
		Target: "redis://127.0.0.1:6379", Topology: "standalone", Nodes: 1, Protocol: "resp",
		Workload: "GET/SET 1:10, 100000 keys, 32 B values", Command: "kura bench redis://127.0.0.1:6379 -c 8",
		Connections: 8, Pipeline: 1, DurationSeconds: 10, Ops: 1_234_567, OpsPerSec: 123_456.7, Hits: 900, Misses: 100,
		Latency:      loadgen.Latency{Avg: 0.061, P50: 0.055, P95: 0.09, P99: 0.123, P999: 0.4, Max: 2.5},
		ErrorSamples: []string{"ERR \x1b[2J\x1b]8;;http://evil.example/\x07click\u202egnp.exe <script>alert(1)</script>"},
		Server: &loadgen.ServerReport{Nodes: 1, CPUSeconds: 3.2, Commands: map[string]int64{"get": 1_000_000, "set": 234_567},
			PerNode: []loadgen.NodeReport{{Addr: "127.0.0.1:6379", Commands: 1_234_567, CPUSeconds: 3.2}}},
	}
	name := save(t, dir, "bench", at, res)
	big := *res
	big.Server = &loadgen.ServerReport{Commands: map[string]int64{}}
	for i := range 20_000 {
		big.Server.Commands[fmt.Sprintf("cmd%05d", i)] = int64(i)
	}
	big.ErrorSamples = []string{strings.Repeat("\u202e", 200_000/3)}
	bigName := save(t, dir, "bench", at.Add(time.Second), &big)
	bogus := save(t, dir, "bench", at.Add(2*time.Second), map[string]any{"hello": "world"})

	url, get := serveResults(t, dir)

	// The list links the page, and the JSON beside it.
	if _, _, body := get("/results"); !strings.Contains(body, `href="/bench?f=`+name+`"`) || !strings.Contains(body, `href="/results/file?f=`+name+`"`) {
		t.Errorf("results list does not link the bench page and its JSON:\n%s", body)
	}
	code, ctype, body := get("/bench?f=" + name)
	if code != 200 || !strings.HasPrefix(ctype, "text/html") {
		t.Fatalf("/bench: %d %s", code, ctype)
	}
	for _, want := range []string{`id="figures"`, `id="latency"`, `id="commands"`, `id="nodes"`, `<b id="ops-per-sec">123457</b>`, `id="ops">1234567<`, `href="/results/file?f=` + name + `"`} {
		if !strings.Contains(body, want) {
			t.Errorf("bench page lacks %s", want)
		}
	}
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "<script>"} {
		if strings.Contains(body, bad) {
			t.Errorf("bench page carries %q unescaped", bad)
		}
	}
	if code, ctype, raw := get("/results/file?f=" + name); code != 200 || ctype != "application/json" || !strings.Contains(raw, `"ops_per_sec"`) {
		t.Errorf("raw JSON: %d %s", code, ctype)
	}

	// Bounded: 20,000 commands and a 200 KB error make a page of at most
	// 64 KB; the rest is counted and left to the JSON.
	_, _, body = get("/bench?f=" + bigName)
	if len(body) > 64<<10 || !strings.Contains(body, fmt.Sprintf("and %d more in the JSON", 20_000-50)) || strings.Contains(body, "\u202e") {
		t.Errorf("bench page of a big result: %d bytes", len(body))
	}
	t.Logf("bench page: %d bytes for 20,000 commands and a 200 KB error sample", len(body))
	// Not a bench result: said so; no such file: 404.
	if _, _, body = get("/bench?f=" + bogus); !strings.Contains(body, "is not a result kura bench wrote") {
		t.Errorf("a file that is not a bench result:\n%s", body)
	}
	if code, _, _ = get("/bench?f=../../etc/passwd"); code != http.StatusNotFound {
		t.Errorf("/bench of an unlisted name: %d", code)
	}

	if testing.Short() {
		return
	}
	dom := browsertest.New(t).DOM(t, url+"/bench?f="+name)
	for _, want := range []string{`id="figures"`, "123457", "0.123", "get", "Bench of redis://127.0.0.1:6379"} {
		if !strings.Contains(dom, want) {
			t.Errorf("bench page in the browser lacks %q", want)
		}
	}
}

// serveResults serves a console over the results in dir for the test's
// life and returns its URL and a GET of one of its paths: status, content
// type, body.
func serveResults(t *testing.T, dir string) (string, func(path string) (int, string, string)) {
	t.Helper()
	h, err := ui.New(ui.Options{ResultsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, func(path string) (int, string, string) {
		t.Helper()
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, r.Header.Get("Content-Type"), string(b)
	}
}

func save(t *testing.T, dir, kind string, at time.Time, v any) string {
	t.Helper()
	path, err := results.Save(dir, kind, at, v)
	if err != nil {
		t.Fatal(err)
	}
	return path[strings.LastIndexByte(path, '/')+1:]
}
