package vis

import (
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"user:42":                 "user:42",
		"東京 article":              "東京 article",
		"\x1b[2J\x1b]0;pwned\x07": `\e[2J\e]0;pwned\x07`,
		"a\nfake: report line":    `a\nfake: report line`,
		"rtl:\u202egnp.exe":       `rtl:\u{202E}gnp.exe`,
		"\u2066x\u2069\u200f":     `\u{2066}x\u{2069}\u{200F}`,
		"c1:\u009b31m":            `c1:\x9b31m`,
		"bin:\xff\xfe\x00":        `bin:\xff\xfe\x00`,
		`back\slash`:              `back\\slash`,
		"sep\u2028line":           `sep\u{2028}line`,
		"del\x7f":                 `del\x7f`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
		if Unsafe(in) != (in != want) {
			t.Errorf("Unsafe(%q) = %v", in, Unsafe(in))
		}
	}
}

// FuzzEscape: the output never holds a control, bidi control or invalid
// byte, whatever the input.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "a", "\x1b]0;x\x07", "\u202e", "\xff", "\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		if Unsafe(strings.ReplaceAll(out, `\`, "/")) {
			t.Fatalf("Escape(%q) = %q still holds unsafe text", s, out)
		}
	})
}

// TestPlaceLabels: crowded anchors get labels that overlap neither each
// other nor any anchor, inside the bounds; the first label is always
// placed when there is room for it.
func TestPlaceLabels(t *testing.T) {
	var ls []Label
	for i := range 12 {
		ls = append(ls, Label{AX: 300 + float64(i%4)*6, AY: 200 + float64(i/4)*5, Text: strings.Repeat("zstd-3+dict", 1+i%2)})
	}
	bounds := Rect{0, 0, 720, 420}
	ps := PlaceLabels(ls, bounds, 11, 5)
	if !ps[0].Shown {
		t.Fatal("the first label has no place")
	}
	for i, p := range ps {
		if !p.Shown {
			continue
		}
		if !p.Box.Inside(bounds) {
			t.Errorf("label %d outside the bounds: %+v", i, p.Box)
		}
		for j, q := range ps[:i] {
			if q.Shown && p.Box.Overlaps(q.Box) {
				t.Errorf("labels %d and %d overlap", i, j)
			}
		}
		for j, l := range ls {
			if p.Box.Overlaps(Rect{l.AX - 5, l.AY - 5, 10, 10}) {
				t.Errorf("label %d covers point %d", i, j)
			}
		}
	}
}

// TestBarChart: names, values and reference labels are escaped, and the
// drawing scales (a viewBox).
func TestBarChart(t *testing.T) {
	svg := BarChart{ID: "c", Title: "t", Unit: "x", Digits: 2, Bars: []Bar{{Name: "kura\u202e<b>", Value: 1.5, Lo: 1.2, Hi: 1.7, Highlight: true}, {Name: "peer", Value: 1}},
		Refs: []Ref{{1, "peer = 1"}, {1.3, "target 1.3x"}}}.SVG()
	for _, want := range []string{`viewBox="0 0 720 `, `kura\u{202E}&lt;b&gt;`, `>1.50x</text>`, `class="spread"`, `>target 1.3x</text>`} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q:\n%s", want, svg)
		}
	}
	if strings.Contains(svg, "\u202e") || strings.Contains(svg, "<b>") {
		t.Error("a name reached the chart unescaped")
	}
}
