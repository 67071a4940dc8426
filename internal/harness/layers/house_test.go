package layers_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The house rules of docs/ARCHITECTURE.md that an import graph cannot
// show, checked on the source of the root package and of the read path
// (internal/readthrough and the packages split from it).

// houseDirs are the packages the rules cover, relative to the module.
var houseDirs = []string{".", "internal/readthrough", "internal/readthrough/clock"}

const (
	maxMethods   = 25 // declared methods per type
	maxFuncLines = 60 // lines of one function, its signature to its closing brace
)

// fieldHomes are, per package, the files that may name a mechanism of
// the pipeline (selector .name on any value: a field, or a type of the
// store package). In internal/readthrough: the L1 tier only in the L1
// step, the lookup that serves its hits before any budget, and the plain
// operations that keep it consistent with their writes; the tracker only
// where a read is tracked and where it decides what the read owns. The
// lease capability (store.Leaser, store.LeaseWaker and the fields that
// hold them) only where the coordination is chosen: Config and New
// (pipeline.go) and the lease coordination that holds it (leases.go);
// the steps call that, and choose no path by it. In the root: the
// capability is looked up and handed on only in New (cache.go) and
// checked against the Leases option (options.go).
var fieldHomes = map[string]map[string][]string{
	"internal/readthrough": {
		"l1":         {"pipeline.go", "l1.go", "fetch.go", "ops.go", "lookup.go"},
		"tracker":    {"pipeline.go", "l1.go", "lookup.go", "entry.go"},
		"Leaser":     {"pipeline.go", "leases.go"},
		"leaser":     {"leases.go"},
		"LeaseWaker": {"leases.go"},
		"waker":      {"leases.go"},
		// chosen once in New, read by the steps they choose for
		"coord": {"pipeline.go", "acquire.go", "ops.go", "trace.go"},
		"reads": {"pipeline.go", "lookup.go"},
		"iso":   {"pipeline.go", "acquire.go", "load.go", "ops.go", "wait.go"},
	},
	".": {
		"Leaser":     {"cache.go"},
		"FindLeaser": {"cache.go", "options.go"},
		"LeaseWaker": {},
	},
}

// faultSeam is the one name of faults.go (the fault suites' seam) that
// production code may use: New calls it once, to choose the isolation.
const faultSeam = "isolationFor"

type goFile struct {
	dir, name string
	fset      *token.FileSet
	f         *ast.File
}

func parseHouse(t *testing.T) []goFile {
	t.Helper()
	var out []goFile
	for _, d := range houseDirs {
		dir := filepath.Join("../../..", d)
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if strings.HasSuffix(n, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, n, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, goFile{dir: d, name: filepath.Base(n), fset: fset, f: f})
		}
	}
	if len(out) < 20 {
		t.Fatalf("found %d Go files under %v; expected the root and the read path", len(out), houseDirs)
	}
	return out
}

func recvType(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return ""
	}
	e := fd.Recv.List[0].Type
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

// TestHouseMethodsAndLengths: no type has more than maxMethods methods,
// no function more than maxFuncLines lines.
func TestHouseMethodsAndLengths(t *testing.T) {
	methods := map[string]int{}
	var long []string
	for _, gf := range parseHouse(t) {
		for _, d := range gf.f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if r := recvType(fd); r != "" {
				methods[gf.dir+" "+r]++
			}
			if fd.Body == nil {
				continue
			}
			n := gf.fset.Position(fd.End()).Line - gf.fset.Position(fd.Pos()).Line + 1
			if n > maxFuncLines {
				long = append(long, fmt.Sprintf("%s/%s: %s is %d lines", gf.dir, gf.name, fd.Name.Name, n))
			}
		}
	}
	var types []string
	for k := range methods {
		types = append(types, k)
	}
	sort.Slice(types, func(i, j int) bool { return methods[types[i]] > methods[types[j]] })
	for i, k := range types {
		if i < 5 {
			t.Logf("%-40s %d methods", k, methods[k])
		}
		if methods[k] > maxMethods {
			t.Errorf("%s has %d methods (at most %d): give a mechanism or a step a type of its own", k, methods[k], maxMethods)
		}
	}
	for _, l := range long {
		t.Errorf("%s (at most %d)", l, maxFuncLines)
	}
}

