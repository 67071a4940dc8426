package faults

import (
	"errors"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed reports a use of a Proxy after Close.
var ErrClosed = errors.New("kura: faults: proxy closed")

// ProxyOptions configures a Proxy. The zero value forwards at loopback
// speed and counts bytes, connections and round trips.
type ProxyOptions struct {
	// Delay holds every chunk for this long in each direction, so one
	// request/reply round trip costs 2*Delay more than on loopback, as on
	// a network. 0 means no delay. SetDelay changes it later.
	Delay time.Duration
	// Bandwidth limits each direction to this many bytes per second,
	// shared by every connection through the proxy (one node's network
	// link). 0 means unlimited. SetBandwidth changes it later.
	Bandwidth int64
	// Protocol, when set, makes the proxy parse the client→server stream
	// and count requests by command name (ProxyStats.Requests and
	// Commands). The zero value, Raw, counts no requests.
	Protocol Protocol
	// DialTimeout bounds the dial to the target for each accepted
	// connection; 0 means 5s. A failed dial closes the client's connection
	// and counts in ProxyStats.DialErrors.
	DialTimeout time.Duration
}

// ProxyStats is a snapshot of what passed through a Proxy since it
// started. Take one before and one after the code under test and compare
// them with Sub.
type ProxyStats struct {
	// Conns is the number of client connections accepted.
	Conns int64
	// Active is the number of connections open now.
	Active int64
	// DialErrors counts accepted connections whose dial to the target
	// failed (the client saw its connection closed).
	DialErrors int64
	// BytesUp and BytesDown count bytes received from clients
	// (client→server) and from the server (server→client).
	BytesUp, BytesDown int64
	// RoundTrips counts turnarounds, summed over connections: on each
	// connection, every client→server burst that starts the connection's
	// traffic or follows bytes from the server counts once. Ten pipelined
	// requests written before the first reply arrives are one round trip;
	// ten requests each waiting for its reply are ten. Bytes are observed
	// as the proxy receives them, before any delay. A server push (a RESP3
	// invalidation) followed by a client command counts as a turnaround too,
	// and so do connection handshakes (HELLO, AUTH): compare snapshots
	// taken around the code under test.
	RoundTrips int64
	// Requests counts the requests recognised by the Protocol option
	// (0 with Raw), as the proxy receives them from clients.
	Requests int64
	// Commands counts Requests by lower-case command name ("get", "mg").
	Commands map[string]int64
	// Unparsed counts connections whose client stream the Protocol parser
	// could not follow (their later requests are not counted).
	Unparsed int64
	// Resets counts connections the proxy reset (ResetNextReply,
	// ResetConns).
	Resets int64
}

// Sub returns s minus an earlier snapshot old (Active is s's own).
func (s ProxyStats) Sub(old ProxyStats) ProxyStats {
	d := ProxyStats{
		Conns: s.Conns - old.Conns, Active: s.Active, DialErrors: s.DialErrors - old.DialErrors,
		BytesUp: s.BytesUp - old.BytesUp, BytesDown: s.BytesDown - old.BytesDown,
		RoundTrips: s.RoundTrips - old.RoundTrips, Requests: s.Requests - old.Requests,
		Unparsed: s.Unparsed - old.Unparsed, Resets: s.Resets - old.Resets,
		Commands: map[string]int64{},
	}
	for k, v := range s.Commands {
		if v -= old.Commands[k]; v != 0 {
			d.Commands[k] = v
		}
	}
	return d
}

// Proxy is a TCP proxy on a free loopback port in front of one server
// (the target): tests point a client at Addr instead of the server and
// inject faults between them. Each accepted connection gets its own
// connection to the target, dialled at accept time.
//
// All methods are safe for concurrent use, also while traffic flows.
type Proxy struct {
	target string
	opts   ProxyOptions
	addr   string

	delay     atomic.Int64 // time.Duration
	bandwidth atomic.Int64
	resetNext atomic.Int64 // bytes into the next reply; -1: not armed
	up, down  limiter

	conns, dialErrors, bytesUp, bytesDown atomic.Int64
	roundTrips, requests, unparsed        atomic.Int64
	resets                                atomic.Int64

	mu         sync.Mutex // guards everything below
	ln         net.Listener
	lnDone     chan struct{} // closed when ln's accept loop has returned
	open       map[*pconn]struct{}
	stall      chan struct{} // closed while traffic flows
	commands   map[string]int64
	closed     bool
	resetCalls uint64 // ResetConns calls so far: a connection accepted before one is reset when it registers
	wg         sync.WaitGroup
}

// NewProxy starts a proxy on a free port of 127.0.0.1 forwarding to
// target (host:port). Close it when done (servertest.Proxy does).
func NewProxy(target string, opts ProxyOptions) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	flowing := make(chan struct{})
	close(flowing)
	p := &Proxy{
		target: target, opts: opts, addr: ln.Addr().String(), ln: ln,
		open: map[*pconn]struct{}{}, stall: flowing, commands: map[string]int64{},
	}
	p.delay.Store(int64(opts.Delay))
	p.bandwidth.Store(opts.Bandwidth)
	p.resetNext.Store(-1)
	p.lnDone = make(chan struct{})
	p.wg.Add(1)
	go p.accept(ln, p.lnDone)
	return p, nil
}

