package main

import (
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// TestSmallThings: the small things a user hit (issue #42, item 7).
func TestSmallThings(t *testing.T) {
	t.Setenv("KURA_RESULTS_DIR", t.TempDir())
	// An unclosed IPv6 bracket is not a secret: shown as written.
	if out := runAll(t, "inspect", "redis://[::1", "k"); !strings.Contains(out, `"redis://[::1"`) || strings.Contains(out, "xxxxx") {
		t.Errorf("inspect redis://[::1:\n%s", out)
	}
	// A console that cannot serve TLS does not print a URL.
	if out := runAll(t, "ui", "--tls-cert", "missing.pem", "--tls-key", "missing.key", "--listen", "127.0.0.1:0"); strings.Contains(out, "https://") || !strings.Contains(out, "missing.pem") {
		t.Errorf("ui with a missing certificate:\n%s", out)
	}
	// --publish-url is checked before the work, and never ignored.
	dir := t.TempDir()
	vals := writeJSONLines(t, dir)
	if out := runAll(t, "codecs", vals, "--publish", "--publish-url", "BAD", "-q"); !strings.Contains(out, "--publish-url: bad store URL") {
		t.Errorf("codecs --publish-url BAD:\n%s", out)
	}
	if out := runAll(t, "codecs", vals, "--publish-url", "redis://127.0.0.1:1", "-q"); !strings.Contains(out, "add --publish") {
		t.Errorf("codecs --publish-url without --publish:\n%s", out)
	}
}

// TestMemcachedURLAtRedis: scan and inspect given a memcached URL that
// points at a Redis port explain it, as bench does, instead of printing
// a raw protocol error.
func TestMemcachedURLAtRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Setenv("KURA_RESULTS_DIR", t.TempDir())
	r := servertest.Redis(t, servers.RedisConfig{})
	addr := strings.TrimPrefix(r.URL(), "redis://")
	for _, args := range [][]string{{"inspect", "memcached://" + addr, "k"}, {"scan", "memcached://" + addr}, {"bench", "memcached://" + addr, "-n", "10", "-q", "--no-save"}} {
		out := runAll(t, args...)
		if !strings.Contains(out, "Redis") {
			t.Errorf("kura %s on a Redis port:\n%s", args[0], out)
		}
	}
}

func writeJSONLines(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for i := range 50 {
		b.WriteString(`{"id":` + strings.Repeat("1", i%5+1) + `,"title":"a title","body":"cache me if you can"}` + "\n")
	}
	p := dir + "/v.jsonl"
	if err := writePrivate(p, []byte(b.String())); err != nil {
		t.Fatal(err)
	}
	return p
}
