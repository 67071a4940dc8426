package layers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/kuracache/kura"

// The written layer order, lowest first. A package may import (outside
// its tests) only packages of its own layer or a lower one:
//
//	internal helpers -> codec, store -> store/* -> dictstore
//	-> the root's mechanisms (internal/readthrough, internal/l1) -> root
//	-> kuraprom -> tools (and the change stream, cdc) -> cmd/kura, the demo and the examples
//
// Paths are relative to the module; a trailing "/..." covers a subtree.
var layers = []struct {
	name string
	pkgs []string
}{
	{"internal helpers", []string{"internal/flight", "internal/slot", "internal/redact", "internal/results", "internal/wire",
		"internal/units", "internal/vis", "internal/deadline"}},
	{"codec, store, ring, observe", []string{"codec/...", "store", "ring", "observe"}},
	{"store/*", []string{"store/memcache/...", "store/redisstore", "store/memstore", "store/health", "store/storeurl", "store/redisring", "store/move",
		"internal/redial"}},
	{"dictstore", []string{"dictstore"}},
	{"root mechanisms", []string{"internal/readthrough/...", "internal/l1"}},
	{"root", []string{""}},
	{"kuraprom", []string{"kuraprom"}},
	{"tools", []string{"inspect", "scan", "codecfit", "plan/...", "loadgen", "ui", "cdc", "cdc/cdcconf", "cdc/debezium", "cdc/pgsource", "cdc/staleness"}},
	{"cmd, demo, examples", []string{"cmd/...", "examples/..."}},
}

// harness are the test harness packages: they may import anything, and
// are imported only by tests, by cmd/kura and the demo, and by each other.
// They live under internal/harness (servers, fault injectors, process
// helpers, corpora, history checkers, the cross-language and rolling-upgrade
// helpers, this test), so that internal/ itself holds only the leaf helpers
// the library needs.
var harness = []string{"internal/harness/...", "store/storetest", "cdc/internal/cdctest"}

// harnessUsers may import harness packages outside tests.
var harnessUsers = []string{"cmd/..."}

// concrete are the store implementations. Above the store/* layer only
// cmd/kura, the demo and the examples name a concrete store (the way a
// program picks a database/sql driver); the root, kuraprom and the tools
// reach a store through package store and store/storeurl.
var concrete = []string{"store/memcache/...", "store/redisstore", "store/redisring", "store/memstore", "store/health", "store/move"}

// concreteUsers may import concrete stores outside tests, besides the
// store/* layer itself and the harness.
var concreteUsers = []string{"cmd/...", "examples/..."}

// exceptions are today's imports that break the rules, each named with
// the issue that removes it. The root may have at most maxRootExceptions.
// None today: keep it that way (an entry is a debt with a named payer).
var exceptions = map[string]string{}

const maxRootExceptions = 3

// match reports whether rel (a module-relative path) is covered by one
// of the patterns.
func match(rel string, patterns []string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if rel == base || strings.HasPrefix(rel, base+"/") {
				return true
			}
		} else if rel == p {
			return true
		}
	}
	return false
}

func layerOf(rel string) int {
	for i, l := range layers {
		if match(rel, l.pkgs) {
			return i
		}
	}
	return -1
}

func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

func show(rel string) string {
	if rel == "" {
		return "kura (root)"
	}
	return rel
}

type pkg struct {
	ImportPath string
	Imports    []string
	GoFiles    []string
}

// listPackages runs go list over the module: non-test imports only.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../../.."
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// violations checks the import graph against the rules and returns each
// broken rule as "from -> to: why", and the exceptions that were used.
func violations(pkgs []pkg) (bad []string, used map[string]bool) {
	used = map[string]bool{}
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		fromHarness := match(from, harness)
		fromLayer := layerOf(from)
		if !fromHarness && fromLayer < 0 {
			if len(p.GoFiles) > 0 {
				bad = append(bad, fmt.Sprintf("%s has no layer: add it to the layer order in internal/harness/layers", show(from)))
			}
			continue
		}
		for _, imp := range p.Imports {
			to, ok := rel(imp)
			if !ok || fromHarness {
				continue
			}
			var why string
			switch {
			case match(to, harness):
				if !match(from, harnessUsers) {
					why = "a test harness package, imported outside tests"
				}
			case layerOf(to) < 0:
				why = show(to) + " has no layer"
			case layerOf(to) > fromLayer:
				why = fmt.Sprintf("%s (%s) is above %s (%s)", show(to), layers[layerOf(to)].name, show(from), layers[fromLayer].name)
			case match(to, concrete) && fromLayer > layerOf("store/memstore") && !match(from, concreteUsers):
				why = "a concrete store, named above the store/* layer"
			}
			if why == "" {
				continue
			}
			edge := from + " -> " + to
			if _, ok := exceptions[edge]; ok {
				used[edge] = true
				continue
			}
			bad = append(bad, fmt.Sprintf("%s -> %s: %s", show(from), show(to), why))
		}
	}
	sort.Strings(bad)
	return bad, used
}

// TestLayers fails on any non-test import against the layer order.
func TestLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	pkgs := listPackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	bad, used := violations(pkgs)
	for _, b := range bad {
		t.Errorf("import against the layer order: %s", b)
	}
	var stale []string
	for edge, issue := range exceptions {
		if !used[edge] {
			stale = append(stale, edge+" ("+issue+")")
		}
	}
	sort.Strings(stale)
	for _, s := range stale {
		// Not a failure: the branch that removes an import may land
		// before or after this list is trimmed.
		t.Logf("exception no longer needed, remove it: %s", s)
	}
}

// TestExceptionsNamed keeps the exception list honest: each names the
// issue that removes it, and the root has at most maxRootExceptions.
func TestExceptionsNamed(t *testing.T) {
	root := 0
	for edge, why := range exceptions {
		if !strings.HasPrefix(why, "#") {
			t.Errorf("exception %q does not name the issue that removes it", edge)
		}
		if strings.HasPrefix(edge, " -> ") {
			root++
		}
	}
	if root > maxRootExceptions {
		t.Errorf("%d exceptions for the root; at most %d", root, maxRootExceptions)
	}
}

// TestRulesCatch checks the checker on a made-up graph: each rule flags
// its offender, and an allowed import passes.
func TestRulesCatch(t *testing.T) {
	p := func(from string, to ...string) pkg {
		var imps []string
		for _, x := range to {
			imps = append(imps, module+"/"+x)
		}
		return pkg{ImportPath: module + "/" + from, Imports: imps, GoFiles: []string{"x.go"}}
	}
	for _, tc := range []struct {
		p    pkg
		want string
	}{
		{p("codec", "dictstore"), "above"},
		{p("store/redisstore", "kuraprom"), "above"},
		{p("inspect", "internal/harness/proctest"), "harness"},
		{p("ui", "store/memstore"), "concrete store"},
		{p("internal/newthing"), "has no layer"},
		{p("cmd/kura", "internal/harness/servers", "store/memcache", "ui"), ""},
		{p("store/storeurl", "store/redisstore", "internal/redact"), ""},
		{p("internal/harness/history", "store/health", "internal/harness/servers"), ""},
	} {
		bad, _ := violations([]pkg{tc.p})
		got := strings.Join(bad, "; ")
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s imports %v: got %q, want %q", tc.p.ImportPath, tc.p.Imports, got, tc.want)
		}
	}
}
