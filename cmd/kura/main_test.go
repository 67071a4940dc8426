package main

import (
	"os"
)

// tempResultsDir points the results directory at a temporary one, so
// tests never write into the user's ~/.local/state/kura/results, and
// returns the function that removes it. TestMain (codecs_test.go) calls
// it.
func tempResultsDir() func() {
	dir, err := os.MkdirTemp("", "kura-results-")
	if err != nil {
		panic(err)
	}
	os.Setenv("KURA_RESULTS_DIR", dir)
	return func() { os.RemoveAll(dir) }
}
