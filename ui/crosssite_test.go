package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/kuracache/kura/ui"
)

// TestCrossSiteRefused: on loopback, with no token, any web page the
// operator opened could make the browser load key pages (each one a
// decode of up to 1 MiB). A request whose Fetch metadata or Origin says
// it comes from another site, or another port of the same host, is
// refused; the console's own pages, a typed URL and curl are served.
func TestCrossSiteRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	st, _ := redisStore(t)
	if err := st.Set(context.Background(), "user:1", []byte(`{"email":"alice@example.com"}`), 0); err != nil {
		t.Fatal(err)
	}
	srv := serveAt(t, ui.Options{Store: st})
	self := srv.URL // http://127.0.0.1:PORT
	other := "http://127.0.0.1:1"
	for _, c := range []struct {
		hdr  map[string]string
		want int
	}{
		{nil, 200},
		{map[string]string{"Sec-Fetch-Site": "none"}, 200},
		{map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": self}, 200},
		{map[string]string{"Origin": self}, 200},
		{map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{map[string]string{"Sec-Fetch-Site": "same-site"}, 403}, // another port of this host
		{map[string]string{"Origin": "http://evil.example"}, 403},
		{map[string]string{"Origin": other}, 403},
		{map[string]string{"Origin": "null"}, 403},
	} {
		res, body := get(t, nil, srv.URL+"/key?k=user:1", c.hdr)
		if res.StatusCode != c.want {
			t.Errorf("%v: %d, want %d", c.hdr, res.StatusCode, c.want)
		}
		if c.want == 403 && strings.Contains(body, "alice") {
			t.Errorf("%v: the value was served", c.hdr)
		}
	}
}

// TestCookieTiedToConsole: the cookie a console sets after the token is
// worth nothing to another console on the same host started with the
// same token (another port), even under that console's cookie name: it
// is derived from the token and the console's origin.
func TestCookieTiedToConsole(t *testing.T) {
	token := "0123456789abcdef0123"
	a := serveAt(t, ui.Options{Token: token})
	b := serveAt(t, ui.Options{Token: token})
	res, _ := get(t, nil, a.URL+"/?token="+token, nil)
	cs := res.Cookies()
	if res.StatusCode != http.StatusSeeOther || len(cs) != 1 {
		t.Fatalf("login: %d, cookies %v", res.StatusCode, cs)
	}
	ca := cs[0]
	if !strings.HasSuffix(ca.Name, a.URL[strings.LastIndex(a.URL, ":")+1:]) {
		t.Errorf("cookie name %q does not name the console's port", ca.Name)
	}
	if res, _ := get(t, nil, a.URL+"/", map[string]string{"Cookie": ca.Name + "=" + ca.Value}); res.StatusCode != 200 {
		t.Fatalf("console A refuses its own cookie: %d", res.StatusCode)
	}
	bName := "kura_ui_" + b.URL[strings.LastIndex(b.URL, ":")+1:]
	for _, name := range []string{ca.Name, bName} {
		if res, _ := get(t, nil, b.URL+"/", map[string]string{"Cookie": name + "=" + ca.Value}); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("console B accepts console A's cookie as %s: %d", name, res.StatusCode)
		}
	}
}

// TestTitleNotDoubled: the console's home page was titled "kura · kura".
func TestTitleNotDoubled(t *testing.T) {
	srv := serveAt(t, ui.Options{})
	_, body := get(t, nil, srv.URL+"/", nil)
	if strings.Contains(body, "<title>kura · kura</title>") || !strings.Contains(body, "<title>console · kura</title>") {
		i := strings.Index(body, "<title>")
		t.Errorf("title: %.60s", body[max(i, 0):])
	}
}
