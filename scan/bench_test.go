package scan_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/scan"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// serverCPU returns redis-server's used CPU (user + sys) in seconds.
func serverCPU(b *testing.B, c rueidis.Client) float64 {
	b.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return sum
}

// BenchmarkScan walks 1,000,000 keys (KURA_BENCH_KEYS to change) on a
// local redis-server, with a 1.3 MB value planted among them: kura scan
// (no rate limit) side by side with redis-cli --bigkeys and --memkeys on
// the same data in the same run. Reported: keys/s and the server CPU
// seconds each walk added.
//
//	go test -run '^$' -bench BenchmarkScan -benchtime 1x ./scan/
func BenchmarkScan(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("KURA_BENCH_KEYS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	r := servertest.Redis(b, servers.RedisConfig{Args: []string{"--enable-debug-command", "yes"}})
	st, err := redisstore.NewFromURL(context.Background(), r.URL(), redisstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	c := st.Client()
	ctx := context.Background()
	// Three key families, like a real cache: small sessions, mid-size
	// profiles, a few large pages (DEBUG POPULATE: PREFIX:N keys).
	for _, p := range []struct {
		prefix string
		count  int
		size   int
	}{{"session", n * 4 / 10, 64}, {"user", n/2 - 1, 300}, {"page", n / 10, 2000}} {
		if err := c.Do(ctx, c.B().Arbitrary("DEBUG", "POPULATE").Args(strconv.Itoa(p.count), p.prefix, strconv.Itoa(p.size)).Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Set(ctx, "report:big", []byte(strings.Repeat(`{"row":"x"},`, 1_300_000/12)), 0); err != nil {
		b.Fatal(err)
	}
	keys, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64()
	if err != nil {
		b.Fatal(err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		b.Skip("redis-cli not installed")
	}
	host, port, _ := strings.Cut(r.Addr, ":")
	run := func(b *testing.B, walk func()) {
		var cpu, secs float64
		for b.Loop() {
			before := serverCPU(b, c)
			start := time.Now()
			walk()
			secs += time.Since(start).Seconds()
			cpu += serverCPU(b, c) - before
		}
		b.ReportMetric(float64(keys)*float64(b.N)/secs, "keys/s")
		b.ReportMetric(cpu/float64(b.N), "server-cpu-s/op")
	}
	b.Run("kura-scan", func(b *testing.B) {
		run(b, func() {
			rep, err := scan.Run(ctx, store.Store(st), scan.Options{Rate: -1, Count: 1000})
			if err != nil {
				b.Fatal(err)
			}
			if rep.Keys != keys || rep.BigValues.Count != 1 || rep.Biggest[0].Key != "report:big" {
				b.Fatalf("%d keys of %d; big values %+v", rep.Keys, keys, rep.BigValues)
			}
		})
	})
	for _, mode := range []string{"--bigkeys", "--memkeys"} {
		b.Run("redis-cli"+mode, func(b *testing.B) {
			run(b, func() {
				out, err := exec.Command(cli, "-h", host, "-p", port, mode).CombinedOutput()
				if err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				if !strings.Contains(string(out), "report:big") {
					b.Fatalf("redis-cli %s did not find the big key:\n%s", mode, out)
				}
			})
		})
	}
}
