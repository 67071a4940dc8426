//go:build linux

package cputime

import "testing"

// TestMeasureCountsWork: a busy loop uses CPU time.
func TestMeasureCountsWork(t *testing.T) {
	x := 0
	d := Measure(func() {
		for i := range 50_000_000 {
			x += i ^ (x >> 3)
		}
	})
	if d <= 0 {
		t.Fatalf("a busy loop measured %v of CPU (x=%d)", d, x)
	}
}
