package meta

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

const bufSize = 64 << 10

// Conn is one connection to a memcached server. It is not safe for
// concurrent use: a Conn is taken from a Client with Client.Conn, used by
// one goroutine, and handed back with Client.Put.
//
// A Conn whose stream may be out of step with its requests (an I/O error,
// a timeout, a cancelled context, a protocol error, an error line in a
// pipeline) is marked broken and closed when put back, never reused: the
// next request on it could otherwise read an answer meant for another.
type Conn struct {
	client *Client
	nc     net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	scr    []byte

	// broken is set from the reader and, in a pipeline, the writer
	// goroutine.
	bmu    sync.Mutex
	broken error

	ctx       context.Context
	deadline  time.Time // from ctx; zero when none
	stop      func() bool
	fired     atomic.Bool
	interrupt func() // made once: forces the deadline into the past
}

// Addr returns the server address.
func (c *Conn) Addr() string { return c.client.addr }

// Broken returns why the connection can no longer be used, or nil.
func (c *Conn) Broken() error {
	c.bmu.Lock()
	defer c.bmu.Unlock()
	return c.broken
}

// Begin binds ctx to the connection's next reads and writes: its deadline
// caps every I/O call, and its cancellation interrupts them (the
// connection is then broken). Call End when done. Client methods do this
// themselves; it is exported for callers driving a Conn by hand.
func (c *Conn) Begin(ctx context.Context) {
	c.ctx = ctx
	c.deadline, _ = ctx.Deadline()
	c.fired.Store(false)
	if _, bound := ctx.(interface{ DeadlineBound() }); ctx.Done() != nil && !bound {
		// A context that ends only at its deadline (store.DeadlineBound)
		// is served by the I/O deadline alone.
		if c.interrupt == nil {
			c.interrupt = func() {
				c.fired.Store(true)
				_ = c.nc.SetDeadline(time.Unix(1, 0))
			}
		}
		if a, ok := ctx.(afterFuncer); ok {
			// The context's own AfterFunc (kura's store-time budget has
			// one): no context of context.AfterFunc's per call.
			c.stop = a.AfterFunc(c.interrupt)
		} else {
			c.stop = context.AfterFunc(ctx, c.interrupt)
		}
	}
}

// afterFuncer is a context that runs a function once it is done, as
// context.AfterFunc does; the context package itself uses the method
// when a context has one.
type afterFuncer interface {
	AfterFunc(func()) (stop func() bool)
}

// End releases what Begin set up.
func (c *Conn) End() {
	started := false
	if c.stop != nil {
		started = !c.stop()
		c.stop = nil
	}
	if started || c.fired.Load() {
		// The deadline was forced into the past: the stream may hold half
		// an exchange.
		c.fail(c.ctxError("use", context.Cause(c.ctx)))
	}
	c.ctx = nil
}

func (c *Conn) ioDeadline(timeout time.Duration) time.Time {
	var t time.Time
	if timeout > 0 {
		t = time.Now().Add(timeout)
	}
	if !c.deadline.IsZero() && (t.IsZero() || c.deadline.Before(t)) {
		t = c.deadline
	}
	return t
}

// connIO sets per-call deadlines so the client's timeouts are idle
// timeouts: a long batch that keeps moving bytes does not time out, a
// stalled server does within ReadTimeout, and the ctx deadline caps all.
type connIO struct{ c *Conn }

func (x connIO) Read(p []byte) (int, error) {
	c := x.c
	if c.fired.Load() {
		return 0, c.ctxError("read", context.Cause(c.ctx))
	}
	_ = c.nc.SetReadDeadline(c.ioDeadline(c.client.opts.ReadTimeout))
	n, err := c.nc.Read(p)
	if err != nil {
		err = c.wrapIO("read", err, c.client.opts.ReadTimeout)
	}
	return n, err
}

func (x connIO) Write(p []byte) (int, error) {
	c := x.c
	if c.fired.Load() {
		return 0, c.ctxError("write", context.Cause(c.ctx))
	}
	_ = c.nc.SetWriteDeadline(c.ioDeadline(c.client.opts.WriteTimeout))
	n, err := c.nc.Write(p)
	if err != nil {
		err = c.wrapIO("write", err, c.client.opts.WriteTimeout)
	}
	return n, err
}

func (c *Conn) ctxError(op string, cause error) error {
	return fmt.Errorf("memcache %s: %s: %w", c.client.addr, op, cause)
}

func (c *Conn) wrapIO(op string, err error, timeout time.Duration) error {
	if c.ctx != nil && c.ctx.Err() != nil {
		return fmt.Errorf("memcache %s: %s: %w (%v)", c.client.addr, op, context.Cause(c.ctx), err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		// The context's own deadline, possibly a moment before its timer
		// marks the context done.
		return fmt.Errorf("memcache %s: %s: %w (%v)", c.client.addr, op, context.DeadlineExceeded, err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("memcache %s: %s: no progress within %v (server stalled or overloaded): %w",
			c.client.addr, op, timeout, err)
	}
	return fmt.Errorf("memcache %s: %s: %w", c.client.addr, op, err)
}

// fail marks the connection broken with err and returns err.
func (c *Conn) fail(err error) error {
	c.bmu.Lock()
	if c.broken == nil {
		c.broken = err
	}
	c.bmu.Unlock()
	c.client.answered.Store(false)
	return err
}

// WriteRequest buffers r. Nothing is sent until Flush, or until the
// buffer fills. A request that cannot be encoded (empty key) returns an
// error and leaves the stream untouched.
func (c *Conn) WriteRequest(r *Request) error {
	if err := c.Broken(); err != nil {
		return err
	}
	var err error
	c.scr, err = appendLine(c.scr[:0], r)
	if err != nil {
		return err
	}
	if _, err := c.bw.Write(c.scr); err != nil {
		return c.fail(err)
	}
	if r.Cmd == Set {
		// A large value goes from the caller's slice straight to the
		// socket (bufio writes it through when it exceeds the buffer).
		if _, err := c.bw.Write(r.Value); err != nil {
			return c.fail(err)
		}
		if _, err := c.bw.WriteString("\r\n"); err != nil {
			return c.fail(err)
		}
	}
	return nil
}

// Flush sends the buffered requests.
func (c *Conn) Flush() error {
	if err := c.Broken(); err != nil {
		return err
	}
	if err := c.bw.Flush(); err != nil {
		return c.fail(err)
	}
	return nil
}

// ReadResponse reads the next response into r. Any error breaks the
// connection.
func (c *Conn) ReadResponse(r *Response) error {
	if err := c.Broken(); err != nil {
		return err
	}
	if err := ReadResponse(c.br, r, c.client.maxValue()); err != nil {
		if errors.Is(err, ErrProtocol) {
			err = fmt.Errorf("memcache %s: %w", c.client.addr, err)
		}
		return c.fail(err)
	}
	return nil
}

// Close closes the network connection.
func (c *Conn) Close() error {
	c.fail(errClosedConn)
	return c.nc.Close()
}

var errClosedConn = errors.New("meta: connection closed")
