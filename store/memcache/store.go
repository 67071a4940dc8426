package memcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/internal/redial"
	"github.com/kuracache/kura/ring"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache/meta"
)

// Interfaces the Store implements.
var (
	_ store.Store         = (*Store)(nil)
	_ store.Batcher       = (*Store)(nil)
	_ store.MaxValueSizer = (*Store)(nil)
	_ store.Pinger        = (*Store)(nil)
	_ store.ConnReporter  = (*Store)(nil)
)

// ItemOverhead is what memcached needs in an item besides the value: its
// header (about 60 bytes with CAS) and the key (up to 250). A value larger
// than item_size_max - ItemOverhead is refused before it is sent.
const ItemOverhead = 512

// Options configure a Store. Only Servers is required; every other field's
// zero value is a documented default.
type Options struct {
	// Servers are the memcached addresses, "host:port". The address
	// string is the server's identity on the hash ring (see Ring).
	Servers []string
	// Weights gives each server a share of the keys proportional to its
	// weight, aligned with Servers. If nil, every server weighs 1.
	Weights []int
	// Ring selects the ring that places keys, to agree with the other
	// clients on the same servers (docs/rings.md): "" (the default) is
	// libketama with "host:port" identities, as kura always placed keys;
	// ring.ModeKetama is libmemcached's weighted ketama (the host alone
	// on port 11211), ring.ModeTwemproxy and ring.ModeTwemproxyFNV are
	// twemproxy's ketama with hash md5 or fnv1a_64, ring.ModeDalli is
	// Ruby's dalli.
	Ring ring.Mode
	// HashTag is twemproxy's hash_tag for the twemproxy rings ("{}");
	// "" hashes whole keys.
	HashTag string
	// DialTimeout bounds connecting to a server. If zero, it defaults to 1s.
	DialTimeout time.Duration
	// ReadTimeout is how long a read may wait for the next bytes (an idle
	// timeout: a long batch that keeps streaming never hits it). The
	// context deadline caps it. If zero, it defaults to 3s.
	ReadTimeout time.Duration
	// WriteTimeout is the same for writes. If zero, it defaults to 3s.
	WriteTimeout time.Duration
	// MaxIdleConns is the number of idle connections kept per server. If
	// zero, it defaults to 8.
	MaxIdleConns int
	// Dial opens connections. If nil, net.Dialer is used. Use it for TLS,
	// or to count or delay bytes in tests. It is given the address as
	// configured (host:port) unless Resolver is set, then the resolved
	// ip:port.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Resolver looks up the servers' host names on every new connection,
	// so a node replaced under the same name at a new address (managed
	// memcached) is followed as soon as its old connections fail. If nil,
	// net.DefaultResolver (and with Dial set, no lookup: Dial gets the
	// name).
	Resolver store.Resolver
	// FailFast makes New wait until every server has answered (within
	// ctx) and fail, naming them, when one has not. The zero value
	// returns at once: servers are connected on first use, and a server
	// that is down only fails the requests for its keys (a Cache sends
	// them to the loader) until it answers.
	FailFast bool
	// StartWait is how long New waits (within ctx) for the servers'
	// first answers, which tell their item size limits, before returning
	// with the servers that have not answered still being tried: a pool
	// that is up is fully known when New returns, a refused or
	// unresolvable server does not delay it, a stalled one delays it by
	// StartWait. If zero, DefaultStartWait (500 ms); negative does not
	// wait.
	StartWait time.Duration
}

// DefaultStartWait is Options.StartWait when left at zero.
const DefaultStartWait = 500 * time.Millisecond

// Store is a kura store.Store over a pool of memcached servers, with keys
// placed by ketama consistent hashing and batches sent as quiet meta
// commands, one pipeline per server, all servers at once.
//
// A server that is down is not replaced by another (that would serve stale
// values once it returns): its keys fail with an error naming it, and the
// Cache above falls back to the loader. Wrap the Store with package
// store/health so a down server's keys fail at once instead of each
// waiting for its timeout (and, optionally, go to a gutter pool).
type Store struct {
	ring    *Ring
	clients []*meta.Client
	closed  atomic.Bool
	dialer  *redial.Dialer
	// bgCancel ends the background reads of the servers' settings.
	bgCancel context.CancelFunc
	// walkOpts are the options of a NodeWalker's own clients: the store's
	// dialer, meta's default timeouts (a dump streams for long).
	walkOpts meta.Options
}

