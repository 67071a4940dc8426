package ui_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/ui"
)

// MaxPageAlloc is the bound this test holds one key page to, whatever
// the value: the bytes a request allocates (decode, indentation, escaping,
// the page, and the test client's copy of it).
const MaxPageAlloc = 40 << 20

// TestDeepValuePageBounded: a value under 1 MiB nested 62 levels deep
// cost a page about 500 MB (indentation multiplied it, then the escaping
// of every line); a page now allocates a bounded amount. The figure is
// logged (go test -v -run TestDeepValuePageBounded ./ui).
func TestDeepValuePageBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	st, _ := redisStore(t)
	deep := strings.Repeat("[", 62) + strings.Repeat("1,", (1<<20-200)/2) + "1" + strings.Repeat("]", 62)
	if err := st.Set(context.Background(), "deep", []byte(deep), 0); err != nil {
		t.Fatal(err)
	}
	// The same shape as a kura value (msgpack: one byte per element, so
	// twice the elements), which is decoded to be shown.
	var v any = make([]any, 1<<20-400)
	for i := range v.([]any) {
		v.([]any)[i] = 1
	}
	for range 61 {
		v = []any{v}
	}
	c, _ := codec.New(codec.Options{Compressor: codec.None()})
	enc, _, err := c.Encode(nil, v)
	if err != nil || len(enc) > 1<<20 {
		t.Fatalf("encode: %d bytes, %v", len(enc), err)
	}
	if err := st.Set(context.Background(), "deep:kura", enc, 0); err != nil {
		t.Fatal(err)
	}
	srv := serveAt(t, ui.Options{Store: st})
	page := func(key, format string) uint64 {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		res, body := get(t, nil, srv.URL+"/key?k="+key, nil)
		runtime.ReadMemStats(&b)
		if res.StatusCode != 200 || !strings.Contains(body, format) || !strings.Contains(body, `id="cut"`) {
			t.Fatalf("deep value page: %d\n%.1500s", res.StatusCode, body)
		}
		return b.TotalAlloc - a.TotalAlloc
	}
	page("deep", "json") // warm: templates, connections
	for _, c := range []struct {
		key, format string
		size        int
	}{
		{"deep", `<td id="format">json</td>`, len(deep)},
		{"deep:kura", "msgpack", len(enc)},
	} {
		n := page(c.key, c.format)
		t.Logf("%s, %d bytes 62 levels deep: %.1f MiB allocated for one page (bound %d MiB)", c.key, c.size, float64(n)/(1<<20), MaxPageAlloc>>20)
		if n > MaxPageAlloc {
			t.Errorf("one page of a 62-deep value (%s) allocated %d bytes; want at most %d", c.key, n, MaxPageAlloc)
		}
	}
}
