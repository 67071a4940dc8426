package ui_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/results"
	"github.com/kuracache/kura/scan"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/storeurl"
	"github.com/kuracache/kura/ui"
)

// serveAt starts the console with opts on a loopback port, Listen set to
// that port, and returns its address.
func serveAt(t *testing.T, opts ui.Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	opts.Listen = srv.Listener.Addr().String()
	if opts.ResultsDir == "" {
		opts.ResultsDir = t.TempDir()
	}
	h, err := ui.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config = ui.Server(h)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, c *http.Client, u string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if c == nil {
		c = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func redisStore(t *testing.T) (store.Store, *servers.Redis) {
	t.Helper()
	r := servertest.Redis(t, servers.RedisConfig{})
	st, err := storeurl.Open(context.Background(), r.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, r
}

// TestConsoleMemoryBounded: a 50 MB value costs a request a bounded
// amount of memory (it read 434 MB per request before), three requests at
// once too, and the page says it shows a prefix.
func TestConsoleMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	st, _ := redisStore(t)
	ctx := context.Background()
	big := bytes.Repeat([]byte(`{"row":"x","n":1},`), 50_000_000/18)
	big[0] = '['
	big[len(big)-1] = ']'
	if err := st.Set(ctx, "big:json", big, 0); err != nil {
		t.Fatal(err)
	}
	srv := serveAt(t, ui.Options{Store: st})
	measure := func(n int) uint64 {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				res, body := get(t, nil, srv.URL+"/key?k=big:json", nil)
				if res.StatusCode != 200 || !strings.Contains(body, `id="cut"`) || !strings.Contains(body, "bytes stored, over the limit of 1048576") {
					t.Errorf("big value page: %d\n%.2000s", res.StatusCode, body)
				}
			})
		}
		wg.Wait()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	one := measure(1)
	three := measure(3)
	t.Logf("a 50 MB value: %d bytes allocated for one request, %d for three at once", one, three)
	// The bound: MaxValueBytes (1 MiB) read, a 4 KiB prefix shown, and
	// the client's copy of the page; far below the value.
	if one > 8<<20 || three > 24<<20 {
		t.Fatalf("a 50 MB value allocated %d bytes in one request, %d in three", one, three)
	}
	// A value under the bound still decodes, and one just over it is cut.
	ok := bytes.Repeat([]byte(`{"row":"x"},`), 20_000)
	ok = append([]byte("["), append(ok[:len(ok)-1], ']')...)
	if err := st.Set(ctx, "ok:json", ok, 0); err != nil {
		t.Fatal(err)
	}
	if res, body := get(t, nil, srv.URL+"/key?k=ok:json", nil); res.StatusCode != 200 || strings.Contains(body, `id="cut"`) || !strings.Contains(body, `<td id="format">json</td>`) {
		i := strings.Index(body, `id="header"`)
		t.Errorf("a 240 KB value is not decoded: %d %.1500s", res.StatusCode, body[max(i, 0):])
	}
}

// TestDNSRebindingRefused: a request naming another Host (a web page on a
// name the attacker rebound to 127.0.0.1) gets nothing, token or not.
func TestDNSRebindingRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	st, _ := redisStore(t)
	if err := st.Set(context.Background(), "user:1", []byte(`{"email":"alice@example.com"}`), 0); err != nil {
		t.Fatal(err)
	}
	srv := serveAt(t, ui.Options{Store: st})
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example", "127.0.0.1:1", "evil.localhost.example:" + port} {
		res, body := get(t, nil, srv.URL+"/key?k=user:1", map[string]string{"Host": host})
		if res.StatusCode != http.StatusMisdirectedRequest || strings.Contains(body, "alice") {
			t.Errorf("Host %q: %d %.200s", host, res.StatusCode, body)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port} {
		res, body := get(t, nil, srv.URL+"/key?k=user:1", map[string]string{"Host": host})
		if res.StatusCode != 200 || !strings.Contains(body, "alice") {
			t.Errorf("Host %q: %d", host, res.StatusCode)
		}
	}
	// A proxy's name, when named.
	srv2 := serveAt(t, ui.Options{Store: st, Hosts: []string{"kura.internal"}})
	if res, _ := get(t, nil, srv2.URL+"/key?k=user:1", map[string]string{"Host": "kura.internal"}); res.StatusCode != 200 {
		t.Errorf("--host name: %d", res.StatusCode)
	}
}

