// Package readme checks that the README's quick start compiles, so the
// first code a user copies is never stale.
package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestQuickStartCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	if !ok {
		t.Fatal("README has no ```go block")
	}
	src, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("unterminated ```go block")
	}
	// Inside the module, so it builds against this checkout.
	dir, err := os.MkdirTemp("..", "readme-quickstart-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "vet", "./"+filepath.Base(dir))
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README quick start does not compile: %v\n%s", err, out)
	}
}
