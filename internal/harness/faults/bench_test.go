package faults_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// BenchmarkProxyRoundTrip measures what the proxy adds to one PING round
// trip on a raw connection to redis-server: direct, through the proxy
// with no fault, with the 250µs-per-direction delay the memcached
// benchmarks use (a 500µs round trip), and with a 1 MB/s limit. The
// turns/op metric is the proxy's own round-trip count per operation.
func BenchmarkProxyRoundTrip(b *testing.B) {
	r := servertest.Redis(b, servers.RedisConfig{})
	ping := "*1\r\n$4\r\nPING\r\n"
	for _, tc := range []struct {
		name string
		opts *faults.ProxyOptions
	}{
		{"direct", nil},
		{"proxy", &faults.ProxyOptions{Protocol: faults.RESP}},
		{"proxy-raw", &faults.ProxyOptions{}},
		{"proxy-delay250us", &faults.ProxyOptions{Delay: 250 * time.Microsecond}},
		{"proxy-1MBps", &faults.ProxyOptions{Bandwidth: 1 << 20}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			addr := r.Addr
			var p *faults.Proxy
			if tc.opts != nil {
				p = servertest.Proxy(b, r.Addr, *tc.opts)
				addr = p.Addr()
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			n := 0
			for b.Loop() {
				if _, err := io.WriteString(c, ping); err != nil {
					b.Fatal(err)
				}
				if s, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(s, "+PONG") {
					b.Fatal(s, err)
				}
				n++
			}
			if p != nil {
				b.ReportMetric(float64(p.Stats().RoundTrips)/float64(n), "turns/op")
			}
		})
	}
}
