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
