package redisstore

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/redial"
	"github.com/kuracache/kura/store"
)

// DefaultMaxValueSize is Redis's default proto-max-bulk-len, used when the
// server does not say (CONFIG is often disabled on managed services).
const DefaultMaxValueSize = 512 << 20

// ErrAuth reports that the server refused the credentials, or that it
// requires some and none were given. Check the user and password in the URL
// or in Options.Username and Options.Password; in Sentinel mode, an error
// that also matches ErrSentinelAuth came from a sentinel, whose
// credentials are Options.Sentinel's (sentinel_password= in a URL).
var ErrAuth = errors.New("kura: redis authentication failed")

// DefaultStartWait is Options.StartWait when left at zero.
const DefaultStartWait = 500 * time.Millisecond

// DefaultMaxFlushDelay is Options.MaxFlushDelay when left at zero.
const DefaultMaxFlushDelay = 20 * time.Microsecond

// Options configure a Store. The zero value connects to 127.0.0.1:6379
// without a password.
type Options struct {
	// Addrs are seed addresses ("host:port"). One address may be a
	// standalone server or any node of a cluster; several must be nodes of
	// one cluster. If empty, it defaults to 127.0.0.1:6379. NewFromURL
	// takes them from the URL instead.
	Addrs []string
	// Username is the ACL user; empty means "default".
	Username string
	// Password is sent with AUTH (or HELLO) when not empty.
	Password string
	// DB is the database number SELECTed on a standalone server. A cluster
	// has only database 0.
	DB int
	// TLS, when set, connects with TLS using this configuration. With
	// NewFromURL it requires a rediss:// URL and replaces the URL's default
	// configuration (to set RootCAs, for example).
	TLS *tls.Config
	// DialTimeout bounds connecting to one server. If zero, it defaults to
	// 5 seconds.
	DialTimeout time.Duration
	// MaxRetries bounds how many times a read is retried after a network
	// error or a CLUSTERDOWN/TRYAGAIN reply before the error is returned,
	// so a dead server fails calls promptly even under a context without a
	// deadline. If zero, it defaults to 2; a negative value turns retries
	// off.
	MaxRetries int
	// MaxFlushDelay lets each connection's writer wait up to this long
	// after a flush so that concurrent commands leave in one write. Under
	// load this cuts system calls on both sides: Fetch of warm 1 KB values
	// from 64 goroutines ran 1.8x faster with it on a 2-core machine
	// (BenchmarkReadThrough, BENCHMARKS.md). A lone request is not delayed; a request that comes
	// right behind another waits at most this long. If zero, it defaults to
	// DefaultMaxFlushDelay (20µs); negative turns the delay off.
	MaxFlushDelay time.Duration
	// Configure, when set, is called with the rueidis options just before
	// the client is created, for what Options does not cover (buffer and
	// pool sizes, a custom dialer). Turning client-side caching back on
	// there is not supported.
	//
	// The Store's client pipelines its commands to each server over one
	// connection (PipelineMultiplex -1; rueidis too uses one per node on a
	// cluster, but on a standalone server or Sentinel it opens 2 with 2
	// CPUs and 4 from 4). Concurrent commands then leave in fewer, larger
	// writes:
	// warm Fetch of 1 KB values from 64 goroutines on 2 cores ran about
	// 1.3x as fast, with a quarter to a third less redis-server CPU per
	// hit (BENCHMARKS.md, "One read path"). An application whose values are
	// large enough to hold up the commands queued behind them can set
	// PipelineMultiplex back to 0 (rueidis's default) or higher here.
	Configure func(*rueidis.ClientOption)
	// Tracking turns on server-assisted invalidation for kura's L1 tier
	// (see Tracking). The zero value is off.
	Tracking Tracking
	// FailFast makes New and NewFromURL connect before they return and
	// fail when no seed answers within ctx and DialTimeout (or the
	// credentials are refused). The zero value starts even when the
	// servers are down: the Store connects in the background (see
	// "Starting with the servers down" in the package documentation),
	// so a process that starts while Redis is down or restarting still
	// gets a Store, whose requests fail (and a Cache's go to the loader)
	// until a seed answers.
	FailFast bool
	// StartWait is how long New and NewFromURL wait (within ctx) for the
	// first connection attempt before returning a Store that goes on
	// connecting in the background: a server that is up is connected
	// when New returns, a refused port or a name that does not resolve
	// returns at once, and only a server that accepts but does not
	// answer (or a dial that hangs) makes New wait this long. A server
	// that answers within it and refuses the credentials fails New with
	// ErrAuth (a configuration to fix, not an outage); later, such a
	// refusal is reported by the requests. If zero, DefaultStartWait
	// (500 ms); negative does not wait at all.
	StartWait time.Duration
	// Sentinel, when its MasterSet is set, makes Addrs the sentinels'
	// addresses and the Store follows the primary they name (see
	// Sentinel). The zero value is off.
	Sentinel Sentinel
	// InvalidateWait makes Invalidate wait until replicas have the
	// deletion (see InvalidateWait). The zero value waits for one replica
	// in Sentinel mode and on a Cluster whose masters have replicas, and
	// does not wait on a standalone server.
	InvalidateWait InvalidateWait
	// ReadFromReplicas sends reads to a replica in Sentinel mode or on a
	// Redis Cluster (see ReplicaReads for the staleness it costs). The
	// zero value reads from the primary.
	ReadFromReplicas ReplicaReads
	// Resolver looks up the seeds' host names on every new connection, so
	// a name that moves to another address (a managed service's failover
	// or node replacement) is followed on the next reconnect. If nil,
	// net.DefaultResolver. A custom dialer set through Configure
	// (DialCtxFn) replaces this resolution.
	Resolver store.Resolver
}

