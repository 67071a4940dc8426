package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/demo"
	"github.com/kuracache/kura/internal/servers"
	"github.com/kuracache/kura/internal/servertest"
)

func check(t *testing.T, res *demo.Result) {
	t.Helper()
	if len(res.Codecs) != 7 {
		t.Fatalf("%d codecs, want 7", len(res.Codecs))
	}
	by := map[string]demo.CodecResult{}
	for _, c := range res.Codecs {
		if c.Hits != uint64(c.Reads) {
			t.Fatalf("%s: %d hits for %d reads: the read phase missed", c.Codec, c.Hits, c.Reads)
		}
		if c.StoredBytes <= 0 || c.WireBytes <= 0 || c.OpsPerSec <= 0 {
			t.Fatalf("%s: empty measurement %+v", c.Codec, c)
		}
		by[c.Codec] = c
	}
	// Sizes are deterministic for the generated corpus, so this is safe to
	// assert: compression must shrink prose-heavy articles.
	if k, j := by["kura default"].StoredBytes, by["json"].StoredBytes; k >= 0.7*j {
		t.Fatalf("kura default stores %.0f B per article vs JSON %.0f B", k, j)
	}
	if k, s := by["kura default"].StoredBytes, by["msgpack+snappy"].StoredBytes; k > s {
		t.Fatalf("kura default stores %.0f B, more than msgpack+snappy's %.0f B", k, s)
	}
	// A trained dictionary stores less than the seed's codec, end to end.
	for _, d := range []string{"kura s2+dictionary", "kura zstd+dictionary"} {
		if k, s := by[d].StoredBytes, by["msgpack+snappy"].StoredBytes; k >= 0.8*s {
			t.Fatalf("%s stores %.0f B per article, msgpack+snappy %.0f B", d, k, s)
		}
	}
	var out bytes.Buffer
	res.Print(&out)
	for _, want := range []string{"kura default", "msgpack+snappy", "wire bytes", "p99"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunMemory(t *testing.T) {
	res, err := demo.Run(context.Background(), demo.Config{InMemory: true, Records: 50, Reads: 500, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res)
	if res.Codecs[0].WireFromServer {
		t.Fatal("the in-process store has no server counter")
	}
}

func TestRunRedis(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	var progress bytes.Buffer
	res, err := demo.Run(context.Background(), demo.Config{RedisURL: srv.URL(), Records: 50, Reads: 500, Concurrency: 4, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res)
	if !res.Codecs[0].WireFromServer && !strings.Contains(res.Store, "given") {
		t.Fatalf("store description %q", res.Store)
	}
	if !strings.Contains(progress.String(), "Fetches") {
		t.Fatalf("no progress shown: %q", progress.String())
	}
}

func TestRunBadConfig(t *testing.T) {
	if _, err := demo.Run(context.Background(), demo.Config{InMemory: true, Records: -1}); err == nil {
		t.Fatal("negative record count accepted")
	}
	if _, err := demo.Run(context.Background(), demo.Config{RedisURL: "redis://127.0.0.1:1"}); err == nil {
		t.Fatal("unreachable Redis accepted")
	}
}

func TestRunWriteBack(t *testing.T) {
	res, err := demo.RunWriteBack(context.Background(), 3, 500, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != "" {
		t.Skip(res.Skipped)
	}
	if !res.Verified || res.PerKey <= 0 || res.SetMany <= 0 {
		t.Fatalf("write-back result %+v", res)
	}
	var out bytes.Buffer
	res.Print(&out)
	if !strings.Contains(out.String(), "SetMany") {
		t.Fatal(out.String())
	}
}
