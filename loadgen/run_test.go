package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/memcache"
)

func mustRun(t *testing.T, cfg Config) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run(%+v): %v", cfg, err)
	}
	return res
}

// TestRedisCountsMatchServer checks that the operations kura reports are
// the ones the server counted in INFO commandstats, for every command.
func TestRedisCountsMatchServer(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{Password: "s3cret"})
	cases := []struct {
		cfg     Config
		command string // commandstats name
	}{
		{Config{Command: CmdSet, Pipeline: 4, TTL: time.Minute}, "set"},
		{Config{Command: CmdGet, Prefill: true, Keys: 500}, "get"},
		{Config{Command: CmdMGet, MultiKeys: 5, Keys: 500}, "mget"},
		{Config{Command: CmdMSet, MultiKeys: 5, DataSize: "10-50"}, "mset"},
		{Config{Command: CmdHSet, Pipeline: 16, Distribution: Zipf, KeyPrefix: "h:"}, "hset"},
		{Config{Template: []string{"SETEX", "__key__", "60", "v:__data__"}, DataSize: "8:1,16:1", Distribution: Sequential}, "setex"},
	}
	for _, c := range cases {
		t.Run(c.command, func(t *testing.T) {
			c.cfg.Target = srv.URL()
			c.cfg.Connections = 3
			c.cfg.Requests = 997
			res := mustRun(t, c.cfg)
			if res.Ops != 997 || res.Errors != 0 {
				t.Fatalf("ops %d errors %d (%v), want 997 and 0", res.Ops, res.Errors, res.ErrorSamples)
			}
			if res.Server == nil {
				t.Fatal("no server counters")
			}
			if got := res.Server.Commands[c.command]; got != res.Ops {
				t.Errorf("server counted %d %s, kura reported %d ops (all: %v)", got, c.command, res.Ops, res.Server.Commands)
			}
			if len(res.Server.Commands) != 1 {
				t.Errorf("server saw other commands during the run: %v", res.Server.Commands)
			}
			if c.cfg.Prefill && (res.Hits != res.Ops || res.Misses != 0) {
				t.Errorf("prefilled GETs: hits %d misses %d", res.Hits, res.Misses)
			}
			if c.command == "mget" && res.Hits+res.Misses != 5*res.Ops {
				t.Errorf("mget of 5 keys: hits+misses = %d, want %d", res.Hits+res.Misses, 5*res.Ops)
			}
			if res.BytesOut == 0 || res.Server.NetInBytes < res.BytesOut {
				t.Errorf("bytes out %d, server read %d", res.BytesOut, res.Server.NetInBytes)
			}
		})
	}
	t.Run("mixed", func(t *testing.T) {
		res := mustRun(t, Config{Target: srv.URL(), Ratio: "1:3", Requests: 4000, Connections: 2, Pipeline: 8})
		sets, gets := res.Server.Commands["set"], res.Server.Commands["get"]
		if sets+gets != 4000 || sets < 800 || sets > 1200 {
			t.Errorf("SET:GET 1:3 over 4000 ops gave %d sets, %d gets", sets, gets)
		}
	})
}

func TestMemcachedCountsMatchServer(t *testing.T) {
	srv := servertest.Memcached(t, servers.MemcachedConfig{})
	for _, proto := range []string{"meta", "text"} {
		for _, cmd := range []Command{CmdSet, CmdGet, CmdMGet, CmdMSet} {
			t.Run(proto+"/"+string(cmd), func(t *testing.T) {
				res := mustRun(t, Config{
					Target: "memcached://" + srv.Addr, Protocol: proto, Command: cmd,
					Connections: 3, Pipeline: 4, Requests: 601, Keys: 300, MultiKeys: 3, Prefill: cmd == CmdGet,
					TTL: time.Minute,
				})
				if res.Ops != 601 || res.Errors != 0 {
					t.Fatalf("ops %d errors %d %v", res.Ops, res.Errors, res.ErrorSamples)
				}
				keys := res.Ops
				if cmd == CmdMGet || cmd == CmdMSet {
					keys *= 3
				}
				name := "get"
				if cmd == CmdSet || cmd == CmdMSet {
					name = "set"
				}
				if got := res.Server.Commands[name]; got != keys {
					t.Errorf("memcached cmd_%s = %d, want %d", name, got, keys)
				}
				if name == "get" {
					if res.Hits != res.Server.Commands["get_hits"] || res.Misses != res.Server.Commands["get_misses"] {
						t.Errorf("hits/misses %d/%d, server %v", res.Hits, res.Misses, res.Server.Commands)
					}
				}
				if cmd == CmdGet && res.Hits != res.Ops {
					t.Errorf("prefilled gets: %d hits of %d", res.Hits, res.Ops)
				}
			})
		}
	}
}

