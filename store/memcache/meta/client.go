package meta

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/internal/wire"
	"github.com/kuracache/kura/store"
)

// Options configure a Client. The zero value is ready to use.
type Options struct {
	// DialTimeout bounds connecting. If zero, it defaults to 1s.
	DialTimeout time.Duration
	// ReadTimeout is how long a read may wait for the next bytes. It is an
	// idle timeout: a large batch that keeps streaming never hits it, a
	// stalled server does. The context deadline caps it. If zero, it
	// defaults to 3s; negative disables it (the context alone bounds
	// reads).
	ReadTimeout time.Duration
	// WriteTimeout is the same for writes. If zero, it defaults to 3s;
	// negative disables it.
	WriteTimeout time.Duration
	// MaxIdleConns is how many idle connections are kept for reuse.
	// Connections beyond it are closed when put back. If zero, it
	// defaults to 8.
	MaxIdleConns int
	// Dial opens the connection. If nil, a net.Dialer with DialTimeout is
	// used. Tests and benchmarks use it to count bytes or inject faults;
	// applications to add TLS.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (o Options) withDefaults() Options {
	if o.DialTimeout == 0 {
		o.DialTimeout = time.Second
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 3 * time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 3 * time.Second
	}
	if o.ReadTimeout < 0 {
		o.ReadTimeout = 0
	}
	if o.WriteTimeout < 0 {
		o.WriteTimeout = 0
	}
	if o.MaxIdleConns == 0 {
		o.MaxIdleConns = 8
	}
	if o.Dial == nil {
		d := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
		o.Dial = d.DialContext
	}
	return o
}

// Client talks to one memcached server through a pool of connections. It
// is safe for concurrent use. Every call takes a connection for its whole
// exchange, so answers can never interleave.
type Client struct {
	addr string
	opts Options

	mu     sync.Mutex
	idle   []*Conn
	closed bool
	probe  *Conn // Probe's own connection, never in idle

	// itemSizeMax is the server's item_size_max, read once from
	// "stats settings" on the first connection; 0 while unknown.
	itemSizeMax atomic.Int64
	// readingSettings is set while one connection reads the settings;
	// others do not wait for it (it may be stuck on a stalled server,
	// and waiting would not honour their contexts).
	readingSettings atomic.Bool
	// answered is set once a new connection has been answered (greet),
	// and cleared when a connection fails: while it is clear, every new
	// connection proves the server answers before a command is sent on
	// it (see greet).
	answered atomic.Bool
}

// ErrClientClosed is returned by a Client used after Close. It matches
// store.ErrClosed.
var ErrClientClosed = fmt.Errorf("meta: client closed: %w", store.ErrClosed)

// NewClient returns a Client for the server at addr ("host:port"). It
// does not connect; the first call does.
func NewClient(addr string, opts Options) *Client {
	return &Client{addr: addr, opts: opts.withDefaults()}
}

// Addr returns the server address.
func (cl *Client) Addr() string { return cl.addr }

// maxValue bounds data blocks read from this server: its item size when
// known, memcached's hard ceiling (1 GiB) otherwise.
func (cl *Client) maxValue() int {
	if n := cl.itemSizeMax.Load(); n > 0 {
		return int(n)
	}
	return 1 << 30
}

// ItemSizeMax returns the server's item_size_max, or 0 when it has not been
// read yet (no connection has succeeded).
func (cl *Client) ItemSizeMax() int { return int(cl.itemSizeMax.Load()) }

// Conn returns a connection, idle or new. Hand it back with Put.
func (cl *Client) Conn(ctx context.Context) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memcache %s: %w", cl.addr, context.Cause(ctx))
	}
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil, ErrClientClosed
	}
	if n := len(cl.idle); n > 0 {
		c := cl.idle[n-1]
		cl.idle[n-1] = nil
		cl.idle = cl.idle[:n-1]
		cl.mu.Unlock()
		return c, nil
	}
	cl.mu.Unlock()
	return cl.dial(ctx)
}