// TestTokenHygiene: short tokens are refused; the token leaves the URL
// at once; the cookie is named for the port, holds no token, is HttpOnly
// and SameSite=Strict (and Secure over TLS); every address needs a token.
func TestTokenHygiene(t *testing.T) {
	if _, err := ui.New(ui.Options{Token: "a", ResultsDir: t.TempDir()}); err == nil {
		t.Fatal("a one-character token was accepted")
	}
	if _, err := ui.New(ui.Options{Listen: "0.0.0.0:7777", ResultsDir: t.TempDir()}); err == nil {
		t.Fatal("listening on every address without a token was accepted")
	}
	const tok = "0123456789abcdef-token"
	srv := serveAt(t, ui.Options{Token: tok, Secure: true})
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	res, _ := get(t, nil, srv.URL+"/key?k=a%2Fb&token="+tok, nil)
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || strings.Contains(loc, tok) || loc != "/key?k=a%2Fb" {
		t.Fatalf("?token=: %d Location %q", res.StatusCode, loc)
	}
	cs := res.Cookies()
	if len(cs) != 1 {
		t.Fatalf("cookies %v", cs)
	}
	c := cs[0]
	if c.Name != "kura_ui_"+port || strings.Contains(c.Value, tok) || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("cookie %+v", c)
	}
	if res, _ := get(t, nil, srv.URL+"/", map[string]string{"Cookie": c.Name + "=" + c.Value}); res.StatusCode != 200 {
		t.Errorf("with the cookie: %d", res.StatusCode)
	}
	for _, cookie := range []string{c.Name + "=" + tok, "kura_ui_token=" + tok, c.Name + "=x"} {
		if res, _ := get(t, nil, srv.URL+"/", map[string]string{"Cookie": cookie}); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("cookie %q: %d", cookie, res.StatusCode)
		}
	}
	if res, _ := get(t, nil, srv.URL+"/?token=wrong-token-wrong", nil); res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 {
		t.Errorf("wrong token: %d %v", res.StatusCode, res.Cookies())
	}
}

// TestConsoleDisclosesNothing: /static/ lists no templates, the home page
// does not show the results directory's path.
func TestConsoleDisclosesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secret-place")
	srv := serveAt(t, ui.Options{ResultsDir: dir})
	for _, p := range []string{"/static/", "/static/key.html", "/static/layout.html", "/static/../assets/key.html"} {
		if res, body := get(t, nil, srv.URL+p, nil); res.StatusCode == 200 || strings.Contains(body, "keyform") {
			t.Errorf("%s: %d %.200s", p, res.StatusCode, body)
		}
	}
	if res, _ := get(t, nil, srv.URL+"/static/style.css", nil); res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/css") {
		t.Errorf("style sheet: %d", res.StatusCode)
	}
	for _, p := range []string{"/", "/results"} {
		if _, body := get(t, nil, srv.URL+p, nil); strings.Contains(body, "secret-place") || strings.Contains(body, dir) {
			t.Errorf("%s shows the results path", p)
		}
	}
}

