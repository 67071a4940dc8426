package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/storeurl"
)

// hostileKeys are key names that act on a terminal printed raw: clear the
// screen, set the window title, forge a report line, hide an extension
// behind a right-to-left override, a C1 CSI.
var hostileKeys = []string{
	"clear:\x1b[2J\x1b[H",
	"title:\x1b]0;owned\x07",
	"line:x\nerror: forged report line",
	"rtl:\u202egnp.exe",
	"c1:\u009b31mred",
	"bin:\xff\xfe",
}

func checkNoControls(t *testing.T, what, out string) {
	t.Helper()
	if strings.ContainsAny(out, "\x1b\x07\u202e\u009b") || strings.Contains(out, "\xff") || strings.Contains(out, "\nerror: forged") {
		t.Errorf("%s prints controls raw:\n%q", what, out)
	}
}

// TestNoTerminalInjection: kura scan (Redis, and memcached keys listed by
// metadump) and kura inspect print hostile key names and values escaped.
func TestNoTerminalInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Setenv("KURA_RESULTS_DIR", t.TempDir())
	ctx := context.Background()
	r := servertest.Redis(t, servers.RedisConfig{})
	mc := servertest.Memcached(t, servers.MemcachedConfig{})
	for _, u := range []string{r.URL(), "memcached://" + mc.Addr} {
		st, err := storeurl.Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range hostileKeys {
			if err := st.Set(ctx, k, []byte("{\"v\":\"\u202e\u009b x\"}"), time.Hour); err != nil {
				t.Logf("%s: key %q not stored: %v", u, k, err)
			}
		}
		st.Close()
		out := runAll(t, "scan", u, "--no-save")
		checkNoControls(t, "scan "+u, out)
		if !strings.Contains(out, `rtl:\u{202E}gnp.exe`) && !strings.Contains(out, `rtl:\u{202E}`) {
			t.Logf("scan %s output:\n%s", u, out)
		}
		for _, k := range hostileKeys {
			checkNoControls(t, "inspect "+u, runAll(t, "inspect", u, k))
		}
	}
}

// invisibleKeys differ from plain names only by characters that show
// nothing.
var invisibleKeys = []string{"adm\u200bin", "bom:\ufeffx", "tag:\U000E0041x", "wj:\u2060x", "zwj:a\u200db"}

func checkNoHidden(t *testing.T, what, out string) {
	t.Helper()
	checkNoControls(t, what, out)
	if strings.ContainsAny(out, "\u200b\ufeff\U000E0041\u2060\u200d\u0085\u2028\u202d") {
		t.Errorf("%s prints invisible or bidirectional characters raw:\n%q", what, out)
	}
}

// TestEveryByteEscaped: what a server or a key sends to a terminal is
// escaped in every output: invisible characters in key names (an
// "adm<U+200B>in" looked like "admin"), --json output (encoding/json
// passes C1 controls, bidi overrides and zero-width characters through),
// and the final error line of a command, which carried a server's
// screen-clear, hyperlink and bell sequences through kura bench.
func TestEveryByteEscaped(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Setenv("KURA_RESULTS_DIR", t.TempDir())
	ctx := context.Background()
	r := servertest.Redis(t, servers.RedisConfig{})
	st, err := storeurl.Open(ctx, r.URL())
	if err != nil {
		t.Fatal(err)
	}
	keys := append(append([]string(nil), hostileKeys...), invisibleKeys...)
	for _, k := range keys {
		if err := st.Set(ctx, k, []byte("{\"v\":\"\u202e\u009b\u200b\u0085 x\"}"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	checkNoHidden(t, "scan", runAll(t, "scan", r.URL(), "--no-save"))
	checkNoHidden(t, "scan --json", runAll(t, "scan", r.URL(), "--no-save", "--json"))
	for _, k := range keys {
		checkNoHidden(t, "inspect", runAll(t, "inspect", r.URL(), k))
		out := runAll(t, "inspect", r.URL(), k, "--json")
		checkNoHidden(t, "inspect --json", out)
		var reps []map[string]any
		if err := json.Unmarshal([]byte(out), &reps); err != nil || len(reps) != 1 || (utf8.ValidString(k) && reps[0]["key"] != k) {
			t.Errorf("inspect --json of %q: not the same JSON value (%v):\n%s", k, err, out)
		}
	}
	if out := runAll(t, "inspect", r.URL(), "adm\u200bin"); !strings.Contains(out, `adm\u{200B}in`) {
		t.Errorf("inspect shows a zero-width space as:\n%s", out)
	}
	// A server's error text, through the final error line of bench.
	out := runAll(t, "bench", r.URL(), "-n", "20", "-q", "--no-save", "eval",
		`return redis.error_reply("ERR \27[2J\27[H\27]8;;http://evil.example/\7click\27]8;;\7\7 \194\155 \226\128\174")`, "0")
	checkNoHidden(t, "bench's error line", out)
	if !strings.Contains(out, `\e[2J`) {
		t.Errorf("bench did not show the server's error, escaped:\n%s", out)
	}
}
