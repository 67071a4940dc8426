package kura

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestUniqueKeys: the scan, the stack table and the map give what a plain
// scan gives, first occurrences in order, for every size around the
// switches between them, with no duplicate, one duplicate at the end, and
// heavy duplication (hash collisions included: many keys, few distinct);
// the caller's slice is never changed.
func TestUniqueKeys(t *testing.T) {
	want := func(keys []string) []string {
		var out []string
		for _, k := range keys {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
		return out
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 8, 9, 100, 127, 128, 129, 255, 256, 257, 600} {
		for _, distinct := range []int{-1, -2, 1, 2, n/2 + 1, n + 1} {
			keys := make([]string, n)
			for i := range keys {
				switch distinct {
				case -1, -2: // all different; -2: the last one repeats the first
					keys[i] = fmt.Sprintf("k%d", i)
					if distinct == -2 && i == n-1 && n > 1 {
						keys[i] = keys[0]
					}
				default:
					keys[i] = fmt.Sprintf("k%d", r.IntN(distinct))
				}
			}
			before := slices.Clone(keys)
			got, err := uniqueKeys(keys)
			if err != nil {
				t.Fatal(err)
			}
			if w := want(keys); !slices.Equal(got, w) {
				t.Fatalf("%d keys of %d distinct: got %d keys %v…, want %d", n, distinct, len(got), got[:min(len(got), 5)], len(w))
			}
			if !slices.Equal(keys, before) {
				t.Fatalf("%d keys of %d distinct: the caller's slice changed", n, distinct)
			}
		}
	}
	if _, err := uniqueKeys([]string{"a", ""}); err == nil {
		t.Fatal("an empty key passed")
	}
}
