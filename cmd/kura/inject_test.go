package main

import (
	"context"
	"strings"
	"testing"
	"time"

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