// Store is a store.Store on Redis or Redis Cluster. It is safe for
// concurrent use.
type Store struct {
	// cur is the connected client, nil until a seed has answered (see
	// connect.go). It never changes once set.
	cur      atomic.Pointer[conn]
	owned    bool     // Close closes the client
	seeds    []string // as configured, for NodeOf and messages before cur is set
	maxValue atomic.Int64
	closed   atomic.Bool

	// The background connection of a Store started with its servers
	// down (connect.go); first is closed when the first attempt ends.
	co           rueidis.ClientOption
	dialer       *redial.Dialer // nil for NewFromClient
	first        chan struct{}
	up           chan struct{} // closed once connected
	kick         chan struct{} // a request found the Store not connected
	created      time.Time
	lastErr      atomic.Pointer[error]
	attempts     atomic.Uint64
	attemptFails atomic.Uint64

	// slots maps hash slots to node addresses on a cluster, for error
	// messages only: rueidis does the routing.
	slots      atomic.Pointer[slotMap]
	refreshing atomic.Bool

	// hub relays the server's invalidations when Options.Tracking is on
	// (nil otherwise); prefixes are its broadcast prefixes.
	hub      *hub
	prefixes []string
	// probes are the dedicated per-node clients of ProbeNode (health.go).
	probes probeSet
	// wake is the lease path's push client (wake.go).
	wake waker

	// masterSet is the Sentinel master set ("" unless Sentinel mode):
	// the node's stable name, whichever server is primary.
	masterSet string
	// waitReplicas > 0 makes Invalidate wait for that many replicas
	// (wait.go), for up to waitTimeout; with waitAuto only on a Cluster,
	// for the masters that have replicas. notReplicated counts the
	// invalidations that timed out.
	waitReplicas  int
	waitAuto      bool
	combiner      *waitCombiner // nil: every Invalidate waits alone
	waitTimeout   time.Duration
	notReplicated atomic.Uint64
	// primary is the server a Sentinel-mode Store follows now, failovers
	// the times it changed (sentinel.go).
	primary   atomic.Pointer[string]
	failovers atomic.Uint64
	// recent is the keys this Store wrote lately, whose reads go to the
	// primary (nil unless ReadFromReplicas); replicaReads counts the
	// commands sent to a replica.
	recent       *recentKeys
	replicaReads atomic.Uint64
	// replica is the replica a Sentinel-mode Store sends reads to (as of
	// its last look, with the primary); replicaSlots the replica rueidis
	// chose for each slot of a Cluster (roundtrip.go). Both are only set
	// with ReadFromReplicas, for instrumentation (ServerOf).
	replica      atomic.Pointer[string]
	replicaSlots *slotReplicas
	// splits counts the batches that met TRYAGAIN on a slot being
	// migrated and were sent again one key per command (batch.go).
	splits atomic.Uint64

	// orphans are leases whose Fill or Release got no answer, released
	// in the background while releasing (orphans.go; under mu).
	orphans         []orphan
	releasing       bool
	orphansReleased atomic.Uint64

	// Background slot-map refreshes: Close cancels and waits for them.
	mu       sync.Mutex
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.Batcher       = (*Store)(nil)
	_ store.Pinger        = (*Store)(nil)
	_ store.MaxValueSizer = (*Store)(nil)
	_ store.ConnReporter  = (*Store)(nil)
)

