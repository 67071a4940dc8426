// Package browsertest loads pages in a real headless browser (Debian's
// chromium) for tests of kura's HTML output: the web console, the bench,
// plan and demo reports. It drives the browser through its own command
// line (--dump-dom, --screenshot), so it needs no Go dependency and no
// DevTools connection: a page is loaded, its scripts run for a bounded
// virtual time, and the test gets the DOM as the browser built it, or a
// PNG of what a person would see.
//
// Typical use:
//
//	b := browsertest.New(t)                       // skips when chromium is missing (fails under CI)
//	dom := b.DOM(t, srv.URL+"/key?k=user:1")      // the DOM after scripts ran
//	if !strings.Contains(dom, `<svg`) { ... }
//	png := b.Screenshot(t, srv.URL+"/scan", "")   // PNG bytes; a non-empty path also writes the file
//
// For a local HTML file, pass FileURL(path). Pages are loaded with a fresh
// profile each time (no cookies or cache carried between calls), so a page
// that needs a token takes it in the URL.
//
// `make test` installs chromium with the servers (scripts/install-servers.sh).
// Without it a test is skipped, except under CI=true or
// KURA_REQUIRE_SERVERS=1, where it fails.
package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ErrNoBrowser is matched by Find's error when no chromium is installed.
var ErrNoBrowser = errors.New("browsertest: chromium is not installed (apt-get install chromium, or make servers)")

// Find returns the path of a headless-capable chromium. $KURA_CHROMIUM,
// when set, wins.
func Find() (string, error) {
	if p := os.Getenv("KURA_CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", ErrNoBrowser
}

// Options configures a Browser. The zero value works.
type Options struct {
	// Width and Height are the window size in CSS pixels. If zero,
	// 1280 x 900.
	Width, Height int
	// Budget is the virtual time scripts get to run before the DOM is
	// dumped or the screenshot taken. If zero, 5 s (virtual: a page that
	// is idle finishes sooner).
	Budget time.Duration
	// Timeout bounds one browser run in wall-clock time. If zero, 60 s.
	Timeout time.Duration
}

// Browser runs headless chromium, one process per page load.
type Browser struct {
	path string
	opts Options
}

// New returns a Browser for the test, skipping it when chromium is missing
// (failing under CI=true or KURA_REQUIRE_SERVERS=1).
func New(tb testing.TB) *Browser {
	tb.Helper()
	return NewWithOptions(tb, Options{})
}

// NewWithOptions is New with Options.
func NewWithOptions(tb testing.TB, opts Options) *Browser {
	tb.Helper()
	p, err := Find()
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("KURA_REQUIRE_SERVERS") == "1" {
			tb.Fatalf("%v", err)
		}
		tb.Skipf("skipping: %v", err)
	}
	return &Browser{path: p, opts: opts.withDefaults()}
}

func (o Options) withDefaults() Options {
	if o.Width <= 0 {
		o.Width = 1280
	}
	if o.Height <= 0 {
		o.Height = 900
	}
	if o.Budget <= 0 {
		o.Budget = 5 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	return o
}

// DOM loads url and returns the serialized DOM after its scripts ran. A
// browser failure fails the test.
func (b *Browser) DOM(tb testing.TB, url string) string {
	tb.Helper()
	out, err := b.DumpDOM(context.Background(), url)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return out
}

// Screenshot loads url and returns a PNG of the window. When path is not
// empty the PNG is also written there (keep it as a test artifact or a
// README picture). A browser failure fails the test.
func (b *Browser) Screenshot(tb testing.TB, url, path string) []byte {
	tb.Helper()
	png, err := b.CapturePNG(context.Background(), url)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	if path != "" {
		if err := os.WriteFile(path, png, 0o644); err != nil {
			tb.Fatalf("browsertest: %v", err)
		}
	}
	return png
}

// DumpDOM is DOM for code that handles the error itself.
func (b *Browser) DumpDOM(ctx context.Context, url string) (string, error) {
	out, err := b.run(ctx, "", "--dump-dom", url)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// CapturePNG is Screenshot for code that handles the error itself.
func (b *Browser) CapturePNG(ctx context.Context, url string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "browsertest-shot-")
	if err != nil {
		return nil, fmt.Errorf("browsertest: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "shot.png")
	if _, err := b.run(ctx, dir, "--screenshot="+file, url); err != nil {
		return nil, err
	}
	png, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("browsertest: chromium wrote no screenshot for %s: %w", url, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		return nil, fmt.Errorf("browsertest: screenshot of %s is not a PNG", url)
	}
	return png, nil
}

// FileURL turns a local path into a file:// URL the browser can load.
func FileURL(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return "file://" + filepath.ToSlash(abs)
}

func (b *Browser) run(ctx context.Context, workDir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	profile, err := os.MkdirTemp("", "browsertest-profile-")
	if err != nil {
		return nil, fmt.Errorf("browsertest: %w", err)
	}
	defer os.RemoveAll(profile)
	base := []string{
		"--headless",
		"--no-sandbox", // tests run as root in CI containers, where the sandbox cannot start
		"--disable-gpu",
		"--disable-dev-shm-usage",
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-extensions",
		"--disable-background-networking",
		"--disable-sync",
		"--hide-scrollbars",
		"--mute-audio",
		"--user-data-dir=" + profile,
		fmt.Sprintf("--window-size=%d,%d", b.opts.Width, b.opts.Height),
		fmt.Sprintf("--virtual-time-budget=%d", b.opts.Budget.Milliseconds()),
	}
	cmd := exec.CommandContext(ctx, b.path, append(base, args...)...)
	if workDir != "" {
		cmd.Dir = workDir
	}
	cmd.Env = append(os.Environ(), "HOME="+profile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("browsertest: chromium %s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	return stdout.Bytes(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
