package ui_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/ui"
)

// TestOversizedResultIsNotReadIntoAPage plants a saved scan result past
// ui.MaxResultFileBytes: the scan and bench pages refuse it with a message
// instead of reading it whole (each request cost the file's size before),
// and its raw JSON link still serves every byte.
func TestOversizedResultIsNotReadIntoAPage(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	huge := map[string]string{"pad": strings.Repeat("x", ui.MaxResultFileBytes+1024)}
	name := save(t, dir, "scan", at, huge)
	_, serve := serveResults(t, dir)
	// get returns the status, the body's size and its head (all of it
	// when it names the bound), for the messages.
	get := func(path string) (int, int, string) {
		t.Helper()
		code, _, head := serve(path)
		n := len(head)
		if n > 4096 && !strings.Contains(head, "over 16 MiB") {
			head = head[:4096]
		}
		return code, n, head
	}
	for _, p := range []string{"/scan?f=" + name, "/bench?f=" + name} {
		if _, n, body := get(p); !strings.Contains(body, "over 16 MiB") || n > 1<<20 {
			t.Errorf("%s: %d bytes, want a refusal that names the bound:\n%.600s", p, n, body)
		}
	}
	if code, n, _ := get("/results/file?f=" + name); code != 200 || n < ui.MaxResultFileBytes {
		t.Errorf("raw JSON link: %d, %d bytes; want the whole file", code, n)
	}
}