// TestHouseTiersGoneDefaultsInOnePlace: tiers.go is gone, and every
// Options default (an assignment of a Default... constant) is filled in
// withDefaults.
func TestHouseTiersGoneDefaultsInOnePlace(t *testing.T) {
	if _, err := os.Stat("../../../tiers.go"); err == nil {
		t.Error("tiers.go is back: its parts belong to options.go, stats.go and cache.go")
	}
	fills := map[string][]string{}
	for _, gf := range parseHouse(t) {
		if gf.dir != "." {
			continue
		}
		for _, d := range gf.f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok || as.Tok != token.ASSIGN {
					return true
				}
				for _, r := range as.Rhs {
					if id, ok := r.(*ast.Ident); ok && strings.HasPrefix(id.Name, "Default") {
						fills[fd.Name.Name] = append(fills[fd.Name.Name], id.Name)
					}
				}
				return true
			})
		}
	}
	t.Logf("defaults filled: %v", fills)
	if len(fills) != 1 || len(fills["withDefaults"]) == 0 {
		t.Errorf("Options defaults are filled in %d functions (%v); fill them all in withDefaults", len(fills), fills)
	}
}

// TestHouseMechanismFields: the pipeline's mechanism fields (and the
// lease capability) are named only in their homes (fieldHomes).
func TestHouseMechanismFields(t *testing.T) {
	reads := map[string]map[string]int{}
	for _, gf := range parseHouse(t) {
		homes := fieldHomes[gf.dir]
		ast.Inspect(gf.f, func(n ast.Node) bool {
			se, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if _, watched := homes[se.Sel.Name]; !watched {
				return true
			}
			if id, ok := se.X.(*ast.Ident); ok && id.Name == "l1" {
				return true // the package l1, not the field
			}
			k := gf.dir + " " + se.Sel.Name
			if reads[k] == nil {
				reads[k] = map[string]int{}
			}
			reads[k][gf.name]++
			return true
		})
	}
	for _, dir := range []string{"internal/readthrough", "."} {
		for field := range fieldHomes[dir] {
			files := reads[dir+" "+field]
			t.Logf("%-20s %-10s named in %v", dir, field, files)
			for f := range files {
				if !contains(fieldHomes[dir][field], f) {
					t.Errorf("%s/%s names %s: it belongs to %v (docs/ARCHITECTURE.md)", dir, f, field, fieldHomes[dir][field])
				}
			}
		}
	}
}

// TestHouseFaultsOutOfProduction: the test-only faults stay out of the
// production pipeline. What faults.go declares is named in no other file
// of the read path but for faultSeam, which only New (pipeline.go) calls;
// the Pipeline has no field of a type faults.go declares; and no Go file
// outside the test harness (and faults.go) injects a fault.
func TestHouseFaultsOutOfProduction(t *testing.T) {
	files := parseHouse(t)
	declared := map[string]bool{}
	for _, gf := range files {
		if gf.dir == "internal/readthrough" && gf.name == "faults.go" {
			for _, n := range topLevelNames(gf.f) {
				declared[n] = true
			}
		}
	}
	if len(declared) == 0 || !declared[faultSeam] {
		t.Fatalf("internal/readthrough/faults.go declares %v; expected the fault seam %s there", declared, faultSeam)
	}
	t.Logf("faults.go declares %v", declared)
	for _, gf := range files {
		if gf.dir != "internal/readthrough" || gf.name == "faults.go" {
			continue
		}
		ast.Inspect(gf.f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok || !declared[id.Name] {
				return true
			}
			if id.Name == faultSeam && gf.name == "pipeline.go" {
				t.Logf("pipeline.go calls %s (New)", faultSeam)
				return true
			}
			t.Errorf("internal/readthrough/%s:%d names %s of faults.go: test-only faults stay behind %s, called once in New",
				gf.name, gf.fset.Position(id.Pos()).Line, id.Name, faultSeam)
			return true
		})
	}
	var injectors []string
	root := "../../.."
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "harness":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || rel == filepath.Join("internal", "readthrough", "faults.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), "InjectFault(") {
			injectors = append(injectors, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range injectors {
		t.Errorf("%s injects a fault of the read path outside the tests and the test harness", f)
	}
}

// topLevelNames are the names f declares at package level (types, values,
// functions; not methods).
func topLevelNames(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				out = append(out, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				switch sp := sp.(type) {
				case *ast.TypeSpec:
					out = append(out, sp.Name.Name)
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
