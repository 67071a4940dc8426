package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kuracache/kura/inspect"
)

// TestPrintReportShowsJSONBackslashesOnce: a decoded value is JSON text, so
// its backslashes are JSON's escapes ("\\" a backslash of the value,
// "\u001b" an ESC) and print once, indented or --raw; what JSON leaves raw
// and a terminal would obey (a bidi override) is still escaped.
func TestPrintReportShowsJSONBackslashesOnce(t *testing.T) {
	v, err := json.Marshal(map[string]string{"a": `back\slash`, "b": "\x1b[2J", "c": "rtl\u202e"})
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []bool{false, true} {
		var b bytes.Buffer
		printReport(&b, inspect.Report{Key: "k", Found: true, Value: v}, raw, 1<<16)
		out := b.String()
		for _, want := range []string{`"back\\slash"`, `"\u001b[2J"`, `"rtl\u{202E}"`} {
			if !strings.Contains(out, want) {
				t.Errorf("raw=%v: output lacks %s:\n%s", raw, want, out)
			}
		}
		if strings.Contains(out, `\\\\`) || strings.Contains(out, `\\u001b`) || strings.ContainsAny(out, "\x1b\u202e") {
			t.Errorf("raw=%v: backslashes doubled or a control left raw:\n%s", raw, out)
		}
	}
}