func (cl *Client) dial(ctx context.Context) (*Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, cl.opts.DialTimeout)
	defer cancel()
	nc, err := cl.opts.Dial(dctx, "tcp", cl.addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("memcache %s: dial: %w (%v)", cl.addr, context.Cause(ctx), err)
		}
		return nil, fmt.Errorf("memcache %s: dial: %w", cl.addr, err)
	}
	c := &Conn{client: cl, nc: nc}
	c.br = bufio.NewReaderSize(connIO{c}, bufSize)
	c.bw = bufio.NewWriterSize(connIO{c}, bufSize)
	if !cl.answered.Load() || cl.itemSizeMax.Load() == 0 {
		if err := cl.greet(ctx, c); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// greet proves that the server answers on a new connection before any
// command is sent on it, with the "stats settings" read that learns
// item_size_max, or an mn when another connection is reading those. It
// runs while the server has not answered since the last failed
// connection: a stopped server (SIGSTOP, a VM paused) queues what it is
// sent and executes it when it resumes, and a lease request (mg N) sent
// by a caller that gave up long ago would then leave a placeholder that
// makes every later caller wait for a fill that never comes.
func (cl *Client) greet(ctx context.Context, c *Conn) error {
	var err error
	if cl.itemSizeMax.Load() == 0 && cl.readingSettings.CompareAndSwap(false, true) {
		err = cl.readSettings(ctx, c)
		cl.readingSettings.Store(false)
	} else {
		err = c.noop(ctx)
	}
	if err == nil {
		cl.answered.Store(true)
	}
	return err
}

// readSettings reads item_size_max on c (greet makes sure one connection
// at a time does; the others do not wait for it: it may be stuck on a
// stalled server, and waiting would not honour their contexts).
func (cl *Client) readSettings(ctx context.Context, c *Conn) error {
	if cl.itemSizeMax.Load() != 0 {
		return nil
	}
	st, err := c.stats(ctx, "settings")
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(st["item_size_max"], 10, 64)
	if err != nil || n <= 0 {
		// A server (or proxy) without the setting: assume memcached's
		// default rather than guess larger.
		n = 1 << 20
	}
	cl.itemSizeMax.Store(n)
	return nil
}

// Put hands c back. A broken connection is closed; so is one beyond
// MaxIdleConns, or any after Close.
func (cl *Client) Put(c *Conn) {
	if c == nil {
		return
	}
	if c.Broken() != nil || c.br.Buffered() > 0 || c.bw.Buffered() > 0 {
		_ = c.nc.Close()
		return
	}
	cl.mu.Lock()
	if cl.closed || len(cl.idle) >= cl.opts.MaxIdleConns {
		cl.mu.Unlock()
		_ = c.nc.Close()
		return
	}
	cl.idle = append(cl.idle, c)
	cl.mu.Unlock()
}

// Close closes the idle connections and refuses further calls;
// connections in use are closed when put back.
func (cl *Client) Close() error {
	cl.mu.Lock()
	idle := cl.idle
	cl.idle = nil
	cl.closed = true
	if cl.probe != nil {
		idle = append(idle, cl.probe)
		cl.probe = nil
	}
	cl.mu.Unlock()
	for _, c := range idle {
		_ = c.nc.Close()
	}
	return nil
}

// Do sends one request and reads its answer into res. Quiet is ignored
// (a lone command always answers). An error line from the server is
// returned as a *ServerError and also left in res.
func (cl *Client) Do(ctx context.Context, req *Request, res *Response) error {
	c, err := cl.Conn(ctx)
	if err != nil {
		return err
	}
	defer cl.Put(c)
	c.Begin(ctx)
	defer c.End()
	r := *req
	r.Quiet = false
	if err := c.WriteRequest(&r); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	if err := c.ReadResponse(res); err != nil {
		return err
	}
	if err := res.Err(); err != nil {
		if res.Status != StatusServerError {
			// ERROR and CLIENT_ERROR may leave a data block unread.
			c.fail(err)
		}
		return fmt.Errorf("memcache %s: %s %q: %w", cl.addr, req.Cmd, req.Key, err)
	}
	if res.Opaque != req.Opaque {
		return c.fail(fmt.Errorf("memcache %s: %w: answer for O%d to a request with O%d",
			cl.addr, ErrProtocol, res.Opaque, req.Opaque))
	}
	return nil
}

// Get returns the value of key, or an error matching store.ErrNotFound.
// A plain read of a stale item takes its recache token (W) as any mg does;
// Get hands it back at once (see HandBack), so a reader that can reload
// the key gets it.
func (cl *Client) Get(ctx context.Context, key string) ([]byte, error) {
	var res Response
	if err := cl.Do(ctx, &Request{Cmd: Get, Key: key, ReturnValue: true, ReturnCAS: true}, &res); err != nil {
		return nil, err
	}
	if res.Won {
		cl.HandBack(ctx, key, res.CAS)
	}
	switch {
	case res.Placeholder(), res.Status == EN:
		return nil, store.ErrNotFound
	case res.Status == VA:
		return res.Value, nil
	}
	return nil, cl.unexpected("mg", &res)
}

// HandBack gives up the recache token (W) of a stale item that a read
// which will not reload it took, with "md <key> I C<cas>": the item stays
// stale with its TTL and the next reader wins the token. If the item
// changed since (its CAS differs), it is left alone. Best effort: if the
// request fails, the token is lost until the item expires, as before.
func (cl *Client) HandBack(ctx context.Context, key string, cas uint64) {
	var res Response
	_ = cl.Do(ctx, &Request{Cmd: Delete, Key: key, Invalidate: true, CompareCAS: cas}, &res)
}

// Set stores value under key for ttl (0: no expiry; see TTL).
func (cl *Client) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if n := cl.ItemSizeMax(); n > 0 && len(value) > n {
		return tooLarge(key, len(value), n, cl.addr)
	}
	var res Response
	err := cl.Do(ctx, &Request{Cmd: Set, Key: key, Value: value, TTL: TTL(ttl, time.Now())}, &res)
	if err != nil {
		return err
	}
	switch res.Status {
	case HD:
		return nil
	case NS:
		return fmt.Errorf("memcache %s: set %q: %w", cl.addr, key, store.ErrNotStored)
	}
	return cl.unexpected("ms", &res)
}

