package browsertest_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/browsertest"
)

const page = `<!doctype html><html><body><p id="static">served</p>
<script>
const p = document.createElement('p');
p.id = 'scripted';
p.textContent = 'built by script ' + (6 * 7);
document.body.appendChild(p);
</script>
<svg width="200" height="100"><rect width="200" height="100" fill="#c33"/></svg>
</body></html>`

// TestDOMRunsScripts: the DOM returned is the one the browser built, with
// what the page's script added.
func TestDOMRunsScripts(t *testing.T) {
	b := browsertest.New(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	}))
	defer srv.Close()
	dom := b.DOM(t, srv.URL)
	for _, want := range []string{`id="static"`, "built by script 42", "<svg"} {
		if !strings.Contains(dom, want) {
			t.Errorf("DOM lacks %q:\n%s", want, dom)
		}
	}
}

// TestScreenshotIsWindowSizedPNG: the screenshot is a PNG of the window
// size asked for, written to the path given.
func TestScreenshotIsWindowSizedPNG(t *testing.T) {
	dir := t.TempDir()
	html := filepath.Join(dir, "page.html")
	if err := os.WriteFile(html, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	b := browsertest.NewWithOptions(t, browsertest.Options{Width: 640, Height: 480})
	out := filepath.Join(dir, "shot.png")
	png := b.Screenshot(t, browsertest.FileURL(html), out)
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 24 {
		t.Fatalf("not a PNG: %d bytes", len(png))
	}
	// IHDR: width and height are the first fields after the signature and chunk header.
	w, h := binary.BigEndian.Uint32(png[16:20]), binary.BigEndian.Uint32(png[20:24])
	if w != 640 || h != 480 {
		t.Errorf("screenshot %dx%d, want 640x480", w, h)
	}
	if onDisk, err := os.ReadFile(out); err != nil || !bytes.Equal(onDisk, png) {
		t.Errorf("screenshot file: %v (same bytes: %v)", err, bytes.Equal(onDisk, png))
	}
}

// TestFindHonoursOverride: $KURA_CHROMIUM naming a missing binary is an
// error, not a silent fallback to another browser.
func TestFindHonoursOverride(t *testing.T) {
	t.Setenv("KURA_CHROMIUM", "/nonexistent/chromium")
	if _, err := browsertest.Find(); err == nil {
		t.Fatal("a missing KURA_CHROMIUM was found")
	}
}