// conn is a connected rueidis client and what its first answer told:
// whether the seeds are a Cluster, and the server of a standalone store.
type conn struct {
	c       rueidis.Client
	cluster bool
	addr    string
	// guard is a Cluster client's stall guard, told the slot map by
	// refreshSlots.
	guard *clusterGuard
}

func newConn(c rueidis.Client, replica func(rueidis.Completed) bool) *conn {
	cn := &conn{c: c, cluster: c.Mode() == rueidis.ClientModeCluster}
	if cn.cluster {
		cn.guard = &clusterGuard{Client: c, replica: replica}
		cn.c = cn.guard
		return cn
	}
	g := &stallGuard{Client: c, replica: replica}
	g.dest[0].ping = ping(c)
	cn.c = g
	for addr := range c.Nodes() {
		cn.addr = addr
	}
	return cn
}

// New returns a Store for the servers in opts. By default it does not
// wait for them: it connects in the background and ctx is not used
// (see Options.FailFast). With FailFast it connects and checks that they
// answer, ctx bounding the check and the reading of the server's limits.
func New(ctx context.Context, opts Options) (*Store, error) {
	addrs := opts.Addrs
	if len(addrs) == 0 {
		addrs = []string{"127.0.0.1:6379"}
	}
	for i, a := range addrs {
		if err := store.CheckAddr(fmt.Sprintf("redisstore: Options.Addrs[%d]", i), a); err != nil {
			return nil, err
		}
	}
	co := rueidis.ClientOption{
		InitAddress: append([]string(nil), addrs...),
		Username:    opts.Username,
		Password:    opts.Password,
		SelectDB:    opts.DB,
		TLSConfig:   opts.TLS,
	}
	return open(ctx, co, opts)
}

// NewFromURL returns a Store for the servers named by a URL, connecting
// as New does (in the background unless Options.FailFast):
//
//	redis://[user:password@]host:port[/db][?addr=host2:port2&addr=...]
//	redis://[user:password@]host1:port1,host2:port2,...   (cluster seeds)
//	rediss://...   (TLS)
//
// Several addresses (host:port plus addr= parameters) are seeds of one
// cluster. The URL's addresses, credentials, database and TLS replace those
// fields of opts; the other fields of opts apply. Query parameters that
// rueidis.ParseURL knows (dial_timeout, skip_verify, ...) are honoured,
// except client_cache: client-side caching stays off.
func NewFromURL(ctx context.Context, url string, opts Options) (*Store, error) {
	shown := redactURL(url)
	if _, rest, ok := strings.Cut(url, "://"); ok && !strings.Contains(rest, "@") && shown != url {
		// A URL that lost its host ("redis://user:password",
		// "redis://:123456") has its password where the port goes: the
		// parser would take it for one, and its errors and every dial
		// error would print it.
		return nil, fmt.Errorf("redisstore: bad URL %q: no host before the password (what follows the colon is not shown); write redis://:password@host:port", shown)
	}
	co, err := rueidis.ParseURL(splitHosts(url))
	if err != nil {
		if shown != url {
			// The parser's message quotes the URL, password included.
			return nil, &urlError{shown: shown, err: err}
		}
		return nil, fmt.Errorf("redisstore: bad URL %q: %w", shown, err)
	}
	if passwordOnly(url) {
		// redis://secret@host is the requirepass shorthand, as in
		// storeurl and every kura command: a password, not a user name.
		co.Password, co.Username = co.Username, ""
	}
	if opts.TLS != nil {
		if co.TLSConfig == nil {
			return nil, fmt.Errorf("redisstore: Options.TLS is set but the URL %q does not use rediss://", redactURL(url))
		}
		t := opts.TLS.Clone()
		if t.ServerName == "" {
			t.ServerName = co.TLSConfig.ServerName
		}
		t.InsecureSkipVerify = t.InsecureSkipVerify || co.TLSConfig.InsecureSkipVerify
		co.TLSConfig = t
	}
	if opts.DialTimeout != 0 {
		co.Dialer.Timeout = opts.DialTimeout
	}
	return open(ctx, co, opts)
}