// Delete removes key; a missing key is not an error.
func (cl *Client) Delete(ctx context.Context, key string) error {
	var res Response
	if err := cl.Do(ctx, &Request{Cmd: Delete, Key: key}, &res); err != nil {
		return err
	}
	switch res.Status {
	case HD, NF:
		return nil
	}
	return cl.unexpected("md", &res)
}

// Touch sets a new TTL on key, or returns an error matching
// store.ErrNotFound.
func (cl *Client) Touch(ctx context.Context, key string, ttl time.Duration) error {
	var res Response
	req := Request{Cmd: Get, Key: key, TTL: TTL(ttl, time.Now()), ForceTTL: true}
	if err := cl.Do(ctx, &req, &res); err != nil {
		return err
	}
	switch res.Status {
	case HD:
		return nil
	case EN:
		return store.ErrNotFound
	}
	return cl.unexpected("mg", &res)
}

// Noop sends mn and waits for MN: a cheap liveness check.
func (cl *Client) Noop(ctx context.Context) error {
	var res Response
	if err := cl.Do(ctx, &Request{Cmd: Noop}, &res); err != nil {
		return err
	}
	if res.Status != MN {
		return cl.unexpected("mn", &res)
	}
	return nil
}

// Stats runs "stats <group>" ("" for the general statistics,
// "settings", "slabs", ...) and returns the STAT lines as a map.
func (cl *Client) Stats(ctx context.Context, group string) (map[string]string, error) {
	if strings.ContainsAny(group, " \r\n") {
		return nil, fmt.Errorf("meta: invalid stats group %q", group)
	}
	c, err := cl.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer cl.Put(c)
	return c.stats(ctx, group)
}

func (c *Conn) stats(ctx context.Context, group string) (map[string]string, error) {
	c.Begin(ctx)
	defer c.End()
	cmd := "stats\r\n"
	if group != "" {
		cmd = "stats " + group + "\r\n"
	}
	if _, err := c.bw.WriteString(cmd); err != nil {
		return nil, c.fail(err)
	}
	if err := c.Flush(); err != nil {
		return nil, err
	}
	m, err := wire.ReadStats(c.br)
	var re *wire.ReplyError
	switch {
	case err == nil:
		return m, nil
	case errors.As(err, &re):
		return nil, c.fail(fmt.Errorf("memcache %s: stats %s: %s", c.client.addr, group, re.Line))
	case errors.Is(err, wire.ErrProtocol):
		return nil, c.fail(fmt.Errorf("memcache %s: %w (%w)", c.client.addr, ErrProtocol, err))
	}
	return nil, c.fail(err)
}

func (cl *Client) unexpected(cmd string, res *Response) error {
	return fmt.Errorf("memcache %s: %s: unexpected answer %s", cl.addr, cmd, res.Status)
}

func tooLarge(key string, size, limit int, addr string) error {
	return fmt.Errorf("memcache %s: key %q: value of %d bytes exceeds the server's item_size_max of %d bytes: %w",
		addr, key, size, limit, store.ErrValueTooLarge)
}

// Probe sends mn and waits for MN on a connection of its own, kept apart
// from the pool that carries application commands, so a health check never
// waits for a free connection or behind a pipeline of real requests. One
// Probe runs at a time per Client (a concurrent one dials its own
// connection and closes it after). A connection that failed is closed and
// the next Probe dials again.
func (cl *Client) Probe(ctx context.Context) error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return ErrClientClosed
	}
	c := cl.probe
	cl.probe = nil
	cl.mu.Unlock()
	if c == nil {
		var err error
		if c, err = cl.dial(ctx); err != nil {
			return err
		}
	}
	err := c.noop(ctx)
	cl.mu.Lock()
	if err != nil || c.Broken() != nil || cl.closed || cl.probe != nil {
		cl.mu.Unlock()
		_ = c.nc.Close()
		return err
	}
	cl.probe = c
	cl.mu.Unlock()
	return nil
}

// noop is one mn/MN exchange on c.
func (c *Conn) noop(ctx context.Context) error {
	c.Begin(ctx)
	defer c.End()
	if err := c.WriteRequest(&Request{Cmd: Noop}); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	var res Response
	if err := c.ReadResponse(&res); err != nil {
		return err
	}
	if res.Status != MN {
		return c.fail(c.client.unexpected("mn", &res))
	}
	return nil
}
