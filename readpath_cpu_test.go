//go:build linux

package kura_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// BenchmarkReadPathCost is BenchmarkReadPath's default Fetch (with the
// Store's one connection per server, and with rueidis's default number)
// and rueidisaside with DisableCache in interleaved rounds, reporting what
// a hit costs besides its time, which a loaded machine distorts less:
// the client process's CPU (cli-µs/op, getrusage), redis-server's CPU
// (srv-µs/op, INFO cpu) and the client's write and read system calls
// (/proc/self/io). KURA_BENCH_ROUNDS sets the number of rounds (default
// 3). BENCHMARKS.md, "One read path".
func BenchmarkReadPathCost(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	const conc = 64
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(admin.Close)
	cs := []contender{
		kuraContender(b, ctx, srv.URL(), "kura", kura.Options{}, redisstore.Options{}),
		kuraContender(b, ctx, srv.URL(), "kura-rueidis-conns", kura.Options{}, rueidisConns),
		asideContender(b, ctx, "rueidisaside-nocache", srv.Addr, true),
	}
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("KURA_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	warmContenders(b, cs, 1)
	for round := 1; round <= rounds; round++ {
		for i := range cs {
			c := cs[(round-1+i)%len(cs)]
			b.Run("round"+strconv.Itoa(round)+"/"+c.name, func(b *testing.B) {
				s0, u0 := serverCPU(b, admin), selfCPU()
				w0, r0 := selfSyscalls()
				warmHitsOnly(b, conc, c.get, c.loads)
				w1, r1 := selfSyscalls()
				s1, u1 := serverCPU(b, admin), selfCPU()
				n := float64(b.N)
				b.ReportMetric((u1-u0)*1e6/n, "cli-µs/op")
				b.ReportMetric((s1-s0)*1e6/n, "srv-µs/op")
				b.ReportMetric(float64(w1-w0)/n, "writes/op")
				b.ReportMetric(float64(r1-r0)/n, "reads/op")
			})
		}
	}
}

// serverCPU is the CPU seconds (user and system) the server used so far.
func serverCPU(b *testing.B, c rueidis.Client) float64 {
	s, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var sec float64
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			sec += f
		}
	}
	return sec
}

// selfCPU is the CPU seconds (user and system) this process used so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// selfSyscalls are the write and read system calls of this process so far
// (syscw and syscr of /proc/self/io; 0 where it cannot be read).
func selfSyscalls() (w, r int64) {
	p, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(p), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscw":
			w = n
		case "syscr":
			r = n
		}
	}
	return w, r
}