// Addr returns the proxy's host:port, to give to clients. It stays the
// same across Refuse and Admit.
func (p *Proxy) Addr() string { return p.addr }

// Target returns the server's address.
func (p *Proxy) Target() string { return p.target }

// SetDelay changes the delay per direction for chunks received from now
// on (see ProxyOptions.Delay).
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(max(d, 0))) }

// SetBandwidth changes the limit per direction in bytes per second; 0
// removes it (see ProxyOptions.Bandwidth).
func (p *Proxy) SetBandwidth(bytesPerSec int64) { p.bandwidth.Store(max(bytesPerSec, 0)) }

// Stall holds all traffic, in both directions and on every connection,
// until Unstall: bytes are kept, not dropped, as with a server that stopped
// answering (or a network that stopped delivering). New connections are
// still accepted, as the kernel accepts them for a SIGSTOPped server.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stall:
		p.stall = make(chan struct{})
	default: // already stalled
	}
}

// Unstall lets traffic held by Stall flow again, in order.
func (p *Proxy) Unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stall:
	default:
		close(p.stall)
	}
}

// gate returns a channel that is closed while traffic may flow.
func (p *Proxy) gate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stall
}

// Refuse stops listening: new connections to Addr fail at once with
// "connection refused", as for a server that is down; open connections
// keep working. Admit listens again.
//
// Refuse returns once its accept loop has handed off every connection it
// accepted, so a ResetConns after Refuse resets every connection a client
// opened before Refuse: one that Accept returned just before the listener
// closed is registered by then (before, it could read the ResetConns count
// after the reset and outlive it, keeping a health probe's connection
// alive through a "node down" in CI).
func (p *Proxy) Refuse() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if p.ln == nil {
		p.mu.Unlock()
		return nil
	}
	err := p.ln.Close()
	p.ln = nil
	done := p.lnDone
	p.mu.Unlock()
	<-done
	return err
}

// Admit listens on Addr again after Refuse. It fails only if another
// process took the port in between.
func (p *Proxy) Admit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.ln = ln
	p.lnDone = make(chan struct{})
	p.wg.Add(1)
	go p.accept(ln, p.lnDone)
	return nil
}

// ResetNextReply arms a one-shot fault: the next server→client reply to
// start on any connection (the first bytes from the server after the
// client sent something) is cut after afterBytes bytes, and that connection
// is reset: the client receives at most afterBytes bytes of the reply
// (exactly that many on loopback unless its receive buffer is full), then
// ECONNRESET; the server's side is closed too. A reply shorter than
// afterBytes passes whole and the cut falls in the replies that follow on
// the same connection. afterBytes 0 resets the connection instead of
// delivering the reply. A new call replaces an armed one that has not fired.
func (p *Proxy) ResetNextReply(afterBytes int) { p.resetNext.Store(int64(max(afterBytes, 0))) }

// ResetConns resets every open connection at once (RST to the client,
// close to the server), as a crashed middlebox or a node reboot would, and
// returns how many it reset. The proxy keeps accepting.
func (p *Proxy) ResetConns() int {
	p.mu.Lock()
	p.resetCalls++
	cs := make([]*pconn, 0, len(p.open))
	for c := range p.open {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.abort()
	}
	return len(cs)
}

