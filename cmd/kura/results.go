package main

import (
	"fmt"
	"io"
	"time"

	"github.com/kuracache/kura/internal/results"
)

// saveResult keeps v (a result without secrets) in the results directory
// that kura ui lists, and says where on stderr. Failing to save is a
// warning: the result has been printed already.
func saveResult(stderr io.Writer, kind string, v any, quiet bool) {
	dir, err := results.Dir()
	if err == nil {
		var path string
		if path, err = results.Save(dir, kind, time.Now(), v); err == nil && !quiet {
			fmt.Fprintf(stderr, "saved %s\n", path)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "kura: result not saved: %v\n", err)
	}
}
