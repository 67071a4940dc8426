package main

import (
	"os"
	"testing"
)

// TestMain points the results directory at a temporary one: tests must
// not write into the user's ~/.local/state/kura/results.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kura-results-")
	if err != nil {
		panic(err)
	}
	os.Setenv("KURA_RESULTS_DIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