// Stats returns what passed through the proxy so far.
func (p *Proxy) Stats() ProxyStats {
	p.mu.Lock()
	cmds := make(map[string]int64, len(p.commands))
	for k, v := range p.commands {
		cmds[k] = v
	}
	active := int64(len(p.open))
	p.mu.Unlock()
	return ProxyStats{
		Conns: p.conns.Load(), Active: active, DialErrors: p.dialErrors.Load(),
		BytesUp: p.bytesUp.Load(), BytesDown: p.bytesDown.Load(),
		RoundTrips: p.roundTrips.Load(), Requests: p.requests.Load(), Commands: cmds,
		Unparsed: p.unparsed.Load(), Resets: p.resets.Load(),
	}
}

// Close stops listening, closes every connection (clients that never
// close theirs, like gomemcache's, included) and waits for the proxy's
// goroutines to end. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var err error
	if p.ln != nil {
		err = p.ln.Close()
		p.ln = nil
	}
	cs := make([]*pconn, 0, len(p.open))
	for c := range p.open {
		cs = append(cs, c)
	}
	if p.stall != nil {
		select {
		case <-p.stall:
		default:
			close(p.stall)
		}
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept(ln net.Listener, done chan struct{}) {
	defer p.wg.Done()
	defer close(done)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns.Add(1)
		p.wg.Add(1)
		gen := p.resetCalls
		p.mu.Unlock()
		go p.serve(c.(*net.TCPConn), gen)
	}
}

// serve dials the target for one client and starts the four pumps. gen
// is the ResetConns count when the client was accepted: a reset that came
// while the target was being dialled resets this connection too, or it
// would outlive a "reset every open connection" it predates.
func (p *Proxy) serve(client *net.TCPConn, gen uint64) {
	defer p.wg.Done()
	s, err := net.DialTimeout("tcp", p.target, p.opts.DialTimeout)
	if err != nil {
		p.dialErrors.Add(1)
		client.Close()
		return
	}
	c := &pconn{p: p, client: client, server: s.(*net.TCPConn), dead: make(chan struct{}), resetLeft: -1}
	if p.opts.Protocol != Raw {
		c.parser = &reqParser{proto: p.opts.Protocol}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		return
	}
	if p.resetCalls != gen {
		p.mu.Unlock()
		c.abort()
		return
	}
	p.open[c] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.pump(true) }()
	go func() { defer wg.Done(); c.pump(false) }()
	wg.Wait()
	c.close()
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
}

// count records one request parsed from a client stream.
func (p *Proxy) count(name string) {
	p.requests.Add(1)
	p.mu.Lock()
	p.commands[name]++
	p.mu.Unlock()
}

// Turn values: which side sent the connection's last bytes.
const (
	turnNone int32 = iota
	turnClient
	turnServer
)

// pconn is one proxied connection.
type pconn struct {
	p      *Proxy
	client *net.TCPConn
	server *net.TCPConn
	parser *reqParser // nil with Raw; used by the up reader only

	turn      atomic.Int32
	resetLeft int // bytes of reply left before the reset; -1 none (down reader only)
	once      sync.Once
	dead      chan struct{}
}

// chunk is a piece of the stream waiting for its due time.
type chunk struct {
	due   time.Time
	b     []byte
	reset bool // reset the connection after writing b
}

// pump forwards one direction: a reader goroutine stamps each chunk with
// its due time, this goroutine writes it when due, when the proxy is not
// stalled and when the bandwidth limit allows.
func (c *pconn) pump(up bool) {
	src, dst := c.server, c.client
	lim := &c.p.down
	if up {
		src, dst, lim = c.client, c.server, &c.p.up
	}
	q := make(chan chunk, 1024)
	go c.read(up, src, q)
	defer func() {
		c.close()
		for range q { // let the reader finish
		}
	}()
	for ch := range q {
		sleepUntil(ch.due)
		select {
		case <-c.p.gate():
		case <-c.dead:
			return
		}
		if bw := c.p.bandwidth.Load(); bw > 0 {
			lim.wait(len(ch.b), bw, c.dead)
		}
		if len(ch.b) > 0 {
			if _, err := dst.Write(ch.b); err != nil {
				return
			}
		}
		if ch.reset {
			c.p.resets.Add(1)
			c.abort()
			return
		}
	}
}

