package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestHelpGolden keeps what users read in --help under review: a change to
// any command's help is a visible diff in testdata/golden (refresh with
// go test ./cmd/kura -run TestHelpGolden -update).
func TestHelpGolden(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"bench", "--help"}, {"bench", "sweep", "--help"}, {"demo", "--help"}, {"inspect", "--help"}, {"scan", "--help"}, {"ui", "--help"},
		{"codecs", "--help"},
	} {
		name := strings.Join(args[:len(args)-1], "-")
		if name == "" {
			name = "kura"
		}
		out, _, err := kura(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		out = strings.ReplaceAll(out, os.TempDir(), "$TMPDIR")
		path := filepath.Join("testdata", "golden", name+".help.txt")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if string(want) != out {
			t.Errorf("%s changed; review and run with -update:\n%s", path, out)
		}
		if strings.Contains(strings.ToLower(out), "seed 0") {
			t.Errorf("%s names a field report instead of the problem", path)
		}
	}
}
