// Package vistest holds what the tests of kura's reports share to show
// that a hostile string cannot act on a page or a terminal: a string with
// every kind of character vis escapes, a way to put it in every string of
// a report, and the check of the output.
package vistest

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Hostile holds a right-to-left override and the isolates ("rtl:gnp.exe"
// would show as "rtl:exe.png"), a left-to-right mark, ESC and an OSC
// window-title sequence, CR LF and a forged report line, a C1 control
// (CSI), a line separator, a NUL and a byte that is not UTF-8.
const Hostile = "rtl:\u202Egnp.exe\u2066i\u2069\u200e \x1b]0;owned\x07\x1b[2J\r\nFORGED line\u009b31m\u2028\x00\xff"

// Fill sets every string reachable from v (a pointer) to Hostile with the
// field's path in front ("Rows[0].Node.Name: ..."), so a test can tell
// which field leaked: struct fields, elements of slices and arrays,
// values of maps with string values, through pointers. Unexported fields
// are left alone.
func Fill(v any) {
	fill(reflect.ValueOf(v), "")
}

func fill(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			fill(v.Elem(), path)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if t.Field(i).IsExported() {
				fill(v.Field(i), join(path, t.Field(i).Name))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
	case reflect.Map:
		if v.Type().Elem().Kind() == reflect.String {
			for _, k := range v.MapKeys() {
				v.SetMapIndex(k, reflect.ValueOf(path+": "+Hostile).Convert(v.Type().Elem()))
			}
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(path + ": " + Hostile)
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// CheckPage fails t if page (HTML a report wrote) holds a character that
// acts instead of being seen: a bidi control, a C0 control other than the
// page's own newlines and tabs, DEL, a C1 control, a line or paragraph
// separator, or a byte that is not UTF-8. It also fails when page shows
// no escaped right-to-left override (`\u{202E}`): the hostile strings
// must have reached the page, escaped, for the check to mean anything.
func CheckPage(t testing.TB, what, page string) {
	t.Helper()
	for i := 0; i < len(page); {
		r, n := utf8.DecodeRuneInString(page[i:])
		if bad(r, n) {
			lo, hi := max(0, i-60), min(len(page), i+60)
			t.Errorf("%s: raw %U at byte %d: %q", what, r, i, page[lo:hi])
			return
		}
		i += n
	}
	if !strings.Contains(page, `\u{202E}`) {
		t.Errorf("%s: no escaped right-to-left override: the hostile strings did not reach the page", what)
	}
	checkForged(t, what, page)
}

// CheckText is CheckPage for terminal output: the same characters are
// refused (a tab too), and the hostile strings must have reached it.
func CheckText(t testing.TB, what, out string) {
	t.Helper()
	if strings.Contains(out, "\t") {
		t.Errorf("%s: raw tab", what)
	}
	CheckPage(t, what, out)
}

// checkForged fails t when Hostile's CR LF started a line of its own:
// each "FORGED line" must follow its visible escape.
func checkForged(t testing.TB, what, out string) {
	t.Helper()
	for i := strings.Index(out, "FORGED line"); i >= 0; {
		if !strings.HasSuffix(out[:i], `\r\n`) {
			lo := max(0, i-60)
			t.Errorf("%s: a hostile line break was obeyed: %q", what, out[lo:i+11])
			return
		}
		j := strings.Index(out[i+1:], "FORGED line")
		if j < 0 {
			break
		}
		i += 1 + j
	}
}

func bad(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n <= 1:
		return true
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || (r >= 0x7f && r <= 0x9f):
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f || r == 0x2028 || r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
