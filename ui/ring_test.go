package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/results"
	"github.com/kuracache/kura/scan"
	"github.com/kuracache/kura/store/redisring"
	"github.com/kuracache/kura/store/storeurl"
	"github.com/kuracache/kura/ui"
)

// TestConsoleAcrossShards: over a redis+ring:// store of 3 shards, the key
// page decodes a kura value whichever shard holds it (masked field hidden),
// shows the first bytes of a large value read with GETRANGE on its shard,
// and the scan page shows the scan of every shard.
func TestConsoleAcrossShards(t *testing.T) {
	ctx := context.Background()
	_, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
	target := "redis+ring://" + strings.Join(addrs, ",")
	st, err := storeurl.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rs := st.(*redisring.Store)
	c, _ := kura.New[member](st, kura.Options{})
	byShard := map[string]string{} // shard address -> one key it holds
	for i := range 90 {
		k := "member:" + strconv.Itoa(i)
		m := member{ID: i, Name: "ring member " + strconv.Itoa(i), Email: "someone@example.com"}
		if err := c.Set(ctx, k, m, time.Hour); err != nil {
			t.Fatal(err)
		}
		byShard[rs.NodeOf(k)] = k
	}
	if len(byShard) != 3 {
		t.Fatalf("keys on %d shards, want 3", len(byShard))
	}
	if err := st.Set(ctx, "report:big", []byte(strings.Repeat(`{"row":"x"},`, 110_000)), 0); err != nil {
		t.Fatal(err)
	}
	rep, err := scan.Run(ctx, st, scan.Options{Target: target, Rate: -1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Keys != 91 || len(rep.Servers) != 3 {
		t.Fatalf("scan across shards: %d keys on %d servers, want 91 on 3", rep.Keys, len(rep.Servers))
	}
	dir := t.TempDir()
	if _, err := results.Save(dir, "scan", rep.Started, rep); err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(ui.Options{Store: st, Target: target, ResultsDir: dir, Token: token, Mask: []string{"email"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		return string(b)
	}
	for shard, k := range byShard {
		body := get("/key?k=" + k)
		id := strings.TrimPrefix(k, "member:")
		if !strings.Contains(body, "ring member "+id) || strings.Contains(body, "someone@example.com") {
			t.Errorf("key page of %s (shard %s) does not show its decoded, masked value", k, shard)
		}
	}
	if body := get("/key?k=report:big"); !strings.Contains(body, "the first ") {
		t.Errorf("key page of a large value on shard %s does not show its first bytes only", rs.NodeOf("report:big"))
	}
	body := get("/scan")
	for _, a := range addrs {
		if !strings.Contains(body, a) {
			t.Errorf("scan page does not name shard %s", a)
		}
	}
}
