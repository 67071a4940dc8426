package redisstore

import (
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

	"github.com/kuracache/kura/store"
)

// DefaultMaxValueSize is Redis's default proto-max-bulk-len, used when the
// server does not say (CONFIG is often disabled on managed services).
const DefaultMaxValueSize = 512 << 20

// ErrAuth reports that the server refused the credentials, or that it
// requires some and none were given. Check the user and password in the URL
// or in Options.Username and Options.Password.
var ErrAuth = errors.New("kura: redis authentication failed")

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
	Configure func(*rueidis.ClientOption)
	// Tracking turns on server-assisted invalidation for kura's L1 tier
	// (see Tracking). The zero value is off.
	Tracking Tracking
}

// Store is a store.Store on Redis or Redis Cluster. It is safe for
// concurrent use.
type Store struct {
	c        rueidis.Client
	owned    bool // Close closes c
	cluster  bool
	addr     string // the server, for messages (standalone)
	maxValue int
	closed   atomic.Bool

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
)

// New connects to the servers in opts and checks that they answer. ctx
// bounds the connection check and the reading of the server's limits.
func New(ctx context.Context, opts Options) (*Store, error) {
	addrs := opts.Addrs
	if len(addrs) == 0 {
		addrs = []string{"127.0.0.1:6379"}
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

// NewFromURL connects to the servers named by a URL:
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
	co, err := rueidis.ParseURL(splitHosts(url))
	if err != nil {
		return nil, fmt.Errorf("redisstore: bad URL %q: %w", redactURL(url), err)
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
	s := wrap(c, false, DefaultMaxValueSize)
	if s.cluster {
		s.refreshSlotsAsync() // for the addresses in error messages
	}
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
	if opts.Configure != nil {
		opts.Configure(&co)
	}
	co.DisableCache = true
	var h *hub
	if opts.Tracking.Enabled {
		h = &hub{}
		if err := configureTracking(&co, opts.Tracking, h); err != nil {
			return nil, err
		}
	}
	seeds := strings.Join(co.InitAddress, ",")
	c, err := rueidis.NewClient(co)
	if err != nil {
		if errors.Is(err, rueidis.ErrNoCache) {
			return nil, fmt.Errorf("redisstore: %s: Options.Tracking needs Redis 6 or later speaking RESP3 (CLIENT TRACKING): %w", seeds, err)
		}
		return nil, connectError(seeds, err)
	}
	s := wrap(c, true, DefaultMaxValueSize)
	if h != nil {
		s.hub, s.prefixes = h, append([]string(nil), opts.Tracking.Prefixes...)
	}
	s.probes.opt = &co
	// One PING proves the credentials and the database before the first
	// real command, and CONFIG GET reads the size limit. CONFIG is often
	// disabled (managed services, ACL users without +config): then the
	// default stands.
	if err := s.Ping(ctx); err != nil {
		s.bgCancel()
		c.Close()
		return nil, err
	}
	if n, err := s.readMaxValue(ctx); err == nil {
		s.maxValue = n
	}
	if s.cluster {
		s.refreshSlots(ctx)
	}
	return s, nil
}

func wrap(c rueidis.Client, owned bool, maxValue int) *Store {
	s := &Store{c: c, owned: owned, maxValue: maxValue, cluster: c.Mode() == rueidis.ClientModeCluster}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	if !s.cluster {
		for addr := range c.Nodes() {
			s.addr = addr
		}
	}
	return s
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
	return func(attempts int, _ rueidis.Completed, err error) time.Duration {
		if attempts > limit || isDialError(err) {
			return -1
		}
		return min(time.Millisecond<<attempts, 100*time.Millisecond)
	}
}

func (s *Store) readMaxValue(ctx context.Context) (int, error) {
	m, err := s.c.Do(ctx, s.c.B().ConfigGet().Parameter("proto-max-bulk-len").Build()).AsStrMap()
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
// does not cover.
func (s *Store) Client() rueidis.Client { return s.c }

// IsCluster reports whether the store talks to a Redis Cluster.
func (s *Store) IsCluster() bool { return s.cluster }

// MaxValueSize returns the server's proto-max-bulk-len, or 512 MiB when
// it could not be read.
func (s *Store) MaxValueSize() int { return s.maxValue }

// ready fails once the store is closed or ctx is done.
func (s *Store) ready(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("redisstore: %w", store.ErrClosed)
	}
	return ctx.Err()
}

// Get returns the value stored under key, or an error matching
// store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	b, err := s.c.Do(ctx, s.c.B().Get().Key(key).Build()).AsBytes()
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
	if err := s.ready(ctx); err != nil {
		return err
	}
	if err := s.checkItem(key, value, ttl); err != nil {
		return err
	}
	if err := s.c.Do(ctx, s.setCmd(ctx, key, value, ttl)).Error(); err != nil {
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
	if len(value) > s.maxValue {
		return fmt.Errorf("redisstore: %w: %d bytes, the server takes at most %d (proto-max-bulk-len)",
			store.ErrValueTooLarge, len(value), s.maxValue)
	}
	return nil
}

// setCmd builds SET key value [PX ms].
//
// The value is handed to rueidis without a copy when ctx cannot be
// cancelled: Do then returns only after the command was written and
// answered. A cancellable ctx lets Do return while the command still waits
// in the pipeline, to be written later; a caller that reused its buffer by
// then would store garbage, so the value is copied.
func (s *Store) setCmd(ctx context.Context, key string, value []byte, ttl time.Duration) rueidis.Completed {
	set := s.c.B().Set().Key(key).Value(s.valueArg(ctx, value))
	if ttl > 0 {
		return set.PxMilliseconds(pxMillis(ttl)).Build()
	}
	return set.Build()
}

// valueArg turns a value into a command argument, without a copy when
// that is safe (see setCmd).
func (s *Store) valueArg(ctx context.Context, value []byte) string {
	if ctx.Done() == nil {
		return rueidis.BinaryString(value)
	}
	return string(value)
}

func pxMillis(ttl time.Duration) int64 {
	return max(int64((ttl+time.Millisecond-1)/time.Millisecond), 1)
}

// Delete removes key; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if err := s.c.Do(ctx, s.c.B().Del().Key(key).Build()).Error(); err != nil {
		return s.wrapErr(s.addrOf(key), err)
	}
	return nil
}

// Ping checks every server (every master on a cluster) with one PING each,
// sent concurrently. The error names each server that failed.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	nodes := s.c.Nodes()
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
	if s.owned {
		s.c.Close()
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