// New returns a Store for opts.Servers. It does not wait for the network:
// each server's item size limit (stats settings) is read in the
// background, and a server that does not answer is tried again on use
// (see Options.FailFast for a start that waits). Configuration errors
// name the Options field.
func New(ctx context.Context, opts Options) (*Store, error) {
	if len(opts.Servers) == 0 {
		return nil, errors.New("memcache: Options.Servers is empty")
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"DialTimeout", opts.DialTimeout}, {"ReadTimeout", opts.ReadTimeout}, {"WriteTimeout", opts.WriteTimeout}} {
		if f.d < 0 {
			return nil, fmt.Errorf("memcache: Options.%s is negative (%v)", f.name, f.d)
		}
	}
	if opts.MaxIdleConns < 0 {
		return nil, fmt.Errorf("memcache: Options.MaxIdleConns is negative (%d)", opts.MaxIdleConns)
	}
	for i, a := range opts.Servers {
		if err := store.CheckAddr(fmt.Sprintf("memcache: Options.Servers[%d]", i), a); err != nil {
			return nil, err
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("memcache: Options.Servers[%d] = %q: want host:port: %v", i, a, err)
		}
	}
	ring, err := newRing(opts.Servers, opts.Weights, opts.Ring, opts.HashTag)
	if err != nil {
		return nil, err
	}
	dialTimeout := opts.DialTimeout
	if dialTimeout == 0 {
		dialTimeout = time.Second
	}
	dial := opts.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	s := &Store{ring: ring, dialer: redial.New(opts.Resolver, dial)}
	s.dialer.NoResolve = opts.Dial != nil && opts.Resolver == nil
	mo := meta.Options{
		DialTimeout:  opts.DialTimeout,
		ReadTimeout:  opts.ReadTimeout,
		WriteTimeout: opts.WriteTimeout,
		MaxIdleConns: opts.MaxIdleConns,
		Dial:         s.dialer.DialContext,
	}
	s.walkOpts = meta.Options{DialTimeout: opts.DialTimeout, Dial: s.dialer.DialContext}
	for _, a := range opts.Servers {
		s.dialer.Track(a)
		s.clients = append(s.clients, meta.NewClient(a, mo))
	}
	if opts.FailFast {
		errs := make([]error, len(s.clients))
		var wg sync.WaitGroup
		for i, cl := range s.clients {
			wg.Go(func() { errs[i] = store.NodeErr(cl.Addr(), cl.Noop(ctx)) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			s.closeClients()
			return nil, fmt.Errorf("memcache: Options.FailFast: %w", err)
		}
		s.bgCancel = func() {}
		return s, nil
	}
	// Read the limits in the background, once per server; a server that
	// is down has its limit read by its first connection instead.
	bg, cancel := context.WithCancel(context.Background())
	s.bgCancel = cancel
	var wg sync.WaitGroup
	for _, cl := range s.clients {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(bg, dialTimeout+time.Second)
			defer cancel()
			_ = cl.Noop(ctx)
		})
	}
	if wait := cmp.Or(opts.StartWait, DefaultStartWait); wait > 0 {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return s, nil
}

func (s *Store) closeClients() {
	for _, cl := range s.clients {
		_ = cl.Close()
	}
}

// ConnStats reports whether every server has answered once (Connected),
// and per server the connections opened, failed attempts, reconnections,
// name lookups and address changes.
func (s *Store) ConnStats() store.ConnStats {
	st := store.ConnStats{Connected: true, Nodes: s.dialer.Stats()}
	for _, cl := range s.clients {
		if cl.ItemSizeMax() == 0 {
			st.Connected = false
		}
	}
	return st
}

// Ring returns the hash ring placing keys on servers.
func (s *Store) Ring() *Ring { return s.ring }

