package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/vmihailenco/msgpack/v5"

	kuralib "github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/storeurl"
)

type goldenDoc struct {
	ID    int      `msgpack:"id" json:"id"`
	Title string   `msgpack:"title" json:"title"`
	Email string   `msgpack:"email" json:"email"`
	Tags  []string `msgpack:"tags" json:"tags"`
	Body  string   `msgpack:"body" json:"body"`
}

// goldenData writes a fixed set of keys (no TTLs, so the output does not
// depend on the time) in every format inspect and scan tell apart.
func goldenData(t *testing.T, st store.Store) {
	t.Helper()
	ctx := context.Background()
	doc := goldenDoc{ID: 7, Title: "寿司の話", Email: "someone@example.com", Tags: []string{"food", "travel"}, Body: strings.Repeat("cache me if you can ", 40)}
	c, err := kuralib.New[goldenDoc](st, kuralib.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		d := doc
		d.ID = i
		if err := c.Set(ctx, "article:"+strconv.Itoa(i), d, kuralib.NoExpiry); err != nil {
			t.Fatal(err)
		}
	}
	js, _ := json.Marshal(doc)
	mp, _ := msgpack.Marshal(doc)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(js)
	zw.Close()
	raw := map[string][]byte{
		"legacy:json:1":    js,
		"legacy:gzip:1":    gz.Bytes(),
		"legacy:snappy:1":  s2.EncodeSnappy(nil, js),
		"goredis:1":        append(s2.EncodeSnappy(nil, mp), 1),
		"counter:visits":   []byte("12345"),
		"blob:1":           {0xff, 0x00, 0xfe, 0x01, 0x02},
		"report:summary":   bytes.Repeat(js, 200),
		"session:ab12cd34": []byte(strings.Repeat("s", 40)),
	}
	for k, v := range raw {
		if err := st.Set(ctx, k, v, 0); err != nil {
			t.Fatal(err)
		}
	}
}

var (
	addrRE    = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	elapsedRE = regexp.MustCompile(` in [0-9.]+(µs|ms|s)(;)`)
	writtenRE = regexp.MustCompile(`written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC`)
)

func normalise(s string) string {
	s = addrRE.ReplaceAllString(s, "127.0.0.1:PORT")
	s = writtenRE.ReplaceAllString(s, "written TIME")
	return elapsedRE.ReplaceAllString(s, " in ELAPSED$2")
}