// NewFromClient wraps a rueidis client the application already has. The
// Store does not own it: Close marks the Store closed but leaves the client
// open. The server's value size limit is not read; MaxValueSize reports
// 512 MiB.
func NewFromClient(c rueidis.Client) *Store {
	s := newStore(nil, false)
	s.cur.Store(newConn(c, nil))
	close(s.first)
	close(s.up)
	if s.IsCluster() {
		s.refreshSlotsAsync() // for the addresses in error messages
	}
	return s
}

func newStore(seeds []string, owned bool) *Store {
	s := &Store{owned: owned, seeds: seeds, first: make(chan struct{}), up: make(chan struct{}), kick: make(chan struct{}, 1), created: time.Now()}
	s.maxValue.Store(DefaultMaxValueSize)
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	return s
}

func open(ctx context.Context, co rueidis.ClientOption, opts Options) (*Store, error) {
	if opts.DialTimeout < 0 {
		return nil, errors.New("redisstore: Options.DialTimeout is negative")
	}
	if opts.DialTimeout > 0 {
		co.Dialer.Timeout = opts.DialTimeout
	}
	if opts.DB < 0 {
		return nil, fmt.Errorf("redisstore: Options.DB is negative (%d)", opts.DB)
	}
	switch {
	case opts.MaxRetries < 0:
		co.DisableRetry = true
	default:
		co.RetryDelay = retryDelay(orDefault(opts.MaxRetries, 2))
	}
	switch {
	case opts.MaxFlushDelay == 0:
		co.MaxFlushDelay = DefaultMaxFlushDelay
	case opts.MaxFlushDelay > 0:
		co.MaxFlushDelay = opts.MaxFlushDelay
	}
	if co.PipelineMultiplex == 0 {
		co.PipelineMultiplex = -1 // one pipelined connection per server: see Options.Configure
	}
	if opts.Configure != nil {
		opts.Configure(&co)
	}
	co.DisableCache = true
	if err := configureSentinel(&co, opts.Sentinel); err != nil {
		return nil, err
	}
	if co.Sentinel.MasterSet != "" && opts.DB != 0 {
		co.SelectDB = opts.DB
	}
	waitN, waitAuto, waitT, err := waitPolicy(opts.InvalidateWait, co.Sentinel.MasterSet != "")
	if err != nil {
		return nil, err
	}
	var h *hub
	if opts.Tracking.Enabled {
		h = &hub{}
		if err := configureTracking(&co, opts.Tracking, h); err != nil {
			return nil, err
		}
	}
	s := newStore(append([]string(nil), co.InitAddress...), true)
	s.masterSet, s.waitReplicas, s.waitAuto, s.waitTimeout = co.Sentinel.MasterSet, waitN, waitAuto, waitT
	if waitN > 0 {
		s.combiner = newWaitCombiner()
	}
	if err := s.configureReplicaReads(&co, opts.ReadFromReplicas); err != nil {
		s.bgCancel()
		return nil, err
	}
	if h != nil {
		s.hub, s.prefixes = h, append([]string(nil), opts.Tracking.Prefixes...)
	}
	s.dialer = redial.New(opts.Resolver, nil)
	for _, a := range s.seeds {
		s.dialer.Track(a)
	}
	s.co = s.dialOptions(co)
	s.probes.opt = &s.co
	if opts.FailFast {
		err := s.connect(ctx)
		close(s.first)
		if err != nil {
			s.bgCancel()
			return nil, err
		}
		return s, nil
	}
	go s.connectLoop()
	if wait := cmp.Or(opts.StartWait, DefaultStartWait); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-s.first:
			// A server that answered and refused the credentials is
			// not down: that is a configuration to fix, said at once.
			if p := s.lastErr.Load(); p != nil && s.cur.Load() == nil && errors.Is(*p, ErrAuth) {
				s.Close()
				return nil, *p
			}
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return s, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// retryDelay allows max retries with a short exponential back-off. rueidis
// retries reads forever by default (until the context ends), which turns a
// dead server into a hang for callers without a deadline.
//
// A connection the server refused (or a dial that failed) is not retried:
// the next attempt would dial again and be refused again, and a caller
// with a loader to fall back on is better served by the error at once
// (measured: ~7.6 ms per read with retries against a refused port, against
// one dial's cost without; BENCHMARKS.md, "Hardening").
func retryDelay(limit int) rueidis.RetryDelayFn {
	return func(attempts int, cmd rueidis.Completed, err error) time.Duration {
		if attempts > limit || isDialError(err) {
			return -1
		}
		if isTryAgain(err) && len(cmd.Commands()) > 2 {
			// A multi-key MGET or DEL on a slot being migrated: the
			// batch falls back to one command per key at once
			// (oneByOne) rather than waiting for a migration that may
			// last seconds.
			return -1
		}
		return min(time.Millisecond<<attempts, 100*time.Millisecond)
	}
}

func (cn *conn) readMaxValue(ctx context.Context) (int, error) {
	m, err := cn.c.Do(ctx, cn.c.B().ConfigGet().Parameter("proto-max-bulk-len").Build()).AsStrMap()
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(m["proto-max-bulk-len"])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("proto-max-bulk-len %q", m["proto-max-bulk-len"])
	}
	return n, nil
}

