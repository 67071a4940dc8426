// Package vis makes text from a cache safe to show a person: key names,
// values and patterns are whatever anybody with write access stored, and
// a terminal or a page must show them, not obey them.
//
// Escape replaces every character that could act instead of being seen:
// C0 controls (ESC starts terminal sequences; CR and LF forge report
// lines), DEL, C1 controls (U+0080–U+009F, CSI and OSC on some
// terminals), the Unicode bidirectional controls (U+202A–U+202E,
// U+2066–U+2069, U+200E, U+200F, U+061C: an RTL override shows
// "rtl:gnp.exe" as "rtl:exe.png"), the line and paragraph separators,
// characters that show nothing (zero-width space and joiners, the byte
// order mark, tag characters: "admin" and "adm\u200bin" look the same) and
// bytes that are not UTF-8. Each becomes a visible escape: \e for ESC, \n,
// \r, \t, \xNN for other bytes below U+0100, \u{NNNN} above. A backslash
// becomes \\ so that an escape cannot be forged.
package vis

import (
	"fmt"
	"html"
	"strings"
	"unicode/utf8"
)

// Escape returns s with every control, bidirectional control and invalid
// byte escaped; other text, any script, is unchanged.
func Escape(s string) string { return escape(s, false) }

// EscapeJSON is Escape for JSON text (a decoded value, printed): there a
// backslash only ever starts JSON's own escape ("\\" is one backslash of
// the value, "\u001b" an ESC), so it is kept as it is rather than doubled,
// and the value reads as the JSON it is. An escape Escape adds ("\u{202E}")
// still cannot be forged: the value's own backslash would read "\\u{202E}".
func EscapeJSON(s string) string { return escape(s, true) }

func escape(s string, json bool) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
			i++
			continue
		}
		i += n
		switch {
		case r == '\\' && json:
			b.WriteByte('\\')
		case r == '\\':
			b.WriteString(`\\`)
		case r == 0x1b:
			b.WriteString(`\e`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			fmt.Fprintf(&b, `\x%02x`, r)
		case isBidiOrSeparator(r):
			fmt.Fprintf(&b, `\u{%04X}`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// HTML returns s for an HTML page (text, or a quoted attribute value):
// Escape, then the HTML escaping of <, >, &, ' and ". Every report kura
// writes as HTML passes the strings a user or a cache controls (key names,
// labels, file names, catalog entries, URLs) through it, so a bidi
// override cannot reorder what a page shows.
func HTML(s string) string { return html.EscapeString(Escape(s)) }

// EscapeBytes is Escape for bytes (a memcached binary key, a value
// prefix).
func EscapeBytes(p []byte) string { return Escape(string(p)) }

// Unsafe reports whether Escape would change s.
func Unsafe(s string) bool { return !clean(s) }

func clean(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			if c < 0x20 || c == 0x7f || c == '\\' {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || (r >= 0x80 && r <= 0x9f) || isBidiOrSeparator(r) {
			return false
		}
		i += n
	}
	return true
}

func isBidiOrSeparator(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return invisible(r)
}

// invisible reports characters that show nothing, so that two key names
// that differ only by them look the same: zero-width space, joiners and
// non-joiners, word joiner and invisible operators, the byte order mark,
// the Mongolian vowel separator, the combining grapheme joiner, Hangul
// fillers, soft hyphen and the tag characters.
func invisible(r rune) bool {
	switch {
	case r >= 0x200b && r <= 0x200d, r >= 0x2060 && r <= 0x2064:
		return true
	case r == 0xfeff, r == 0x180e, r == 0x034f, r == 0x00ad, r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0:
		return true
	case r >= 0xe0000 && r <= 0xe007f:
		return true
	}
	return false
}
