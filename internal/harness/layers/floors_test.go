package layers_test

import (
	"slices"
	"strings"
	"testing"
)

// Floors that do not mix: internal/ holds only what sits below the root
// (the leaf helpers and the root's own mechanisms) and the test harness.
// A package that imports the root (the demo, a tool's private helper)
// lives under the program or tool that uses it (cmd/kura/internal/...),
// so that no folder sits both below and above the root. The layer order
// implies this for today's packages; this check states it on its own, so
// that neither a new layer entry nor an exception can undo it.

// rootImporters returns the packages under internal/, outside the test
// harness, whose non-test code imports the root, and every package it
// looked at under internal/ with what it found.
func rootImporters(pkgs []pkg) (bad, seen []string) {
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok || !strings.HasPrefix(from, "internal/") || match(from, []string{"internal/harness/..."}) {
			continue
		}
		if slices.Contains(p.Imports, module) {
			bad = append(bad, from)
			seen = append(seen, from+": imports the root")
		} else {
			seen = append(seen, from+": below the root")
		}
	}
	slices.Sort(bad)
	slices.Sort(seen)
	return bad, seen
}

// TestInternalBelowRoot prints each package under internal/ (outside
// internal/harness) and fails if one imports the root.
func TestInternalBelowRoot(t *testing.T) {
	bad, seen := rootImporters(listPackages(t))
	if len(seen) < 5 {
		t.Fatalf("found %d packages under internal/; expected the helpers and the read path", len(seen))
	}
	for _, s := range seen {
		t.Log(s)
	}
	for _, b := range bad {
		t.Errorf("%s imports the root: only internal/harness/... may; move it under the program that uses it (cmd/kura/internal/...)", b)
	}
}

// TestInternalBelowRootCatches checks the check on a made-up graph.
func TestInternalBelowRootCatches(t *testing.T) {
	p := func(from string, to ...string) pkg {
		return pkg{ImportPath: module + "/" + from, Imports: to, GoFiles: []string{"x.go"}}
	}
	bad, _ := rootImporters([]pkg{
		p("internal/demo", module, module+"/codec"),
		p("internal/harness/servers", module),
		p("cmd/kura/internal/demo", module),
		p("internal/readthrough", module+"/store"),
		p("internal/readthrough/clock", module+"/internal/deadline"),
	})
	if want := []string{"internal/demo"}; !slices.Equal(bad, want) {
		t.Errorf("root importers under internal/: got %v, want %v", bad, want)
	}
}