// TestCraftedScanReport: a saved report with one histogram bucket (or
// other impossible figures) is refused with a message, not a panic.
func TestCraftedScanReport(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bad := []scan.Report{
		{Schema: scan.Schema, Histogram: []scan.Bucket{{LE: 100, Keys: 5}}},
		{Schema: scan.Schema, Histogram: []scan.Bucket{{LE: -1, Keys: 5}}},
		{Schema: scan.Schema, Histogram: []scan.Bucket{{LE: 100, Keys: -5}, {LE: -1, Keys: 1}}},
		{Schema: scan.Schema, Patterns: []scan.Pattern{{Pattern: "x:*", Keys: 1, MemoryShare: 7}}},
	}
	var names []string
	for i, r := range bad {
		name, err := results.Save(dir, "scan", at.Add(time.Duration(i)*time.Second), r)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(name))
	}
	srv := serveAt(t, ui.Options{ResultsDir: dir})
	for _, n := range names {
		res, body := get(t, nil, srv.URL+"/scan?f="+url.QueryEscape(n), nil)
		if res.StatusCode != 200 || !strings.Contains(body, "is not a report kura scan wrote") {
			t.Errorf("%s: %d %.300s", n, res.StatusCode, body)
		}
	}
}

// TestConsoleEscapesControls: an RTL-override key, and a value holding
// C1 controls and bidi overrides, are shown escaped.
func TestConsoleEscapesControls(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	st, _ := redisStore(t)
	key := "rtl:\u202egnp.exe"
	if err := st.Set(context.Background(), key, []byte("{\"name\":\"x\u202ey\",\"c1\":\"\u009b31m\"}"), 0); err != nil {
		t.Fatal(err)
	}
	srv := serveAt(t, ui.Options{Store: st})
	res, body := get(t, nil, srv.URL+"/key?k="+url.QueryEscape(key), nil)
	if res.StatusCode != 200 || strings.ContainsAny(body, "\u202e\u009b") || !strings.Contains(body, `rtl:\u{202E}gnp.exe`) || !strings.Contains(body, `x\u{202E}y`) {
		t.Errorf("page: %d\n%.3000s", res.StatusCode, body)
	}
}

// TestKeyPageShowsJSONBackslashesOnce: a value's backslashes are JSON's
// escapes and show once ("back\\slash", "\u001b"), not doubled.
func TestKeyPageShowsJSONBackslashesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	st, _ := redisStore(t)
	if err := st.Set(context.Background(), "bs", []byte(`{"a":"back\\slash","e":"\u001b[2J"}`), 0); err != nil {
		t.Fatal(err)
	}
	srv := serveAt(t, ui.Options{Store: st})
	res, body := get(t, nil, srv.URL+"/key?k=bs", nil)
	if res.StatusCode != 200 || !strings.Contains(body, `back\\slash&#34;`) || !strings.Contains(body, `&#34;\u001b[2J&#34;`) || strings.Contains(body, `\\\\`) {
		t.Errorf("page: %d\n%.3000s", res.StatusCode, body)
	}
}

// TestKeyPageOnStalledServer: against a redis-server stopped with SIGSTOP
// a key page answers within KeyTimeout, saying the store did not answer,
// instead of holding the page (and a decode slot) for about 20 s; the
// store URL's password is not on it. After SIGCONT the key reads again.
func TestKeyPageOnStalledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	st, r := redisStore(t)
	if err := st.Set(context.Background(), "k", []byte(`{"a":1}`), 0); err != nil {
		t.Fatal(err)
	}
	srv := serveAt(t, ui.Options{Store: st})
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = r.Resume()
		}
	}()
	start := time.Now()
	_, body := get(t, &http.Client{Timeout: time.Minute}, srv.URL+"/key?k=k", nil)
	took := time.Since(start)
	if bound := 3 * ui.KeyTimeout; took > bound {
		t.Fatalf("the key page took %v against a stalled server (KeyTimeout %v)", took, ui.KeyTimeout)
	}
	if !strings.Contains(body, "did not answer within") {
		t.Fatalf("the page does not say the store did not answer:\n%s", body)
	}
	if err := r.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	servertest.Eventually(t, "the key page after SIGCONT", func() error {
		_, body := get(t, nil, srv.URL+"/key?k=k", nil)
		if !strings.Contains(body, "&#34;a&#34;") && !strings.Contains(body, `"a"`) {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
}
