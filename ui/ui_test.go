package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/browsertest"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/results"
	"github.com/kuracache/kura/scan"
	"github.com/kuracache/kura/store/storeurl"
	"github.com/kuracache/kura/ui"
)

type member struct {
	ID    int    `msgpack:"id"`
	Name  string `msgpack:"name"`
	Email string `msgpack:"email"`
	Note  string `msgpack:"note"`
}

const token = "s3cret-token-for-the-test"

// console starts a real redis-server with a kura value, a JSON value and
// a 1.3 MB value, saves a scan of it to a results directory, and serves
// the console over it with a token.
func console(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	r := servertest.Redis(t, servers.RedisConfig{})
	st, err := storeurl.Open(ctx, r.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, _ := kura.New[member](st, kura.Options{})
	for i := range 300 {
		m := member{ID: i, Name: "寿司 member", Email: "someone@example.com", Note: strings.Repeat("loves compressed caches ", 20)}
		if err := c.Set(ctx, "member:"+string(rune('a'+i%26))+":"+strconv.Itoa(i), m, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Set(ctx, "plain:json", []byte(`{"greeting":"hello from JSON","email":"x@example.com"}`), 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Set(ctx, "report:big", []byte(strings.Repeat(`{"row":"x"},`, 110_000)), 0); err != nil {
		t.Fatal(err)
	}
	rep, err := scan.Run(ctx, st, scan.Options{Target: r.URL(), Rate: -1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := results.Save(dir, "scan", rep.Started, rep); err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(ui.Options{Store: st, Target: r.URL(), ResultsDir: dir, Token: token, Mask: []string{"email"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestConsoleInBrowser: in headless chromium, the key page shows a
// decoded kura value (masked field hidden) and a foreign JSON value, the
// scan page renders its charts, and without the token nothing is shown.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	b := browsertest.New(t)
	srv := console(t)
	q := "&token=" + token

	dom := b.DOM(t, srv.URL+"/key?k="+url.QueryEscape("member:b:1")+q)
	for _, want := range []string{`id="value"`, "寿司 member", "loves compressed caches", "kura v", "msgpack", "***"} {
		if !strings.Contains(dom, want) {
			t.Errorf("key page lacks %q", want)
		}
	}
	if strings.Contains(dom, "someone@example.com") {
		t.Error("key page shows a masked field")
	}
	dom = b.DOM(t, srv.URL+"/key?k=plain:json"+q)
	if !strings.Contains(dom, "hello from JSON") || !strings.Contains(dom, `<td id="format">json</td>`) || strings.Contains(dom, "x@example.com") {
		t.Errorf("foreign JSON key page:\n%s", section(dom, `id="header"`))
	}
	if dom = b.DOM(t, srv.URL+"/key?k=no:such:key"+q); !strings.Contains(dom, `id="missing"`) {
		t.Error("a missing key is not said to be missing")
	}

	dom = b.DOM(t, srv.URL+"/scan?x=1"+q)
	for _, id := range []string{`id="histogram"`, `id="by-memory"`, `id="by-savings"`, `id="big"`, `id="patterns"`} {
		if !strings.Contains(dom, id) {
			t.Errorf("scan page lacks %s", id)
		}
	}
	if strings.Count(section(dom, `id="histogram"`), "<rect") < 2 || !strings.Contains(section(dom, `id="by-memory"`), "member:*") {
		t.Errorf("charts empty:\n%s", section(dom, `id="histogram"`))
	}
	if !strings.Contains(section(dom, `id="big"`), "report:big") {
		t.Error("the big value is not called out")
	}
	png := b.Screenshot(t, srv.URL+"/scan?x=1"+q, "")
	if len(png) < 10_000 {
		t.Errorf("scan page screenshot is %d bytes: blank?", len(png))
	}
	// The README pictures: KURA_UI_SCREENSHOT=$PWD/docs/img/ui-scan.png
	// (the key page goes next to it as ui-key.png).
	if out := os.Getenv("KURA_UI_SCREENSHOT"); out != "" {
		wide := browsertest.NewWithOptions(t, browsertest.Options{Width: 1200, Height: 1500})
		wide.Screenshot(t, srv.URL+"/scan?x=1"+q, out)
		wide.Screenshot(t, srv.URL+"/key?k=member:b:1"+q, filepath.Join(filepath.Dir(out), "ui-key.png"))
	}

	// No token: refused, in the browser and to a plain client.
	dom = b.DOM(t, srv.URL+"/key?k=member:b:1")
	if strings.Contains(dom, "寿司") || !strings.Contains(dom, "token required") {
		t.Errorf("page without token:\n%s", dom)
	}
	for _, path := range []string{"/", "/key?k=member:b:1", "/scan", "/results", "/key?k=member:b:1&token=wrong"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "寿司") {
			t.Errorf("%s without token: %d", path, res.StatusCode)
		}
	}
}

func section(dom, marker string) string {
	i := strings.Index(dom, marker)
	if i < 0 {
		return ""
	}
	end := min(len(dom), i+20000)
	if j := strings.Index(dom[i:], "</svg>"); j > 0 && i+j < end {
		end = i + j
	}
	if j := strings.Index(dom[i:], "</table>"); j > 0 && i+j < end {
		end = i + j
	}
	return dom[i:end]
}

// TestConsoleReadOnlyAndSafe: methods other than GET and HEAD are
// refused; a result name from the request never reaches the file system
// unless it is a listed result; the token also works as a cookie and a
// bearer header.
func TestConsoleReadOnlyAndSafe(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("do not serve"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(ui.Options{ResultsDir: dir, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func(method, path string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	auth := map[string]string{"Authorization": "Bearer " + token}
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		if code, _ := do(m, "/key?k=a", auth); code != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d", m, code)
		}
	}
	for _, f := range []string{"secret.txt", "../secret.txt", "/etc/passwd", "..%2fsecret.txt"} {
		if code, body := do("GET", "/results/file?f="+f, auth); code != http.StatusNotFound || strings.Contains(body, "do not serve") {
			t.Errorf("result %q: %d %q", f, code, body)
		}
	}
	if code, body := do("GET", "/scan", auth); code != http.StatusOK || !strings.Contains(body, "run kura scan first") {
		t.Errorf("no scan yet: %d", code)
	}
	if code, _ := do("GET", "/key?k=x", auth); code != http.StatusOK {
		t.Errorf("key page without a store: %d", code)
	}
	// The token in the URL becomes a cookie (holding a value derived
	// from it, not the token) and leaves the URL.
	req, _ := http.NewRequest("GET", srv.URL+"/?token="+token, nil)
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if len(res.Cookies()) != 1 || res.StatusCode != http.StatusSeeOther {
		t.Fatalf("?token=: %d %v", res.StatusCode, res.Cookies())
	}
	ck := res.Cookies()[0]
	if code, _ := do("GET", "/", map[string]string{"Cookie": ck.Name + "=" + ck.Value}); code != http.StatusOK {
		t.Errorf("cookie: %d", code)
	}
	if code, _ := do("GET", "/", map[string]string{"Cookie": "kura_ui_token=nope"}); code != http.StatusUnauthorized {
		t.Errorf("bad cookie: %d", code)
	}
}