// TestInspectScanGolden: what a person reads from kura inspect and kura
// scan on a fixed data set is a reviewed text (refresh with -update).
func TestInspectScanGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	st, err := storeurl.Open(context.Background(), r.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	goldenData(t, st)
	out, _, err := kura(t, "inspect", r.URL(), "article:3", "legacy:json:1", "legacy:gzip:1", "legacy:snappy:1", "goredis:1",
		"counter:visits", "blob:1", "no:such:key", "--mask", "email")
	// A key that is not there is reported, and fails the command as ls would.
	if err == nil || err.Error() != `1 of 8 keys not found: "no:such:key"` {
		t.Fatalf("inspect with a missing key: %v", err)
	}
	if strings.Contains(out, "someone@example.com") {
		t.Error("inspect shows a masked field")
	}
	checkGolden(t, "inspect.txt", normalise(out))

	t.Setenv("KURA_RESULTS_DIR", t.TempDir())
	out, _, err = kura(t, "scan", r.URL(), "-q", "--top", "5")
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "scan.txt", normalise(out))
	files, _ := os.ReadDir(os.Getenv("KURA_RESULTS_DIR"))
	if len(files) != 1 || !strings.HasPrefix(files[0].Name(), "scan-") {
		t.Errorf("saved results: %v", files)
	}

	out, _, err = kura(t, "scan", r.URL(), "-q", "--no-save", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Schema string `json:"schema"`
		Keys   int    `json:"keys"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Schema != "kura.scan/v1" || rep.Keys != 38 {
		t.Errorf("--json: %+v, %v", rep, err)
	}
}

// TestToolsBadInput: clear errors, no panic, no password in any output.
func TestToolsBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	r.Stop()
	t.Setenv("KURA_RESULTS_DIR", t.TempDir())
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"scan", "redis://:hunter2@" + r.Addr, "-q"}, "127.0.0.1"},
		{[]string{"inspect", "redis://:hunter2@" + r.Addr, "k"}, "127.0.0.1"},
		{[]string{"scan", "ftp://x"}, "unknown scheme"},
		{[]string{"scan", "mem://"}, "in-process store that starts empty"},
		{[]string{"scan", "redis://127.0.0.1:1", "--big", "lots"}, "--big"},
		{[]string{"scan", "redis://127.0.0.1:1", "--bandwidth", "fast"}, "--bandwidth"},
		{[]string{"scan", "redis://127.0.0.1:1", "--count", "0"}, "--count"},
		{[]string{"scan", "redis://127.0.0.1:1", "--rate", "-5"}, "--rate"},
		{[]string{"scan", "redis://127.0.0.1:1", "--samples", "0"}, "--samples"},
		{[]string{"scan"}, "give its URL"},
		{[]string{"ui", "--listen", "nonsense"}, "--listen"},
	}
	for _, c := range cases {
		done := make(chan struct{})
		var out, errOut string
		var err error
		go func() {
			defer close(done)
			out, errOut, err = kura(t, c.args...)
		}()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("%v hangs", c.args)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(out+errOut+err.Error(), "hunter2") {
			t.Errorf("%v: password in the output", c.args)
		}
	}
}

func TestSizesAndTokens(t *testing.T) {
	for in, want := range map[string]int64{"100KB": 100_000, "1.5MB": 1_500_000, "64KiB": 65536, "4096": 4096, "2 MiB": 2 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "KB", "-1KB", "1XB", "1e30"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q): no error", bad)
		}
	}
	for in, want := range map[string]float64{"1Gbit": 1e9, "250Mbit": 250e6, "100mbps": 100e6, "1e9": 1e9, "10 Gbit/s": 1e10} {
		if got, err := parseBandwidth(in); err != nil || got != want {
			t.Errorf("parseBandwidth(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "fast", "-1Gbit"} {
		if _, err := parseBandwidth(bad); err == nil {
			t.Errorf("parseBandwidth(%q): no error", bad)
		}
	}
	for addr, want := range map[string]bool{"127.0.0.1:7777": false, "[::1]:7777": false, "localhost:1": false, "0.0.0.0:7777": true, ":7777": true, "10.1.2.3:80": true} {
		if got, err := needsToken(addr); err != nil || got != want {
			t.Errorf("needsToken(%q) = %v, %v", addr, got, err)
		}
	}
	if a, b := newToken(), newToken(); a == b || len(a) < 32 {
		t.Errorf("tokens %q %q", a, b)
	}
}

// TestBenchSavesResult: kura bench keeps its JSON result in the results
// directory kura ui lists, without the password of its URL.
func TestBenchSavesResult(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{Password: "hunter2"})
	dir := t.TempDir()
	t.Setenv("KURA_RESULTS_DIR", dir)
	if _, _, err := kura(t, "bench", r.URL(), "-t", "set", "-n", "200", "-c", "2", "-q"); err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir(dir)
	if len(files) != 1 || !strings.HasPrefix(files[0].Name(), "bench-") {
		t.Fatalf("saved: %v", files)
	}
	b, _ := os.ReadFile(filepath.Join(dir, files[0].Name()))
	if strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), `"target"`) {
		t.Errorf("saved result: %.300s", b)
	}
	if _, _, err := kura(t, "bench", r.URL(), "-t", "set", "-n", "200", "-c", "2", "-q", "--no-save"); err != nil {
		t.Fatal(err)
	}
	if files, _ := os.ReadDir(dir); len(files) != 1 {
		t.Errorf("--no-save saved: %v", files)
	}
}

// TestUICommand: kura ui on a non-loopback address makes up a token,
// prints the URL with it once, refuses requests without it, serves with
// it, and stops when its context ends.
func TestUICommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetOut(pw)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"ui", "--listen", "0.0.0.0:0", "--results-dir", t.TempDir()})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "kura ui: ")
	if !ok || !strings.Contains(u, "?token=") {
		t.Fatalf("printed %q", line)
	}
	u = strings.Replace(strings.Replace(u, "0.0.0.0", "127.0.0.1", 1), "[::]", "127.0.0.1", 1)
	go io.Copy(io.Discard, pr)
	base, _, _ := strings.Cut(u, "?")
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar} // the token becomes a cookie and leaves the URL
	// In this order: once the token URL has set the cookie, the bare URL is
	// let in too (a map's random order made this fail now and then).
	for _, c := range []struct {
		url  string
		want int
	}{{base, http.StatusUnauthorized}, {u, http.StatusOK}} {
		url, want := c.url, c.want
		res, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", url, res.StatusCode, want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ui ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ui did not stop")
	}
}