func TestMemcachedPool(t *testing.T) {
	pool := servertest.MemcachedPool(t, 2, servers.MemcachedConfig{})
	res := mustRun(t, Config{Target: "memcached://" + pool[0].Addr + "," + pool[1].Addr, Command: CmdMGet,
		MultiKeys: 8, Connections: 2, Requests: 500, Prefill: true, Keys: 1000})
	if res.Errors != 0 || res.Hits != 8*500 || res.Nodes != 2 {
		t.Fatalf("errors %d hits %d nodes %d: %v", res.Errors, res.Hits, res.Nodes, res.ErrorSamples)
	}
	for _, n := range res.Server.PerNode {
		if n.Commands < 1000 {
			t.Errorf("node %s took only %d keys of 4000", n.Addr, n.Commands)
		}
	}
	// The bench put every key where a kura application looks for it.
	st, err := memcache.New(context.Background(), memcache.Options{Servers: []string{pool[0].Addr, pool[1].Addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for k := range uint64(1000) {
		key := string(appendKey(nil, "key:", k))
		if _, err := st.Get(context.Background(), key); err != nil {
			t.Fatalf("kura's memcache store: Get(%q) on %s: %v", key, st.Ring().Server(key), err)
		}
	}
}

// TestStallCorrected stops the server for one second in the middle of an
// open-loop run: with the coordinated-omission correction the requests
// that were due during the stall report up to a second of latency.
func TestStallCorrected(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	go func() {
		time.Sleep(1200 * time.Millisecond)
		_ = srv.Pause()
		time.Sleep(time.Second)
		_ = srv.Resume()
	}()
	res := mustRun(t, Config{Target: srv.URL(), Command: CmdSet, Rate: 2000, Connections: 4, Duration: 3 * time.Second})
	if !res.CoordinatedOmissionCorrected || !res.OpenLoop {
		t.Error("an open-loop result must say it is corrected")
	}
	if res.Latency.Max < 950 || res.Latency.P999 < 900 {
		t.Errorf("a 1 s stall reported p99.9 %.3f ms, max %.3f ms; want about 1000", res.Latency.P999, res.Latency.Max)
	}
	// About a third of the requests were due during the stall.
	if res.Latency.P99 < 500 {
		t.Errorf("p99 %.3f ms; a third of the run was stalled", res.Latency.P99)
	}
	var text bytes.Buffer
	_ = res.WriteText(&text)
	if !strings.Contains(text.String(), "coordinated omission corrected") {
		t.Errorf("text does not say it is corrected:\n%s", text.String())
	}
}

func TestClusterSpread(t *testing.T) {
	cl := servertest.RedisCluster(t)
	// One seed is enough: slots are discovered.
	res := mustRun(t, Config{Target: "redis://" + cl.Nodes[1].Addr, Command: CmdSet, Connections: 2, Pipeline: 8, Requests: 3000})
	if res.Topology != "cluster" || res.Nodes != 3 || res.Errors != 0 {
		t.Fatalf("topology %s nodes %d errors %d %v", res.Topology, res.Nodes, res.Errors, res.ErrorSamples)
	}
	var sum int64
	for _, n := range res.Server.PerNode {
		sum += n.Commands
		if n.Commands < 700 {
			t.Errorf("master %s took %d of 3000 SETs", n.Addr, n.Commands)
		}
	}
	if sum != 3000 || res.Server.Commands["set"] != 3000 {
		t.Errorf("masters counted %d SETs (%v), want 3000", sum, res.Server.Commands)
	}
	if _, err := Run(context.Background(), Config{Target: "redis://" + cl.Nodes[0].Addr, Command: CmdMGet, Requests: 10}); err == nil ||
		!strings.Contains(err.Error(), "slot") {
		t.Errorf("mget on a cluster: err = %v, want a hash-slot explanation", err)
	}
}

func TestBadTargets(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{Password: "right"})
	free, _ := servers.FreePort()
	cases := []struct {
		name, target string
		cfg          Config
		want         string
	}{
		{"unreachable", "redis://127.0.0.1:" + strconv.Itoa(free), Config{}, "start the server"},
		{"wrong password", "redis://:wrong@" + srv.Addr, Config{}, "password"},
		{"no password", "redis://" + srv.Addr, Config{}, "needs a password"},
		{"not a cluster", srv.URL(), Config{Cluster: true}, "not a cluster"},
		{"redis as memcached", "memcached://" + srv.Addr, Config{}, "answered like Redis"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Target, cfg.Requests, cfg.Timeout = c.target, 10, 2*time.Second
			_, err := Run(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want one line mentioning %q", err, c.want)
			}
		})
	}
}

// TestJSONMatchesText checks that --json and the text summary carry the
// same numbers.
func TestJSONMatchesText(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	res := mustRun(t, Config{Target: srv.URL(), Ratio: "1:1", Connections: 2, Requests: 2000, Prefill: true, Keys: 100})
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Ops       int64   `json:"ops"`
		Errors    int64   `json:"errors"`
		OpsPerSec float64 `json:"ops_per_sec"`
		Hits      int64   `json:"hits"`
		Misses    int64   `json:"misses"`
		BytesOut  int64   `json:"bytes_out"`
		OutGbps   float64 `json:"out_gbps"`
		Latency   Latency `json:"latency_ms"`
		Server    struct {
			CPUSeconds float64 `json:"cpu_seconds"`
			Per1k      float64 `json:"cpu_seconds_per_1k_ops"`
		} `json:"server"`
	}
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	txt := text.String()
	field := func(re string) string {
		t.Helper()
		sub := regexp.MustCompile(re).FindStringSubmatch(txt)
		if sub == nil {
			t.Fatalf("text has no %s:\n%s", re, txt)
		}
		return sub[1]
	}
	f := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	checks := []struct{ text, json string }{
		{field(`(?m)^ops\s+(\d+)`), strconv.FormatInt(m.Ops, 10)},
		{field(`(?m)^errors\s+(\d+)`), strconv.FormatInt(m.Errors, 10)},
		{field(`throughput\s+([\d.]+)`), f(m.OpsPerSec, 1)},
		{field(`(?m)^hits\s+(\d+)`), strconv.FormatInt(m.Hits, 10)},
		{field(`(?m)^misses\s+(\d+)`), strconv.FormatInt(m.Misses, 10)},
		{field(`bytes out\s+(\d+)`), strconv.FormatInt(m.BytesOut, 10)},
		{field(`bytes out\s+\d+ \(([\d.]+) Gbps`), f(m.OutGbps, 4)},
		{field(`avg ([\d.]+)`), f(m.Latency.Avg, 3)},
		{field(`p50 ([\d.]+)`), f(m.Latency.P50, 3)},
		{field(`p95 ([\d.]+)`), f(m.Latency.P95, 3)},
		{field(`p99 ([\d.]+)`), f(m.Latency.P99, 3)},
		{field(`p99\.9 ([\d.]+)`), f(m.Latency.P999, 3)},
		{field(`max ([\d.]+)`), f(m.Latency.Max, 3)},
		{field(`server cpu\s+([\d.]+)`), f(m.Server.CPUSeconds, 3)},
		{field(`([\d.]+) s per 1,000 ops\n`), f(m.Server.Per1k, 6)},
	}
	for _, c := range checks {
		if c.text != c.json {
			t.Errorf("text %s, JSON %s", c.text, c.json)
		}
	}
	if m.Ops != 2000 || m.Hits+m.Misses == 0 {
		t.Errorf("ops %d hits %d misses %d", m.Ops, m.Hits, m.Misses)
	}
	var hdr bytes.Buffer
	if err := res.WriteHDR(&hdr); err != nil || !strings.Contains(hdr.String(), "Total count    =         2000") {
		t.Errorf("hgrm: %v\n%s", err, hdr.String())
	}
}

