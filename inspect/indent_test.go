package inspect_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kuracache/kura/inspect"
)

// FuzzIndent: below its bound, Indent writes what json.Indent writes;
// at the bound, a prefix of it, never longer.
func FuzzIndent(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{}],"b":[],"c":"x\"y,[:"}`, `[[[[1]]]]`, `"s"`, `null`, `{"":{"":[]}}`} {
		f.Add(s, 1000)
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if !json.Valid([]byte(s)) || max < 0 || max > 1<<16 {
			return
		}
		var c bytes.Buffer
		if json.Compact(&c, []byte(s)) != nil {
			return
		}
		var want bytes.Buffer
		json.Indent(&want, c.Bytes(), "  ", "\t")
		got, cut := inspect.Indent(c.Bytes(), "  ", "\t", max)
		if len(got) > max {
			t.Fatalf("%d bytes over a bound of %d", len(got), max)
		}
		if cut != (want.Len() > max) || !strings.HasPrefix(want.String(), got) || (!cut && got != want.String()) {
			t.Fatalf("Indent(%q, %d) = %q, %v; json.Indent: %q", c.String(), max, got, cut, want.String())
		}
	})
}

// TestIndentCostBounded: a value 62 levels deep indents to about 60 times
// its size; Indent's work and output stop at the bound.
func TestIndentCostBounded(t *testing.T) {
	v := []byte(strings.Repeat("[", 62) + strings.Repeat("1,", 500<<10) + "1" + strings.Repeat("]", 62))
	allocs := testing.AllocsPerRun(3, func() {
		got, cut := inspect.Indent(v, "", "  ", 64<<10)
		if !cut || len(got) != 64<<10 {
			t.Fatalf("%d bytes, cut %v", len(got), cut)
		}
	})
	if allocs > 4 {
		t.Errorf("%v allocations", allocs)
	}
}
