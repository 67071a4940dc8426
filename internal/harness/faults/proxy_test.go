package faults_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// rawConn is a client on a raw TCP connection that writes RESP or
// memcached text and reads replies line by line.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func resp(args ...string) string {
	s := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		s += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	return s
}

func (rc *rawConn) write(s string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) line() string {
	rc.t.Helper()
	s, err := rc.r.ReadString('\n')
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	return strings.TrimRight(s, "\r\n")
}

// bulk reads one RESP bulk reply and returns its body.
func (rc *rawConn) bulk() string {
	rc.t.Helper()
	h := rc.line()
	var n int
	if _, err := fmt.Sscanf(h, "$%d", &n); err != nil {
		rc.t.Fatalf("bulk header %q: %v", h, err)
	}
	if n < 0 {
		return ""
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(rc.r, b); err != nil {
		rc.t.Fatal(err)
	}
	return string(b[:n])
}

func TestProxyCountsRedis(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	p := servertest.Proxy(t, r.Addr, faults.ProxyOptions{Protocol: faults.RESP})
	c := dial(t, p.Addr())
	c.write(resp("SET", "k", "a value with GET and *1\r\n$3 inside"))
	if s := c.line(); s != "+OK" {
		t.Fatalf("SET = %q", s)
	}
	before := p.Stats()
	// 10 GETs, each waiting for its reply: 10 requests, 10 round trips.
	for i := 0; i < 10; i++ {
		c.write(resp("GET", "k"))
		c.bulk()
	}
	// 5 GETs pipelined in one write: 5 requests, 1 round trip.
	c.write(strings.Repeat(resp("GET", "k"), 5))
	for i := 0; i < 5; i++ {
		c.bulk()
	}
	// An inline command counts too.
	c.write("PING\r\n")
	if s := c.line(); s != "+PONG" {
		t.Fatalf("PING = %q", s)
	}
	d := p.Stats().Sub(before)
	if d.Requests != 16 || d.Commands["get"] != 15 || d.Commands["ping"] != 1 || d.RoundTrips != 12 {
		t.Fatalf("requests %d (%v), round trips %d; want 16 (15 get, 1 ping), 12", d.Requests, d.Commands, d.RoundTrips)
	}
	wantUp := int64(15*len(resp("GET", "k")) + len("PING\r\n"))
	if d.BytesUp != wantUp {
		t.Fatalf("bytes up %d, want %d", d.BytesUp, wantUp)
	}
	st := p.Stats()
	if st.Conns != 1 || st.Active != 1 || st.Unparsed != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The proxy's counts agree with the server's own.
	info, err := r.Do(context.Background(), "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	if n := servers.CommandCalls(servers.ParseInfo(info), "get"); n != st.Commands["get"] {
		t.Fatalf("server counted %d GETs, proxy %d", n, st.Commands["get"])
	}
}

func TestProxyCountsMemcache(t *testing.T) {
	m := servertest.Memcached(t, servers.MemcachedConfig{})
	p := servertest.Proxy(t, m.Addr, faults.ProxyOptions{Protocol: faults.Memcache})
	c := dial(t, p.Addr())
	// Data blocks that look like commands are skipped, not counted.
	val := "get x\r\nmg y v\r\n"
	c.write(fmt.Sprintf("set k 0 0 %d\r\n%s\r\n", len(val), val))
	if s := c.line(); s != "STORED" {
		t.Fatalf("set = %q", s)
	}
	c.write(fmt.Sprintf("ms k2 %d T0\r\n%s\r\n", len(val), val))
	if s := c.line(); s != "HD" {
		t.Fatalf("ms = %q", s)
	}
	for i := 0; i < 7; i++ {
		c.write("mg k v\r\n")
		if s := c.line(); !strings.HasPrefix(s, "VA ") {
			t.Fatalf("mg = %q", s)
		}
		c.line()
		c.line()
		c.line()
	}
	// Three quiet mg and an mn in one write: 4 requests, 1 round trip.
	c.write("mg k v q\r\nmg k2 v q\r\nmg nokey v q\r\nmn\r\n")
	for {
		if s := c.line(); s == "MN" {
			break
		}
	}
	st := p.Stats()
	want := map[string]int64{"set": 1, "ms": 1, "mg": 10, "mn": 1}
	for k, v := range want {
		if st.Commands[k] != v {
			t.Fatalf("commands %v, want %v", st.Commands, want)
		}
	}
	if st.Requests != 13 || st.RoundTrips != 10 || st.Unparsed != 0 {
		t.Fatalf("requests %d, round trips %d, unparsed %d; want 13, 10, 0", st.Requests, st.RoundTrips, st.Unparsed)
	}
}

func TestProxyDelay(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	const delay = 40 * time.Millisecond
	p := servertest.Proxy(t, r.Addr, faults.ProxyOptions{Delay: delay})
	c := dial(t, p.Addr())
	for i := 0; i < 3; i++ {
		start := time.Now()
		c.write(resp("PING"))
		c.line()
		// A lower bound only: the reply cannot come before it was held
		// in both directions.
		if el := time.Since(start); el < 2*delay {
			t.Fatalf("round trip took %v, less than 2x the %v delay", el, delay)
		}
	}
	p.SetDelay(0)
	c.write(resp("PING"))
	if s := c.line(); s != "+PONG" {
		t.Fatal(s)
	}
}

func TestProxyBandwidth(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	val := strings.Repeat("x", 40<<10)
	if _, err := r.Do(ctx, "SET", "big", val); err != nil {
		t.Fatal(err)
	}
	const rate = 200 << 10 // 200 KiB/s: 40 KiB takes 200ms
	p := servertest.Proxy(t, r.Addr, faults.ProxyOptions{Bandwidth: rate})
	c := dial(t, p.Addr())
	start := time.Now()
	c.write(resp("GET", "big"))
	if got := c.bulk(); got != val {
		t.Fatalf("value of %d bytes came back as %d bytes", len(val), len(got))
	}
	el := time.Since(start)
	min := time.Duration(float64(len(val)) / rate * float64(time.Second) * 0.9)
	if el < min {
		t.Fatalf("40 KiB at 200 KiB/s took %v, less than %v", el, min)
	}
	if st := p.Stats(); st.BytesDown < int64(len(val)) {
		t.Fatalf("bytes down %d < %d", st.BytesDown, len(val))
	}
}

func TestProxyStall(t *testing.T) {
	m := servertest.Memcached(t, servers.MemcachedConfig{})
	p := servertest.Proxy(t, m.Addr, faults.ProxyOptions{Protocol: faults.Memcache})
	c := dial(t, p.Addr())
	p.Stall()
	c.write("version\r\n")
	_ = c.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.r.ReadString('\n'); !isTimeout(err) {
		t.Fatalf("a stalled proxy answered: %v", err)
	}
	// A connection opened while stalled is accepted but sees nothing.
	c2 := dial(t, p.Addr())
	c2.write("version\r\n")
	deadline := time.Now().Add(10 * time.Second)
	for p.Stats().Requests != 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if p.Stats().Requests != 2 {
		t.Fatalf("requests received while stalled: %d, want 2", p.Stats().Requests)
	}
	p.Unstall()
	_ = c.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if s := c.line(); !strings.HasPrefix(s, "VERSION") {
		t.Fatalf("held request answered %q", s)
	}
	if s := c2.line(); !strings.HasPrefix(s, "VERSION") {
		t.Fatalf("held request answered %q", s)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestProxyRefuseAdmit(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	p := servertest.Proxy(t, r.Addr, faults.ProxyOptions{})
	c := dial(t, p.Addr())
	// A round trip first: dial returns once the kernel has queued the
	// connection, and closing the listener resets one the proxy has not
	// accepted yet (CI at load, ECONNRESET on the write below).
	c.write(resp("PING"))
	if s := c.line(); s != "+PONG" {
		t.Fatal(s)
	}
	if err := p.Refuse(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing: %v, want connection refused", err)
	}
	c.write(resp("PING")) // an open connection keeps working
	if s := c.line(); s != "+PONG" {
		t.Fatal(s)
	}
	if err := p.Admit(); err != nil {
		t.Fatal(err)
	}
	c2 := dial(t, p.Addr())
	c2.write(resp("PING"))
	if s := c2.line(); s != "+PONG" {
		t.Fatal(s)
	}
	if st := p.Stats(); st.Conns != 2 {
		t.Fatalf("conns %d, want 2", st.Conns)
	}
}

func TestProxyResetMidReplyRedis(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	if _, err := r.Do(context.Background(), "SET", "big", strings.Repeat("v", 10000)); err != nil {
		t.Fatal(err)
	}
	p := servertest.Proxy(t, r.Addr, faults.ProxyOptions{Protocol: faults.RESP})
	c := dial(t, p.Addr())
	c.write(resp("PING")) // a reply before arming passes
	c.line()
	p.ResetNextReply(100)
	c.write(resp("GET", "big"))
	got, err := io.ReadAll(c.r)
	if err == nil {
		t.Fatalf("a reset connection ended cleanly after %d bytes", len(got))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read error %v, want connection reset", err)
	}
	if len(got) > 100 {
		t.Fatalf("client got %d bytes of the reply, more than the 100 allowed", len(got))
	}
	if st := p.Stats(); st.Resets != 1 {
		t.Fatalf("resets %d, want 1", st.Resets)
	}
	// One shot: the next connection gets whole replies.
	c2 := dial(t, p.Addr())
	c2.write(resp("GET", "big"))
	if v := c2.bulk(); len(v) != 10000 {
		t.Fatalf("value of %d bytes after the reset, want 10000", len(v))
	}
}

func TestProxyResetMidReplyMemcache(t *testing.T) {
	m := servertest.Memcached(t, servers.MemcachedConfig{})
	p := servertest.Proxy(t, m.Addr, faults.ProxyOptions{})
	c := dial(t, p.Addr())
	val := strings.Repeat("v", 5000)
	c.write(fmt.Sprintf("set k 0 0 %d\r\n%s\r\n", len(val), val))
	c.line()
	p.ResetNextReply(10)
	c.write("get k\r\n")
	got, err := io.ReadAll(c.r)
	if !errors.Is(err, syscall.ECONNRESET) || len(got) > 10 {
		t.Fatalf("after the reset: %d bytes, %v; want at most 10 bytes and connection reset", len(got), err)
	}
}

func TestProxyResetConns(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	p := servertest.Proxy(t, r.Addr, faults.ProxyOptions{})
	cs := []*rawConn{dial(t, p.Addr()), dial(t, p.Addr()), dial(t, p.Addr())}
	for _, c := range cs {
		c.write(resp("PING"))
		c.line()
	}
	if n := p.ResetConns(); n != 3 {
		t.Fatalf("reset %d connections, want 3", n)
	}
	for _, c := range cs {
		if _, err := c.r.ReadString('\n'); err == nil {
			t.Fatal("a reset connection still reads")
		}
	}
	c := dial(t, p.Addr())
	c.write(resp("PING"))
	if s := c.line(); s != "+PONG" {
		t.Fatal(s)
	}
}

// TestProxyServerRestart: the server behind a proxy is killed, then
// restarted on the same port; the proxy's clients see errors, then new
// connections are served again.
func TestProxyServerRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (*servers.Proc, string, string)
	}{
		{"redis", func(t *testing.T) (*servers.Proc, string, string) {
			return servertest.Redis(t, servers.RedisConfig{}).Proc, resp("PING"), "+PONG"
		}},
		{"memcached", func(t *testing.T) (*servers.Proc, string, string) {
			return servertest.Memcached(t, servers.MemcachedConfig{}).Proc, "version\r\n", "VERSION"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, ping, pong := tc.start(t)
			p := servertest.Proxy(t, srv.Addr, faults.ProxyOptions{})
			c := dial(t, p.Addr())
			c.write(ping)
			c.line()
			srv.Kill()
			if _, err := c.r.ReadString('\n'); err == nil {
				t.Fatal("connection to a killed server still reads")
			}
			c2, err := net.DialTimeout("tcp", p.Addr(), time.Second)
			if err != nil {
				t.Fatal(err) // the proxy accepts ...
			}
			_ = c2.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := bufio.NewReader(c2).ReadString('\n'); err == nil {
				t.Fatal("... but must close: the server is down")
			}
			c2.Close()
			if st := p.Stats(); st.DialErrors != 1 {
				t.Fatalf("dial errors %d, want 1", st.DialErrors)
			}
			if err := srv.Restart(context.Background()); err != nil {
				t.Fatal(err)
			}
			c3 := dial(t, p.Addr())
			c3.write(ping)
			if s := c3.line(); !strings.HasPrefix(s, pong) {
				t.Fatalf("after restart: %q", s)
			}
		})
	}
}

func TestBlackHole(t *testing.T) {
	b := servertest.BlackHole(t)
	c := dial(t, b.Addr())
	c.write("version\r\n")
	_ = c.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.r.ReadString('\n'); !isTimeout(err) {
		t.Fatalf("black hole answered: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.Bytes() != 9 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if b.Conns() != 1 || b.Bytes() != 9 {
		t.Fatalf("conns %d, bytes %d; want 1, 9", b.Conns(), b.Bytes())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Fatal("read after Close succeeded")
	}
}

// TestProxyNoLeak: Close ends every goroutine of the proxy, even with
// clients that never close their connections and traffic held by a stall.
func TestProxyNoLeak(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	before := runtime.NumGoroutine()
	p, err := faults.NewProxy(r.Addr, faults.ProxyOptions{Delay: time.Millisecond, Bandwidth: 1 << 20, Protocol: faults.RESP})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		c := dial(t, p.Addr())
		c.write(resp("PING"))
		c.line()
	}
	p.Stall()
	c := dial(t, p.Addr())
	c.write(resp("PING"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}

// TestRefuseThenResetCutsEveryEarlierConn: a ResetConns after Refuse
// resets every connection a client opened before Refuse, also those the
// proxy was accepting at that moment. Before, a connection that Accept
// returned just as the listener closed could read the ResetConns count
// after the reset and outlive it: a health probe's connection kept
// answering through a "node down" (TestL1ReadsGoThroughTheBreaker in CI).
func TestRefuseThenResetCutsEveryEarlierConn(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	for round := range 40 {
		p, err := faults.NewProxy(r.Addr, faults.ProxyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const clients = 8
		conns := make(chan net.Conn, clients)
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
					conns <- c
				}
			}()
		}
		time.Sleep(time.Duration(round%8) * 50 * time.Microsecond) // land Refuse among the accepts
		if err := p.Refuse(); err != nil {
			t.Fatal(err)
		}
		p.ResetConns()
		wg.Wait()
		close(conns)
		for c := range conns {
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, werr := c.Write([]byte(resp("PING")))
			buf := make([]byte, 16)
			n, rerr := c.Read(buf)
			c.Close()
			if werr == nil && rerr == nil {
				t.Fatalf("round %d: a connection opened before Refuse answered %q after ResetConns", round, buf[:n])
			}
			if isTimeout(rerr) {
				t.Fatalf("round %d: a connection opened before Refuse neither answered nor was reset", round)
			}
		}
		p.Close()
	}
}
