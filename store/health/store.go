package health

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/store"
)

// Store is a store.Store with a circuit breaker per node in front of
// another store. It is safe for concurrent use.
type Store struct {
	store.Forward // Unwrap, and the pass-through of tracking and leases
	inner         store.Store
	loc           store.NodeLocator
	m             *monitor
	opts          Options
	closed        atomic.Bool

	gutterHits, gutterMisses, gutterErrs atomic.Uint64
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.NodeLocator   = (*Store)(nil)
	_ store.Batcher       = (*Store)(nil)
	_ store.Wrapper       = (*Store)(nil)
	_ store.MaxValueSizer = (*Store)(nil)
	_ store.Pinger        = (*Store)(nil)
)

// New starts watching the nodes of s and returns the breaker in front of
// it. s (or a store it wraps) must say where keys live
// (store.NodeLocator) and probe its nodes (store.NodeProber): redisstore
// and memcache do. Close stops the monitor; it does not close s.
func New(s store.Store, opts Options) (*Store, error) {
	if s == nil {
		return nil, errors.New("health: New needs a store")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	loc, ok := store.Find[store.NodeLocator](s)
	if !ok {
		return nil, fmt.Errorf("health: %T does not say which node serves a key (store.NodeLocator); it has no nodes to watch", s)
	}
	prober, ok := store.Find[store.NodeProber](s)
	if !ok {
		return nil, fmt.Errorf("health: %T cannot probe its nodes (store.NodeProber)", s)
	}
	return &Store{Forward: store.NewForward(s), inner: s, loc: loc, opts: o, m: newMonitor(o, prober, prober.Nodes())}, nil
}

var _ store.ServerLocator = (*Store)(nil)

// ServerOf returns the server a command on key goes to
// (store.ServerLocator), as the wrapped store says, or else the key's
// node (NodeOf): instrumentation outside the breaker names the answering
// server through it.
func (s *Store) ServerOf(key string, read bool) string {
	if l, ok := store.Find[store.ServerLocator](s.inner); ok {
		return l.ServerOf(key, read)
	}
	return s.loc.NodeOf(key)
}

var _ store.ConnReporter = (*Store)(nil)

// ConnStats returns the connection statistics of the wrapped store
// (store.ConnReporter: whether it has reached its servers yet, reconnects,
// name lookups), so an operator sees them through the breaker. A wrapped
// store that does not report them gives the zero value with Connected set.
// Statistics are read only: nothing reaches around the breaker.
func (s *Store) ConnStats() store.ConnStats {
	if cr, ok := store.Find[store.ConnReporter](s.inner); ok {
		return cr.ConnStats()
	}
	return store.ConnStats{Connected: true}
}

// Stats is a snapshot of the nodes' health.
type Stats = store.HealthStats

// Stats returns the state and counters of every node.
func (s *Store) Stats() Stats {
	return Stats{Nodes: s.m.stats(), GutterHits: s.gutterHits.Load(),
		GutterMisses: s.gutterMisses.Load(), GutterErrors: s.gutterErrs.Load()}
}

var _ store.HealthReporter = (*Store)(nil)

// NodeHealth returns the state and counters of every node
// (store.HealthReporter: a Cache's Stats.Nodes).
func (s *Store) NodeHealth() []store.NodeHealth { return s.m.stats() }

// State returns the state of the node at addr, and whether it is watched.
func (s *Store) State(addr string) (State, bool) {
	n := s.m.node(addr)
	if n == nil {
		return Up, false
	}
	return State(n.state.Load()), true
}

// Close stops the monitor and waits for its goroutines. It does not close
// the wrapped store (the application opened it and closes it).
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.m.close()
	return nil
}

// MaxValueSize returns the wrapped store's limit (0 when it has none).
func (s *Store) MaxValueSize() int {
	if m, ok := store.Find[store.MaxValueSizer](s.inner); ok {
		return m.MaxValueSize()
	}
	return 0
}

// Ping pings the wrapped store's nodes through it (not the probes).
func (s *Store) Ping(ctx context.Context) error {
	if p, ok := store.Find[store.Pinger](s.inner); ok {
		return p.Ping(ctx)
	}
	return nil
}