// Client returns the underlying rueidis client, for commands the store
// does not cover. On a Store still connecting in the background it waits
// for the first attempt to end; it returns nil when the Store has not
// connected (the servers were down: see Options.FailFast, or call
// WaitConnected first).
func (s *Store) Client() rueidis.Client {
	<-s.first
	if cn := s.cur.Load(); cn != nil {
		return cn.c
	}
	return nil
}

// IsCluster reports whether the store talks to a Redis Cluster. On a
// Store still connecting it waits for the first attempt to end; it is
// false while the Store has not connected (the mode is decided by the
// first seed that answers).
func (s *Store) IsCluster() bool {
	<-s.first
	cn := s.cur.Load()
	return cn != nil && cn.cluster
}

// MaxValueSize returns the server's proto-max-bulk-len, or 512 MiB when
// it could not be read (or has not been yet: the store is connecting).
func (s *Store) MaxValueSize() int { return int(s.maxValue.Load()) }

// ready returns the connected client, or fails when the store is closed,
// ctx is done or the store has not connected (an error matching
// store.ErrNotConnected).
func (s *Store) ready(ctx context.Context) (*conn, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("redisstore: %w", store.ErrClosed)
	}
	if cn := s.cur.Load(); cn != nil {
		return cn, ctx.Err()
	}
	return s.waitFirst(ctx)
}

// Get returns the value stored under key, or an error matching
// store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	cn, err := s.ready(ctx)
	if err != nil {
		return nil, err
	}
	return s.getOn(ctx, cn, key)
}

// getOn is Get on the client cn.
func (s *Store) getOn(ctx context.Context, cn *conn, key string) ([]byte, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	b, err := cn.c.Do(ctx, cn.c.B().Get().Key(key).Build()).AsBytes()
	if err != nil {
		if rueidis.IsRedisNil(err) {
			return nil, store.ErrNotFound
		}
		return nil, s.wrapErr(s.addrOf(key), err)
	}
	return nonNil(b), nil
}

// Set stores value under key for ttl (0 = no expiry). A TTL below one
// millisecond is rounded up to one: Redis's PX counts milliseconds.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	cn, err := s.ready(ctx)
	if err != nil {
		return err
	}
	if err := s.checkItem(key, value, ttl); err != nil {
		return err
	}
	s.wrote(key)
	vc := getValueCopy()
	r := cn.c.Do(ctx, s.setCmd(cn, vc, key, value, ttl))
	vc.release(r.NonRedisError() == nil)
	if err := r.Error(); err != nil {
		return s.wrapErr(s.addrOf(key), err)
	}
	return nil
}

func (s *Store) checkItem(key string, value []byte, ttl time.Duration) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if err := store.CheckTTL(ttl); err != nil {
		return err
	}
	if mv := s.MaxValueSize(); len(value) > mv {
		return fmt.Errorf("redisstore: %w: %d bytes, the server takes at most %d (proto-max-bulk-len)",
			store.ErrValueTooLarge, len(value), mv)
	}
	return nil
}

// setCmd builds SET key value [PX ms], the value copied into vc.
//
// rueidis does not own a command's arguments once Do returns: when the
// connection breaks, Do returns its error while the pipe's writer may
// still be copying the command into its buffer, and a caller that reused
// its buffer by then (the Cache's pooled encode buffer goes straight to
// the next Set) raced with it (TestValueReusedAfterBrokenWrite, under
// -race). The value was handed over without a copy whenever ctx could
// not be cancelled, on the belief that Do returned only once the command
// was written; it is now copied into vc, which goes back to its pool only
// once the server answered (it read the whole command, so the writer is
// done with it) and is otherwise left to the garbage collector.
func (s *Store) setCmd(cn *conn, vc *valueCopy, key string, value []byte, ttl time.Duration) rueidis.Completed {
	set := cn.c.B().Set().Key(key).Value(vc.arg(value))
	if ttl > 0 {
		return set.PxMilliseconds(pxMillis(ttl)).Build()
	}
	return set.Build()
}