// Client returns the meta-protocol client of the server owning key, for
// commands the Store does not wrap (CAS, leases, arithmetic).
func (s *Store) Client(key string) *meta.Client { return s.clients[s.ring.Index(key)] }

func (s *Store) client(key string) (*meta.Client, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if _, err := meta.ClassifyKey(key); err != nil {
		return nil, err
	}
	return s.clients[s.ring.Index(key)], nil
}

// limit returns the largest value cl's server takes, 0 while unknown.
func limit(cl *meta.Client) int {
	n := cl.ItemSizeMax()
	if n == 0 {
		return 0
	}
	return max(n-ItemOverhead, 0)
}

// MaxValueSize returns the largest value every server accepts:
// item_size_max - ItemOverhead of the smallest server, or 0 while no
// server has answered yet.
func (s *Store) MaxValueSize() int {
	m := 0
	for _, cl := range s.clients {
		if n := limit(cl); n > 0 && (m == 0 || n < m) {
			m = n
		}
	}
	return m
}

func checkValue(cl *meta.Client, key string, n int) error {
	if l := limit(cl); l > 0 && n > l {
		return fmt.Errorf("memcache %s: key %q: value of %d bytes exceeds the %d-byte limit (item_size_max %d - %d for the item header and key): %w",
			cl.Addr(), key, n, l, cl.ItemSizeMax(), ItemOverhead, store.ErrValueTooLarge)
	}
	return nil
}

// Get returns the value of key, or an error matching store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	cl, err := s.client(key)
	if err != nil {
		return nil, err
	}
	v, err := cl.Get(ctx, key)
	return v, store.NodeErr(cl.Addr(), err)
}

// Set stores value under key for ttl (0: no expiry). TTLs are rounded up
// to whole seconds; TTLs over 30 days are sent as absolute times, as
// memcached requires.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := store.CheckTTL(ttl); err != nil {
		return err
	}
	cl, err := s.client(key)
	if err != nil {
		return err
	}
	if err := checkValue(cl, key, len(value)); err != nil {
		return err
	}
	return store.NodeErr(cl.Addr(), cl.Set(ctx, key, value, ttl))
}

// Delete removes key; deleting a missing key succeeds.
func (s *Store) Delete(ctx context.Context, key string) error {
	cl, err := s.client(key)
	if err != nil {
		return err
	}
	return store.NodeErr(cl.Addr(), cl.Delete(ctx, key))
}

// Touch gives key a new ttl without rewriting it, or returns an error
// matching store.ErrNotFound.
func (s *Store) Touch(ctx context.Context, key string, ttl time.Duration) error {
	if err := store.CheckTTL(ttl); err != nil {
		return err
	}
	cl, err := s.client(key)
	if err != nil {
		return err
	}
	return store.NodeErr(cl.Addr(), cl.Touch(ctx, key, ttl))
}

// Ping sends mn to every server at once and returns the failures, each
// naming its server.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	errs := make([]error, len(s.clients))
	var wg sync.WaitGroup
	for i, cl := range s.clients {
		wg.Go(func() { errs[i] = store.NodeErr(cl.Addr(), cl.Noop(ctx)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close closes every connection. Calls afterwards return store.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.bgCancel != nil {
		s.bgCancel()
	}
	s.closeClients()
	return nil
}

// Interfaces for node health (package store/health).
var (
	_ store.NodeLocator = (*Store)(nil)
	_ store.NodeProber  = (*Store)(nil)
)

// NodeOf returns the address of the server that owns key on the ring.
func (s *Store) NodeOf(key string) string { return s.ring.Server(key) }

// Nodes returns every server's address, in configuration order.
func (s *Store) Nodes() []string { return s.ring.Servers() }

// ProbeNode sends mn to the server at addr on the connection its client
// keeps for probes (meta.Client.Probe), never one of the pool.
func (s *Store) ProbeNode(ctx context.Context, addr string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	for _, cl := range s.clients {
		if cl.Addr() == addr {
			if err := cl.Probe(ctx); err != nil {
				return &store.NodeError{Addr: addr, Err: err}
			}
			return nil
		}
	}
	return &store.NodeError{Addr: addr, Err: errors.New("not a server of this pool")}
}