// route returns the node of key, and whether its circuit is open (the
// request must not be sent to it). A request that may be sent is counted
// in flight until release: it is counted before the state is read, so once
// a node is Down and its in-flight count is zero, nothing more reaches it.
func (s *Store) route(key string) (*node, bool) {
	n := s.m.node(s.loc.NodeOf(key))
	if n == nil {
		return nil, false
	}
	n.inflight.Add(1)
	if n.open() {
		n.inflight.Add(-1)
		n.failFast.Add(1)
		return n, true
	}
	return n, false
}

// release ends what route counted in flight.
func release(n *node) {
	if n != nil {
		n.inflight.Add(-1)
	}
}

func downErr(n *node) error { return &store.NodeError{Addr: n.addr, Err: ErrNodeDown} }

// observe feeds the outcome of a request on n to the monitor.
func (s *Store) observe(n *node, err error) {
	if n == nil {
		return
	}
	if err == nil || !s.opts.IsFailure(err) {
		n.success(false)
		return
	}
	if ne := store.AsNodeError(err); ne != nil && ne.Addr != n.addr {
		if other := s.m.node(ne.Addr); other != nil {
			n = other // the backend knows better (a Cluster redirect)
		}
	}
	n.failure(err, false)
}

func (s *Store) gutterTTL(ttl time.Duration) time.Duration {
	if ttl <= 0 || ttl > s.opts.GutterTTL {
		return s.opts.GutterTTL
	}
	return ttl
}

// Get reads key from its node, or fails at once with an error matching
// ErrNodeDown when the node is Down (from the gutter, if there is one).
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	n, open := s.route(key)
	if open {
		if s.opts.Gutter != nil {
			b, err := s.opts.Gutter.Get(ctx, key)
			s.countGutter(err)
			return b, err
		}
		return nil, downErr(n)
	}
	b, err := s.inner.Get(ctx, key)
	release(n)
	s.observe(n, err)
	return b, err
}

func (s *Store) countGutter(err error) {
	switch {
	case err == nil:
		s.gutterHits.Add(1)
	case errors.Is(err, store.ErrNotFound):
		s.gutterMisses.Add(1)
	default:
		s.gutterErrs.Add(1)
	}
}

// Set writes key to its node (to the gutter with a short TTL, or nowhere,
// when the node is Down).
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	n, open := s.route(key)
	if open {
		if s.opts.Gutter != nil {
			return s.opts.Gutter.Set(ctx, key, value, s.gutterTTL(ttl))
		}
		return downErr(n)
	}
	err := s.inner.Set(ctx, key, value, ttl)
	release(n)
	s.observe(n, err)
	return err
}

// Delete removes key from its node. While the node is Down the delete
// cannot reach it: the error matches ErrNodeDown (with a gutter, the
// gutter's copy is deleted and the error still reports the node).
func (s *Store) Delete(ctx context.Context, key string) error {
	n, open := s.route(key)
	if open {
		if s.opts.Gutter != nil {
			if err := s.opts.Gutter.Delete(ctx, key); err != nil {
				return err
			}
		}
		return downErr(n)
	}
	err := s.inner.Delete(ctx, key)
	release(n)
	s.observe(n, err)
	return err
}

// NodeOf names the node that serves key, as the wrapped store does: the
// breaker routes by it, and callers may ask it of the breaker itself
// (store.Find does not reach around a wrapper).
func (s *Store) NodeOf(key string) string { return s.loc.NodeOf(key) }

var _ store.KeyWalker = (*Store)(nil)

// WalkNodes lets the wrapped store's key listing through (store.KeyWalker):
// the walkers use the store's own connections or dial their own, and send
// nothing the breaker guards (an application's reads and writes). A
// wrapped store that cannot list its keys gives store.ErrCannotWalk.
func (s *Store) WalkNodes(ctx context.Context) (string, []store.NodeWalker, error) {
	if kw, ok := store.Find[store.KeyWalker](s.inner); ok {
		return kw.WalkNodes(ctx)
	}
	return "", nil, fmt.Errorf("health: %T: %w", s.inner, store.ErrCannotWalk)
}
