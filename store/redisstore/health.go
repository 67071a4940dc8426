package redisstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"

	hashslot "github.com/kuracache/kura/internal/slot"
	"github.com/kuracache/kura/store"
)

var (
	_ store.NodeLocator = (*Store)(nil)
	_ store.NodeProber  = (*Store)(nil)
)

// NodeOf returns the address of the server that serves key: the server
// of a standalone store, the slot's master on a cluster ("" until the slot
// map has been read).
func (s *Store) NodeOf(key string) string {
	cn := s.cur.Load()
	if cn == nil || !cn.cluster {
		return s.standaloneAddr(cn)
	}
	m := s.slots.Load()
	if m == nil {
		s.refreshSlotsAsync()
		return ""
	}
	return m.addr[hashslot.Of(key)]
}

// Nodes returns the server of a standalone store, or the masters that own
// slots on a cluster (the slot map is read again in the background when it
// is more than a second old). Before the store has connected it returns
// the first seed, where requests' failures are counted until the first
// answer tells the mode.
func (s *Store) Nodes() []string {
	cn := s.cur.Load()
	if cn == nil || !cn.cluster {
		if a := s.standaloneAddr(cn); a != "" {
			return []string{a}
		}
		return nil
	}
	m := s.slots.Load()
	if m == nil || time.Since(m.at) > time.Second {
		s.refreshSlotsAsync()
	}
	if m == nil {
		return nil
	}
	var out []string
	for _, a := range m.addr {
		if a != "" && (len(out) == 0 || out[len(out)-1] != a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// ProbeNode sends PING to the server at addr on a client of its own (one
// connection, no retries, its own pipeline), never on the connections that
// carry Get and Set, so the answer does not wait behind queued application
// commands. The client is opened on the first probe with the Store's
// options (credentials, TLS, dialer). A Store from NewFromClient has no
// options to copy; it probes through the application's client.
//
// On a Store that has not connected yet, a probe starts a connection
// attempt and waits for it (within ctx): the node is not up for the Store
// until the Store's own client has connected, so a probe that succeeded
// on its own connection would let requests through only to fail.
func (s *Store) ProbeNode(ctx context.Context, addr string) error {
	if s.cur.Load() == nil && !s.closed.Load() {
		s.kickConnect()
		select {
		case <-s.up:
		case <-ctx.Done():
		}
	}
	cn, err := s.ready(ctx)
	if err != nil {
		return &store.NodeError{Addr: addr, Err: err}
	}
	if s.masterSet != "" {
		// The node is the master set: ask whichever server is primary
		// now, through the client that follows the sentinels.
		if err := cn.c.Do(ctx, cn.c.B().Ping().Build()).Error(); err != nil {
			return &store.NodeError{Addr: addr, Err: err}
		}
		return nil
	}
	c, err := s.probes.get(ctx, addr)
	if err != nil {
		return &store.NodeError{Addr: addr, Err: err}
	}
	if c == nil { // NewFromClient
		n, ok := cn.c.Nodes()[addr]
		if !ok {
			return &store.NodeError{Addr: addr, Err: rueidis.ErrNoAddr}
		}
		c = n
	}
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		return &store.NodeError{Addr: addr, Err: err}
	}
	return nil
}

// probeSet holds one dedicated client per node for ProbeNode.
type probeSet struct {
	opt *rueidis.ClientOption // nil: NewFromClient, no dedicated clients

	mu      sync.Mutex
	closed  bool
	clients map[string]rueidis.Client
	dialing map[string]chan struct{}
	errs    map[string]error // why the last open failed
	wg      sync.WaitGroup
}

// probeOpenTimeout bounds the dial and handshake of a probe client.
const probeOpenTimeout = 2 * time.Second

// get returns addr's probe client, opening it if needed. Opening dials and
// says HELLO without a context, so it runs apart: a probe whose ctx ends
// first fails, and the client is kept for the next probe once it is open.
func (p *probeSet) get(ctx context.Context, addr string) (rueidis.Client, error) {
	if p.opt == nil {
		return nil, nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, store.ErrClosed
	}
	if c := p.clients[addr]; c != nil {
		p.mu.Unlock()
		return c, nil
	}
	ch, busy := p.dialing[addr]
	if !busy {
		ch = make(chan struct{})
		if p.dialing == nil {
			p.dialing = map[string]chan struct{}{}
		}
		p.dialing[addr] = ch
		co := *p.opt
		co.InitAddress = []string{addr}
		co.ForceSingleClient = true
		co.DisableRetry = true
		co.RetryDelay = nil
		co.DisableCache = true
		co.MaxFlushDelay = 0
		co.PipelineMultiplex = -1 // one connection
		// Opening has no context: bound it, so Close never waits long
		// for a dial to a stalled node.
		if co.Dialer.Timeout == 0 || co.Dialer.Timeout > probeOpenTimeout {
			co.Dialer.Timeout = probeOpenTimeout
		}
		if co.ConnWriteTimeout == 0 || co.ConnWriteTimeout > probeOpenTimeout {
			co.ConnWriteTimeout = probeOpenTimeout
		}
		p.wg.Add(1)
		go p.open(addr, co, ch)
	}
	p.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.clients[addr]; c != nil {
		return c, nil
	}
	if err := p.errs[addr]; err != nil {
		return nil, err
	}
	return nil, errProbeDial
}

var errProbeDial = errors.New("redis: probe connection could not be opened")

func (p *probeSet) open(addr string, co rueidis.ClientOption, ch chan struct{}) {
	defer p.wg.Done()
	c, err := rueidis.NewClient(co)
	p.mu.Lock()
	delete(p.dialing, addr)
	if p.errs == nil {
		p.errs = map[string]error{}
	}
	p.errs[addr] = err
	if err == nil {
		if p.closed {
			c.Close()
		} else {
			if p.clients == nil {
				p.clients = map[string]rueidis.Client{}
			}
			p.clients[addr] = c
		}
	}
	p.mu.Unlock()
	close(ch)
}

func (p *probeSet) close() {
	p.mu.Lock()
	p.closed = true
	clients := p.clients
	p.clients = nil
	p.mu.Unlock()
	p.wg.Wait()
	for _, c := range clients {
		c.Close()
	}
}
