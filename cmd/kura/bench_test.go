package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/servers"
	"github.com/kuracache/kura/internal/servertest"
)

// kura runs the CLI in-process and returns stdout, stderr and the error
// main would print.
func kura(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errb.String(), err
}

func TestBenchArgs(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"bench", "-c", "abc"}, "--help"},
		{[]string{"bench", "-c", "0", "-n", "1"}, ""}, // 0 means the default
		{[]string{"bench", "-P", "-1"}, "--pipeline"},
		{[]string{"bench", "--ratio", "3"}, "--ratio"},
		{[]string{"bench", "-d", "big"}, "--data-size"},
		{[]string{"bench", "--distribution", "zipf", "--zipf-exponent", "-2"}, "--zipf-exponent"},
		{[]string{"bench", "--zipf-exponent", "1.2"}, "--distribution zipf"},
		{[]string{"bench", "127.0.0.1:6379"}, "redis://127.0.0.1:6379"},
		{[]string{"bench", "redis://a:1", "-u", "redis://b:2"}, "once"},
		{[]string{"bench", "ftp://x"}, "scheme"},
		{[]string{"bench", "memcached://127.0.0.1:1", "-t", "hset"}, "Redis command"},
		{[]string{"bench", "sweep", "-c", "1,2", "-P", "1,2"}, "one parameter"},
		{[]string{"bench", "sweep"}, "give one list"},
		{[]string{"bench", "sweep", "-c", "1,x"}, "whole numbers"},
		{[]string{"bench", "sweep", "redis://127.0.0.1:1", "--io-threads", "1,2"}, "drop the target"},
		{[]string{"bench", "sweep", "--io-threads", "1,2", "--server", "pg"}, "--server"},
	}
	for _, c := range cases {
		if c.want == "" {
			continue
		}
		_, _, err := kura(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("kura %s: err = %v, want one line mentioning %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

func TestBenchHelp(t *testing.T) {
	out, _, err := kura(t, "bench", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"redis-benchmark", "-P 16", "--pipeline", "--connections", "--data-size", "--requests", "--command", "__key__", "coordinated omission", "memcached://", "Examples:"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestBenchJSONAndFiles(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	dir := t.TempDir()
	hdr := filepath.Join(dir, "lat.hgrm")
	out, stderr, err := kura(t, "bench", srv.URL(), "-t", "set", "-c", "2", "-P", "4", "-n", "1500", "--json", "--hdr", hdr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var res struct {
		Ops    int64 `json:"ops"`
		Server struct {
			Commands map[string]int64 `json:"commands"`
		} `json:"server"`
		Latency map[string]float64 `json:"latency_ms"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	if res.Ops != 1500 || res.Server.Commands["set"] != 1500 || res.Latency["p99"] <= 0 {
		t.Errorf("json: %+v", res)
	}
	if b, err := os.ReadFile(hdr); err != nil || !strings.Contains(string(b), "Percentile") {
		t.Errorf("--hdr file: %v %q", err, b)
	}

	html := filepath.Join(dir, "sweep.html")
	out, _, err = kura(t, "bench", "sweep", srv.URL(), "-t", "get", "--pipeline", "1,8", "--duration", "200ms", "--html", html, "-q")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "pipeline") || strings.Count(out, "\n") != 3 {
		t.Errorf("sweep text:\n%s", out)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("sweep HTML: %v", err)
	}
}