// valueCopy holds the copies of the values of one Set or SetMany while
// rueidis writes them.
type valueCopy struct{ b []byte }

var valueCopies = sync.Pool{New: func() any { return new(valueCopy) }}

// maxPooledCopy is the largest valueCopy kept for reuse: larger values
// cost their copy's allocation, and the pool holds no large buffers.
const maxPooledCopy = 256 << 10

func getValueCopy() *valueCopy { return valueCopies.Get().(*valueCopy) }

// arg appends a copy of value to vc and returns it as an argument. A
// copy made before vc.b grew stays valid: it points into the old array,
// which its string keeps alive.
func (vc *valueCopy) arg(value []byte) string {
	start := len(vc.b)
	vc.b = append(vc.b, value...)
	return rueidis.BinaryString(vc.b[start:len(vc.b):len(vc.b)])
}

// release puts vc back for reuse once every command that carried its
// bytes was answered; otherwise (a broken connection, a context that
// ended) rueidis may still read them, and vc is dropped.
func (vc *valueCopy) release(answered bool) {
	if !answered || cap(vc.b) > maxPooledCopy {
		return
	}
	vc.b = vc.b[:0]
	valueCopies.Put(vc)
}

func pxMillis(ttl time.Duration) int64 {
	return max(int64((ttl+time.Millisecond-1)/time.Millisecond), 1)
}

// Delete removes key; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	cn, err := s.ready(ctx)
	if err != nil {
		return err
	}
	if err := store.CheckKey(key); err != nil {
		return err
	}
	s.wrote(key)
	if err := cn.c.Do(ctx, cn.c.B().Del().Key(key).Build()).Error(); err != nil {
		return s.wrapErr(s.addrOf(key), err)
	}
	return nil
}

// Ping checks every server (every master on a cluster) with one PING each,
// sent concurrently. The error names each server that failed.
func (s *Store) Ping(ctx context.Context) error {
	cn, err := s.ready(ctx)
	if err != nil {
		return err
	}
	return s.ping(ctx, cn)
}

func (s *Store) ping(ctx context.Context, cn *conn) error {
	nodes := cn.c.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := nodes[addr]
			if err := n.Do(ctx, n.B().Ping().Build()).Error(); err != nil {
				errs[i] = s.wrapErr(addr, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close closes the connections (unless the client came from
// NewFromClient). Calls after Close fail with store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	already := s.closed.Swap(true)
	s.mu.Unlock()
	if already {
		return nil
	}
	s.bgCancel()
	s.bg.Wait()
	s.probes.close()
	s.closePush()
	if cn := s.cur.Load(); cn != nil && s.owned {
		cn.c.Close()
	}
	return nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// isDialError reports an error from connecting (refused, unreachable, a
// dial timeout), as opposed to one on an established connection.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// splitHosts rewrites "redis://a:1,b:2/0?x=y" as "redis://a:1/0?x=y&addr=b:2",
// the form rueidis.ParseURL reads as several seeds; other URLs are returned
// as they are.
// passwordOnly reports whether the user info of raw has no ":" (the
// redis://password@host shorthand).
func passwordOnly(raw string) bool {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return false
	}
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	at := strings.LastIndexByte(rest, '@')
	return at > 0 && !strings.Contains(rest[:at], ":")
}

func splitHosts(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	userinfo, hosts := "", authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hosts = authority[:i+1], authority[i+1:]
	}
	if !strings.Contains(hosts, ",") {
		return raw
	}
	parts := strings.Split(hosts, ",")
	var extra strings.Builder
	for _, h := range parts[1:] {
		if h = strings.TrimSpace(h); h != "" {
			extra.WriteString("addr=" + h + "&")
		}
	}
	path, query, _ := strings.Cut(tail, "?")
	q := strings.TrimSuffix(extra.String(), "&")
	if query != "" {
		q += "&" + query
	}
	return scheme + "://" + userinfo + strings.TrimSpace(parts[0]) + path + "?" + q
}
