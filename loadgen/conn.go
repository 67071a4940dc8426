package loadgen

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/kuracache/kura/internal/redial"
	"github.com/kuracache/kura/internal/wire"
	"github.com/kuracache/kura/store/storeurl"
)

// conn is one load connection: a buffered reader that counts bytes, and a
// writer that counts them too. It is owned by one worker.
type conn struct {
	addr     string
	nc       net.Conn
	r        *bufio.Reader
	cr       countReader
	out      int64
	timeout  time.Duration
	deadline time.Time
}

type countReader struct {
	r net.Conn
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// readBufSize holds a deep pipeline of small replies in one read.
const readBufSize = 64 << 10

// dial connects to addr (with TLS when t.TLS) and runs the Redis
// handshake for Redis targets. Errors are worded for a person.
func dial(ctx context.Context, s *settings, addr string) (*conn, error) {
	t, timeout := s.target, s.Timeout
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	var nc net.Conn
	var err error
	dialAddr := addr
	if s.Resolver != nil {
		if host, port, e := net.SplitHostPort(addr); e == nil && net.ParseIP(host) == nil {
			ips, e := s.Resolver.LookupHost(ctx, host)
			if e == nil && len(ips) == 0 {
				e = fmt.Errorf("no address for %s", host)
			}
			if e != nil {
				return nil, dialError(t, addr, e)
			}
			dialAddr = net.JoinHostPort(ips[0], port)
		}
	}
	if t.TLS {
		host, _, _ := net.SplitHostPort(addr)
		td := tls.Dialer{NetDialer: &d, Config: &tls.Config{ServerName: host, RootCAs: s.rootCAs, InsecureSkipVerify: s.InsecureTLS}}
		nc, err = td.DialContext(ctx, "tcp", dialAddr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", dialAddr)
	}
	if err != nil {
		var recErr tls.RecordHeaderError
		if t.TLS && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &recErr)) {
			return nil, storeurl.TLSError(storeurl.Kind(t.Kind), addr, err)
		}
		return nil, dialError(t, addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &conn{addr: addr, nc: nc, timeout: timeout}
	c.cr.r = nc
	c.r = bufio.NewReaderSize(&c.cr, readBufSize)
	if t.Kind == KindRedis {
		if err := c.redisHandshake(t); err != nil {
			nc.Close()
			return nil, err
		}
	}
	// Count only the load, not the handshake.
	c.cr.n, c.out = 0, 0
	return c, nil
}

// dialError words a failed dial as every kura command does
// (storeurl.DialError), with the bench flags that fix a TLS trust problem.
func dialError(t Target, addr string, err error) error {
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return fmt.Errorf("cannot connect to %s at %s: %v (trust its CA with --tls-ca FILE, or skip verification with --insecure)", t.Kind, addr, redial.Cause(err))
	}
	return storeurl.DialError(storeurl.Kind(t.Kind), addr, err)
}

// write sends b, keeping the connection's deadline fresh. Deadlines are
// moved only when half of the timeout has passed: resetting them on every
// batch costs runtime timer work on the hot path.
func (c *conn) write(b []byte, now time.Time) error {
	if now.Add(c.timeout / 2).After(c.deadline) {
		c.deadline = now.Add(c.timeout)
		if err := c.nc.SetDeadline(c.deadline); err != nil {
			return err
		}
	}
	n, err := c.nc.Write(b)
	c.out += int64(n)
	return err
}

// in returns the bytes read so far (including buffered, unparsed bytes).
func (c *conn) in() int64 { return c.cr.n }

func (c *conn) close() { _ = c.nc.Close() }

// control sends one command on the connection and reads its reply, for the
// handshake and for server counters; it allocates freely.
func (c *conn) redisDo(args ...string) (any, error) {
	b := wire.AppendCommand(nil, args...)
	if err := c.write(b, time.Now()); err != nil {
		return nil, err
	}
	return wire.ReadValue(c.r)
}

func (c *conn) redisHandshake(t Target) error {
	authErr := func(reply string, err error) error {
		if t.MasterSet != "" {
			// The sentinels and the primary take different
			// credentials: say which part of the URL to fix.
			return storeurl.SentinelAuthError(c.addr, reply, slices.Contains(t.Sentinels, c.addr), err)
		}
		return storeurl.AuthError(c.addr, reply, err)
	}
	if t.Password != "" || t.User != "" {
		args := []string{"AUTH", t.Password}
		if t.User != "" {
			args = []string{"AUTH", t.User, t.Password}
		}
		_, err := c.redisDo(args...)
		var re respError
		// A server without a password takes any over HELLO, as kura's
		// store (rueidis) sends it: the same URL works in every command.
		if errors.As(err, &re) && !strings.Contains(re.Error(), "without any password configured") {
			return authErr(re.Error(), err)
		}
		if errors.As(err, &re) {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("redis at %s: AUTH failed: %v", c.addr, redial.Cause(err))
		}
	}
	v, err := c.redisDo("PING")
	var re respError
	if errors.As(err, &re) {
		if re.Code() == "NOAUTH" {
			return authErr(re.Error(), err)
		}
		return fmt.Errorf("redis at %s answered PING with an error: %s", c.addr, re)
	}
	if err != nil {
		return fmt.Errorf("redis at %s does not answer PING: %v (is it a Redis server? memcached targets are memcached://host:port)", c.addr, redial.Cause(err))
	}
	if s, _ := v.(string); s != "PONG" {
		return fmt.Errorf("redis at %s answered PING with %v; is it a Redis server?", c.addr, v)
	}
	if t.DB != 0 {
		if _, err := c.redisDo("SELECT", fmt.Sprint(t.DB)); err != nil {
			return fmt.Errorf("redis at %s: SELECT %d: %v", c.addr, t.DB, err)
		}
	}
	return nil
}