func TestSweepHTML(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	var steps []string
	res, err := Sweep(context.Background(), SweepConfig{
		Base:   Config{Target: srv.URL(), Command: CmdSet, Duration: 300 * time.Millisecond},
		Param:  SweepConnections,
		Values: []string{"1", "4"},
		OnStep: func(s Step) { steps = append(steps, s.Value) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 2 || strings.Join(steps, ",") != "1,4" || res.Steps[1].Result.Connections != 4 {
		t.Fatalf("steps %v", steps)
	}
	var b bytes.Buffer
	if err := res.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	if strings.Count(h, "<svg") != 4 || !strings.Contains(h, "<polyline") || !strings.Contains(h, "<rect") {
		t.Errorf("HTML lacks its four charts")
	}
	var txt bytes.Buffer
	_ = res.WriteText(&txt)
	if lines := strings.Count(txt.String(), "\n"); lines != 3 {
		t.Errorf("sweep text has %d lines:\n%s", lines, txt.String())
	}
	// A bad value fails before any step runs.
	_, err = Sweep(context.Background(), SweepConfig{Base: Config{Target: srv.URL()}, Param: SweepPipeline, Values: []string{"1", "x"}})
	if err == nil {
		t.Error("a sweep over pipeline 1,x must fail")
	}
}

func TestSweepIOThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	if _, err := servers.LookPath("redis-server"); err != nil {
		t.Skip(err)
	}
	res, err := Sweep(context.Background(), SweepConfig{
		Base:        Config{Template: []string{"hset", "__key__", "f1", "__data__"}, Connections: 4, Duration: 300 * time.Millisecond},
		Param:       SweepIOThreads,
		Values:      []string{"1", "2"},
		StartServer: servers.Threaded("redis"),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range res.Steps {
		if st.Result.Ops == 0 || st.Result.Errors != 0 || st.Result.Server.Commands["hset"] != st.Result.Ops {
			t.Errorf("io-threads %s: ops %d errors %d server %v", st.Value, st.Result.Ops, st.Result.Errors, st.Result.Server.Commands)
		}
	}
}

func TestCancel(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, Config{Target: srv.URL(), Connections: 2, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || time.Since(start) > 5*time.Second || res.Ops == 0 {
		t.Errorf("interrupted %v after %s with %d ops", res.Interrupted, time.Since(start), res.Ops)
	}
}

func TestACLUser(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	if _, err := srv.Do(context.Background(), "ACL", "SETUSER", "bench", "on", ">pw", "~*", "+@all"); err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, Config{Target: "redis://bench:pw@" + srv.Addr, Command: CmdSet, Connections: 2, Requests: 100})
	if res.Errors != 0 || res.Server.Commands["set"] != 100 {
		t.Errorf("ACL user run: errors %d, server %v", res.Errors, res.Server.Commands)
	}
	if _, err := Run(context.Background(), Config{Target: srv.URL(), User: "bench", Password: "nope", Requests: 1}); err == nil ||
		!strings.Contains(err.Error(), "credentials") {
		t.Errorf("wrong ACL password: %v", err)
	}
}

// TestClusterFollowsMoved starts a run with a wrong slot map (every slot on
// the first master): the MOVED replies make kura reload CLUSTER SLOTS and
// the rest of the run goes where it belongs.
func TestClusterFollowsMoved(t *testing.T) {
	cl := servertest.RedisCluster(t)
	s, err := Config{Target: "redis://" + cl.Nodes[0].Addr, Command: CmdSet, Connections: 2, Pipeline: 4, Requests: 4000}.validate()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good, err := discover(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	stale := &topology{addrs: good.addrs, cluster: true} // owner: all zero
	res, err := run(ctx, s, stale, &Result{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors == 0 || res.Errors > res.Ops/2 {
		t.Fatalf("errors %d of %d ops: want some MOVED, then none", res.Errors, res.Ops)
	}
	if !strings.HasPrefix(res.ErrorSamples[0], "MOVED") {
		t.Errorf("error samples %v", res.ErrorSamples)
	}
	// Redis counts a MOVED reply as a rejected call, not a call.
	if got := res.Server.Commands["set"]; got != res.Ops-res.Errors {
		t.Errorf("server counted %d SETs, kura %d successful", got, res.Ops-res.Errors)
	}
	for _, n := range res.Server.PerNode {
		if n.Commands == 0 {
			t.Errorf("master %s took nothing after the refresh", n.Addr)
		}
	}
}

// TestNoGoroutineLeak checks that runs, including a cluster refresh path
// and a cancelled run, leave no goroutines behind.
func TestNoGoroutineLeak(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	mc := servertest.Memcached(t, servers.MemcachedConfig{})
	before := runtime.NumGoroutine()
	mustRun(t, Config{Target: srv.URL(), Connections: 8, Pipeline: 4, Requests: 2000, Prefill: true, Keys: 1000})
	mustRun(t, Config{Target: "memcached://" + mc.Addr, Connections: 8, Rate: 5000, Duration: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Run(ctx, Config{Target: srv.URL(), Connections: 4, Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestTimeoutsCountInLatency: requests that time out while the server is
// stalled are errors and also count in the latency figures, at the time
// they were abandoned (they used to be left out: a 3 s stall reported a
// 3 ms maximum).
func TestTimeoutsCountInLatency(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = srv.Pause()
		time.Sleep(1500 * time.Millisecond)
		_ = srv.Resume()
	}()
	res := mustRun(t, Config{Target: srv.URL(), Command: CmdSet, Connections: 2, Timeout: 300 * time.Millisecond, Duration: 3 * time.Second})
	if res.Errors == 0 {
		t.Fatalf("no request timed out during a 1.5 s stall with a 300 ms timeout")
	}
	// Deadlines are refreshed once half the timeout is used (conn.write),
	// so a request is abandoned between 150 and 300 ms after its send.
	if res.Latency.Max < 150 {
		t.Errorf("max latency %.3f ms although requests timed out after 300 ms: timeouts are missing from the latency figures (errors %d: %v)", res.Latency.Max, res.Errors, res.ErrorSamples)
	}
}
