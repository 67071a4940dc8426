package readme

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/store/memstore"
)

// quickStart is the README's quick start, cut into what a reader runs.
type quickStart struct {
	checkout string // shell lines run in the checkout (start Redis, install the CLI)
	program  string // shell lines run in the program's own directory
	source   string // main.go
	output   string // what the program prints
}

func readQuickStart(t *testing.T) quickStart {
	t.Helper()
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n## Quick start\n")
	if !ok {
		t.Fatal(`README has no "## Quick start" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	blocks := map[string][]string{}
	for rest := sec; ; {
		_, after, ok := strings.Cut(rest, "\n```")
		if !ok {
			break
		}
		lang, after, _ := strings.Cut(after, "\n")
		body, after, ok := strings.Cut(after, "```")
		if !ok {
			t.Fatal("unterminated code block in the quick start")
		}
		blocks[lang] = append(blocks[lang], body)
		rest = after
	}
	if len(blocks["sh"]) != 2 || len(blocks["go"]) != 1 || len(blocks["text"]) != 1 {
		t.Fatalf("the quick start should have two sh blocks (checkout, program), one go and one text block; it has %d, %d, %d",
			len(blocks["sh"]), len(blocks["go"]), len(blocks["text"]))
	}
	return quickStart{blocks["sh"][0], blocks["sh"][1], blocks["go"][0], blocks["text"][0]}
}

// TestQuickStartAsWritten runs the README's quick start as a new user
// would: `make redis-up` and `go install ./cmd/kura` in the checkout, then
// a fresh directory outside the module with the README's go mod steps
// (replace pointing at this checkout), its program, against the server
// make redis-up started, and checks what the program prints against the
// README. The one change: port 6379 becomes a free port, so the test
// never meets a Redis someone else runs.
func TestQuickStartAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and a program, starts redis-server")
	}
	required := os.Getenv("CI") == "true" || os.Getenv("KURA_REQUIRE_SERVERS") == "1"
	for _, bin := range []string{"redis-server", "redis-cli", "make", "go"} {
		if _, err := servers.LookPath(bin); err != nil {
			if required {
				t.Fatalf("%s not found (make servers installs it)", bin)
			}
			t.Skipf("%s not found (make servers installs it)", bin)
		}
	}
	qs := readQuickStart(t)
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	onPort := func(s string) string { return strings.ReplaceAll(s, "6379", port) }

	tmp := t.TempDir() // outside the module
	bin := filepath.Join(tmp, "bin")
	env := append(os.Environ(),
		"TMPDIR="+tmp, // make redis-up's pid and log files
		"GOBIN="+bin,  // go install lands here, not in the user's ~/go/bin
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KURA="+root,
		"GOFLAGS=-mod=mod",
		"GOWORK=off",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel) // after make redis-down, which runs first (LIFO)
	sh := func(dir, script string) (string, error) {
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("%v\n%s\n%s", err, out.String(), errb.String())
		}
		return out.String(), err
	}
	t.Cleanup(func() {
		if out, err := sh(root, "make redis-down REDIS_PORT="+port); err != nil {
			t.Errorf("make redis-down: %v %s", err, out)
		}
	})
	app := filepath.Join(tmp, "hello")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(onPort(qs.source)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The program's steps up to its last one (go mod init, edit, tidy)
	// need no server: they run while the checkout's steps start Redis and
	// install the CLI, which saves the test half its time. Every line runs.
	lines := strings.Split(strings.TrimSpace(qs.program), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "go run") {
		t.Fatalf("the program steps should end with go run; they end with %q", last)
	}
	setup := make(chan error, 1)
	go func() {
		_, err := sh(app, strings.Join(lines[:len(lines)-1], "\n"))
		setup <- err
	}()
	checkout := strings.ReplaceAll(qs.checkout, "make redis-up", "make redis-up REDIS_PORT="+port)
	out, err := sh(root, checkout)
	if serr := <-setup; serr != nil {
		t.Fatalf("the program's setup steps failed: %v", serr)
	}
	if err != nil {
		t.Fatalf("the checkout steps failed: %v", err)
	}
	if !strings.Contains(out, "127.0.0.1:"+port) || !strings.Contains(out, "kura version ") { // (devel), or a pseudo-version in a git checkout
		t.Errorf("the checkout steps printed %q; want the server's address and kura --version", out)
	}

	// The README shows both runs, each after "$ go run .": the second is
	// served from Redis (no loader call).
	runs := strings.Split(strings.TrimSpace(qs.output), "$ "+last+"\n")
	if len(runs) != 3 || strings.TrimSpace(runs[0]) != "" {
		t.Fatalf("the README's output should show two runs, each after %q; it is\n%s", "$ "+last, qs.output)
	}
	for run := 1; run <= 2; run++ {
		out, err := sh(app, last)
		if err != nil {
			t.Fatalf("run %d of the program steps failed: %v", run, err)
		}
		if strings.TrimSpace(out) != strings.TrimSpace(runs[run]) {
			t.Errorf("run %d printed\n%s\nthe README says\n%s", run, out, runs[run])
		}
	}
}

// TestHeaderBytesAsWritten holds the README's figure for the bytes an
// entry's header adds.
func TestHeaderBytesAsWritten(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`[aA] (\d+)-character string through ` + "`Cache\\[string\\]`" + ` is stored as\s+(\d+) bytes, an? (\d+)-byte header`).FindStringSubmatch(string(readme))
	if m == nil {
		t.Fatal("README no longer says how many bytes the header adds")
	}
	var n, stored, header int
	fmt.Sscan(m[1]+" "+m[2]+" "+m[3], &n, &stored, &header)
	ctx := context.Background()
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := kura.New[string](st, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "k", strings.Repeat("x", n), time.Hour); err != nil {
		t.Fatal(err)
	}
	b, err := st.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// The compact envelope stores a string as its UTF-8 bytes.
	if len(b) != stored || stored-header != n {
		t.Errorf("a %d-character string is stored as %d bytes; the README says %d with a %d-byte header", n, len(b), stored, header)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestNamesOnlyFilesThatExist: every repository path the README links or
// names in a command (docs/..., examples/..., cmd/...) is there.
func TestNamesOnlyFilesThatExist(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`\]\(([\w./-]+)(?:#[^)]*)?\)`),                                                        // [text](path)
		regexp.MustCompile(`(?:^|[\s(` + "`" + `])((?:docs|examples|cmd|internal|testdata|scripts)/[\w./-]*\w)`), // a path in prose or a command
	} {
		for _, m := range re.FindAllStringSubmatch(string(readme), -1) {
			p := strings.TrimPrefix(m[1], "./")
			if seen[p] {
				continue
			}
			seen[p] = true
			if _, err := os.Stat(filepath.Join("../../..", p)); err != nil {
				t.Errorf("README names %s, which does not exist", p)
			}
		}
	}
	if len(seen) < 10 {
		t.Errorf("found only %d paths in the README: the patterns no longer match it", len(seen))
	}
}
