package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
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
		{[]string{"bench", "-c", "0", "-n", "1"}, "--connections \"0\""},
		{[]string{"bench", "-P", "0"}, "--pipeline \"0\""},
		{[]string{"bench", "-n", "0"}, "--requests \"0\""},
		{[]string{"bench", "-r", "0"}, "--keys \"0\""},
		{[]string{"bench", "--multi-keys", "0"}, "--multi-keys \"0\""},
		{[]string{"bench", "--duration", "0s"}, "--duration \"0\""},
		{[]string{"bench", "--timeout", "0s"}, "--timeout \"0\""},
		{[]string{"bench", "--distribution", "zipf", "--zipf-exponent", "0"}, "uniform"},
		{[]string{"bench", "--threads", "100000"}, "--threads"},
		{[]string{"bench", "--threads", "-1"}, "--threads"},
		{[]string{"bench", "-c", "1000000000"}, "--connections"},
		{[]string{"bench", "-P", "1000000000"}, "--pipeline"},
		{[]string{"bench", "-n", "1000000000000000"}, "--requests"},
		{[]string{"bench", "--rate", "1e12"}, "--rate"},
		{[]string{"bench", "--rate", "0.001"}, "--duration"},
		{[]string{"bench", "--duration", "100000h"}, "--duration"},
		{[]string{"bench", "--max-error-rate", "2"}, "--max-error-rate"},
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

// TestBenchAllFailed: a run where every operation fails exits non-zero and
// reports no throughput.
func TestBenchAllFailed(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	out, _, err := kura(t, "bench", srv.URL(), "-n", "300", "-c", "2", "-q", "--json", "nosuchcommand", "__key__")
	if err == nil || !strings.Contains(err.Error(), "operations failed") {
		t.Fatalf("all operations failed, err = %v; want a failure naming it", err)
	}
	var res struct {
		Ops       int64   `json:"ops"`
		Errors    int64   `json:"errors"`
		OpsPerSec float64 `json:"ops_per_sec"`
	}
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
		t.Fatalf("bad JSON %q: %v", out, jerr)
	}
	if res.Errors != res.Ops || res.OpsPerSec != 0 {
		t.Fatalf("ops %d, errors %d, throughput %v: failures were counted as throughput", res.Ops, res.Errors, res.OpsPerSec)
	}
}

// TestSweepNeverShowsThePassword: a password given in the URL or with -a
// appears in no output and not in the HTML report.
func TestSweepNeverShowsThePassword(t *testing.T) {
	const secret = "s3cret-Pa55"
	srv := servertest.Redis(t, servers.RedisConfig{Password: secret})
	html := filepath.Join(t.TempDir(), "sweep.html")
	url := "redis://:" + secret + "@" + srv.Addr
	for _, args := range [][]string{
		{"bench", "sweep", url, "-c", "1,2", "-n", "200", "-q", "--html", html},
		{"bench", "sweep", "redis://" + srv.Addr, "-a", secret, "-c", "1,2", "-n", "200", "-q", "--html", html},
	} {
		out, errOut, err := kura(t, args...)
		if err != nil {
			t.Fatalf("sweep: %v\n%s", err, errOut)
		}
		page, _ := os.ReadFile(html)
		for what, text := range map[string]string{"stdout": out, "stderr": errOut, "html": string(page)} {
			if strings.Contains(text, secret) {
				t.Errorf("the password appears in %s", what)
			}
		}
	}
	if got := redactArgs([]string{"-a", secret, "--password=" + secret, "-a" + secret, "--uri=redis://:" + secret + "@h:1"}); strings.Contains(strings.Join(got, " "), secret) {
		t.Errorf("redactArgs left the password: %v", got)
	}
}

func TestVersion(t *testing.T) {
	out, _, err := kura(t, "--version")
	if err != nil || !strings.HasPrefix(out, "kura version ") {
		t.Fatalf("kura --version = %q, %v", out, err)
	}
}

// TestBenchRing: kura bench on a redis+ring:// target spreads the keys
// over the shards by the store's ring and reports the ring topology.
func TestBenchRing(t *testing.T) {
	_, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
	target := "redis+ring://" + strings.Join(addrs, ",") + "?ring=dalli"
	out, stderr, err := kura(t, "bench", target, "-t", "mget", "--multi-keys", "8", "-c", "2", "-n", "300", "--prefill", "--keys", "500", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var res struct {
		Topology string `json:"topology"`
		Nodes    int    `json:"nodes"`
		Errors   int64  `json:"errors"`
		Hits     int64  `json:"hits"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	if res.Topology != "ring" || res.Nodes != 3 || res.Errors != 0 || res.Hits != 8*300 {
		t.Fatalf("kura bench %s: %+v", target, res)
	}
}