// read is a pump's reader: it counts what arrives and queues it.
func (c *pconn) read(up bool, src *net.TCPConn, q chan<- chunk) {
	defer close(q)
	buf := make([]byte, 64<<10)
	for {
		size := len(buf)
		if bw := c.p.bandwidth.Load(); bw > 0 { // ~10ms of traffic per chunk
			size = int(min(max(bw/100, 512), int64(len(buf))))
		}
		n, err := src.Read(buf[:size])
		if n > 0 {
			ch := chunk{due: time.Now().Add(time.Duration(c.p.delay.Load())), b: append([]byte(nil), buf[:n]...)}
			if up {
				c.p.bytesUp.Add(int64(n))
				if c.turn.Swap(turnClient) != turnClient {
					c.p.roundTrips.Add(1)
				}
				if c.parser != nil && !c.parser.broken && !c.parser.feed(ch.b, c.p.count) {
					c.p.unparsed.Add(1)
				}
			} else {
				c.p.bytesDown.Add(int64(n))
				newReply := c.turn.Swap(turnServer) != turnServer
				if newReply && c.resetLeft < 0 {
					if left := c.p.resetNext.Load(); left >= 0 && c.p.resetNext.CompareAndSwap(left, -1) {
						c.resetLeft = int(left)
					}
				}
				if c.resetLeft >= 0 {
					if c.resetLeft <= n {
						ch.b, ch.reset = ch.b[:c.resetLeft], true
						select {
						case q <- ch:
						case <-c.dead:
						}
						return
					}
					c.resetLeft -= n
				}
			}
			select {
			case q <- ch:
			case <-c.dead:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close closes both sides; the pumps then end.
func (c *pconn) close() {
	c.once.Do(func() {
		close(c.dead)
		c.client.Close()
		c.server.Close()
	})
}

// abort closes the client's side with an RST (SO_LINGER 0) and the
// server's side normally.
func (c *pconn) abort() {
	_ = c.client.SetLinger(0)
	c.close()
}

// limiter paces one direction's writes at a rate in bytes per second,
// shared by every connection.
type limiter struct {
	mu   sync.Mutex
	next time.Time // when the link is free again
}

// burst is how far ahead of real time the link may run before a writer
// sleeps: small messages pass without a timer's ~1ms granularity, and the
// debt carries over, so the average rate holds.
const burst = 2 * time.Millisecond

// wait blocks until n more bytes fit the rate, or dead is closed.
func (l *limiter) wait(n int, rate int64, dead <-chan struct{}) {
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	l.next = l.next.Add(time.Duration(int64(n) * int64(time.Second) / rate))
	until := l.next.Add(-burst)
	l.mu.Unlock()
	if d := time.Until(until); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-dead:
		}
	}
}

// sleepUntil waits until t. time.Sleep alone rounds sub-millisecond waits
// up to about 1ms (the runtime's timer resolution when idle), which would
// triple a 500µs round trip: it sleeps the coarse part and yield-spins the
// rest.
func sleepUntil(t time.Time) {
	for d := time.Until(t); d > 0; d = time.Until(t) {
		if d > 2*time.Millisecond {
			time.Sleep(d - time.Millisecond)
		} else {
			runtime.Gosched()
		}
	}
}

// BreakWrites breaks connections in turn until the returned stop is
// called, for tests of what a client does with a write cut short: every
// gap (plus up to jitter, drawn from a generator seeded by seed) it
// resets every connection; stalls, waits pause (a writer is then blocked
// mid-value) and resets; or resets the next reply. stop ends the loop,
// unstalls the proxy and returns once the loop has ended.
func (p *Proxy) BreakWrites(gap, jitter, pause time.Duration, seed uint64) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(seed, seed))
		for i := 0; ; i++ {
			select {
			case <-quit:
				p.Unstall()
				return
			case <-time.After(gap + time.Duration(rng.Int64N(int64(max(jitter, 1))))):
			}
			switch i % 3 {
			case 0:
				p.ResetConns()
			case 1:
				p.Stall()
				time.Sleep(pause)
				p.ResetConns()
				p.Unstall()
			case 2:
				p.ResetNextReply(0)
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
