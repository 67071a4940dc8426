// Package redisring is a kura store over N standalone Redis (or Valkey)
// servers sharded on the client side: the topology of go-redis's Ring and
// redis-rb's Redis::Distributed, where each server holds the keys a
// consistent-hash ring gives it and no server knows of the others.
//
// Keys are placed by one of package ring's algorithms, chosen to agree key
// for key with the other clients on the same servers (Options.Ring; see
// docs/rings.md). A batch is split by shard and sent as one pipeline per
// shard, to all shards at once (on the Store's long-lived workers, see
// workers.go). Each shard is a redisstore.Store, so
// leases, Invalidate and the single-key operations are Redis's own per
// shard. The Store names each shard as a node (store.NodeLocator and
// store.NodeProber), so the breaker of package store/health fails one
// shard's keys fast (the Cache loads them from the source) while the
// other shards keep serving: unlike go-redis's Ring and dalli, keys are
// never moved to another shard during an outage.
//
// With Options.Redis.Tracking every shard tracks the reads of kura's L1
// tier and reports its own keys' changes (the Store is a store.Tracker);
// a shard started while its server is down keeps connecting in the
// background (see New).
//
// Its URL form is redis+ring://host1:port,host2:port?ring=go-redis (see
// store/storeurl), which cannot be read as a Cluster's redis://h1,h2.
package redisring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/kuracache/kura/ring"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// maxWorkers bounds a Store's workers (workers.go): two per shard but
// one, at most this many.
const maxWorkers = 64

// ErrOptions reports options New cannot use.
var ErrOptions = errors.New("kura: bad redisring options")

// Options configure a Store. Only Servers is required.
type Options struct {
	// Servers are the Redis addresses, "host:port", one per shard.
	Servers []string
	// Weights gives each server a share of the keys, aligned with
	// Servers; nil means all 1. Only the rings whose peer has weights
	// accept them (ketama, twemproxy, dalli).
	Weights []int
	// Ring is the placement (package ring). "" means ring.ModeRendezvous,
	// go-redis v9's Ring.
	Ring ring.Mode
	// IDs are the node identities the ring hashes, aligned with Servers,
	// as the peer names them: go-redis's shard names (the keys of
	// RingOptions.Addrs), redis-rb's node ids. nil means each peer's
	// default for the address: "host:port" for go-redis and dalli,
	// "redis://host:port/DB" for redis-rb, libmemcached's form for the
	// ketama rings.
	IDs []string
	// HashTag is the hash_tag of the twemproxy rings ("{}"); the other
	// rings treat tags as their peer does.
	HashTag string
	// Redis holds what every shard's connection uses (credentials, DB,
	// TLS, timeouts, tracking). Its Addrs must be empty.
	Redis redisstore.Options
}

// Store is a store.Store over sharded standalone Redis servers.
type Store struct {
	ring   ring.Ring
	addrs  []string
	shards []*redisstore.Store
	byAddr map[string]int
	// w runs the per-shard calls of parallel (workers.go); nil: a
	// goroutine each.
	w *workers
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.Batcher       = (*Store)(nil)
	_ store.Leaser        = (*Store)(nil)
	_ store.NodeLocator   = (*Store)(nil)
	_ store.NodeProber    = (*Store)(nil)
	_ store.Pinger        = (*Store)(nil)
	_ store.MaxValueSizer = (*Store)(nil)
)

// New opens one redisstore.Store per server, all at once. Like
// redisstore.New it does not fail when a server is down (refused,
// stopped, a name that does not resolve): that shard keeps connecting in
// the background and, until it answers, its keys fail with
// store.ErrNotConnected (a Cache loads them from the source; the breaker
// of store/health marks the shard Down) while the other shards serve.
// Each shard waits at most Redis.StartWait for its server, at the same
// time, so New takes one StartWait, not one per shard. New fails on bad
// options, and when a server answers and refuses the credentials, naming
// the server. With Redis.FailFast every server must answer.
func New(ctx context.Context, opts Options) (*Store, error) {
	r, err := NewRing(opts)
	if err != nil {
		return nil, err
	}
	s := &Store{ring: r, addrs: append([]string(nil), opts.Servers...), byAddr: map[string]int{},
		w: startWorkers(min(2*(len(opts.Servers)-1), maxWorkers))}
	s.shards = make([]*redisstore.Store, len(opts.Servers))
	errs := make([]error, len(opts.Servers))
	firstHost, _, _ := net.SplitHostPort(opts.Servers[0])
	var wg sync.WaitGroup
	for i, a := range opts.Servers {
		s.byAddr[a] = i
		o := opts.Redis
		o.Addrs = []string{a}
		if o.TLS != nil && (o.TLS.ServerName == "" || o.TLS.ServerName == firstHost) {
			// each shard's certificate names its own host
			o.TLS = o.TLS.Clone()
			o.TLS.ServerName, _, _ = net.SplitHostPort(a)
		}
		wg.Go(func() {
			sh, err := redisstore.New(ctx, o)
			if err != nil {
				errs[i] = fmt.Errorf("redisring: shard %d (%s): %w", i, a, err)
				return
			}
			s.shards[i] = sh
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// NewRing builds the ring New would place keys with, without connecting:
// for tools that only need to know where keys live.
func NewRing(opts Options) (ring.Ring, error) {
	if len(opts.Servers) == 0 {
		return nil, fmt.Errorf("%w: no Servers", ErrOptions)
	}
	if len(opts.Redis.Addrs) != 0 {
		return nil, fmt.Errorf("%w: Redis.Addrs must be empty (use Servers)", ErrOptions)
	}
	if opts.Weights != nil && len(opts.Weights) != len(opts.Servers) {
		return nil, fmt.Errorf("%w: %d Weights for %d Servers", ErrOptions, len(opts.Weights), len(opts.Servers))
	}
	if opts.IDs != nil && len(opts.IDs) != len(opts.Servers) {
		return nil, fmt.Errorf("%w: %d IDs for %d Servers", ErrOptions, len(opts.IDs), len(opts.Servers))
	}
	mode := opts.Ring
	if mode == "" {
		mode = ring.ModeRendezvous
	}
	seen := map[string]bool{}
	nodes := make([]ring.Node, len(opts.Servers))
	for i, a := range opts.Servers {
		if err := store.CheckAddr(fmt.Sprintf("Servers[%d]", i), a); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrOptions, err)
		}
		if seen[a] {
			return nil, fmt.Errorf("%w: server %q listed twice", ErrOptions, a)
		}
		seen[a] = true
		host, port, err := net.SplitHostPort(a)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil || host == "" || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("%w: server %q is not host:port", ErrOptions, a)
		}
		id := ""
		if opts.IDs != nil {
			id = opts.IDs[i]
		} else {
			switch mode {
			case ring.ModeDistributed:
				id = ring.RedisRbID(host, p, opts.Redis.DB)
			case ring.ModeKetama, ring.ModeTwemproxy, ring.ModeTwemproxyFNV:
				id = ring.LibmemcachedID(host, p)
			default:
				id = a
			}
		}
		nodes[i] = ring.Node{ID: id}
		if opts.Weights != nil {
			nodes[i].Weight = opts.Weights[i]
			if opts.Weights[i] <= 0 {
				return nil, fmt.Errorf("%w: Weights[%d] = %d, must be positive", ErrOptions, i, opts.Weights[i])
			}
		}
	}
	r, err := ring.New(mode, nodes, ring.Options{HashTag: opts.HashTag})
	if err != nil {
		return nil, fmt.Errorf("redisring: %w", err)
	}
	return r, nil
}

// Ring returns the ring that places keys.
func (s *Store) Ring() ring.Ring { return s.ring }

// Shard returns the store of the shard at index i (in Servers order).
func (s *Store) Shard(i int) *redisstore.Store { return s.shards[i] }

// Shards returns the number of shards.
func (s *Store) Shards() int { return len(s.shards) }

func (s *Store) of(key string) *redisstore.Store { return s.shards[s.ring.Owner(key)] }

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	return s.of(key).Get(ctx, key)
}

// Set implements store.Store.
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return s.of(key).Set(ctx, key, value, ttl)
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.of(key).Delete(ctx, key)
}

// Close closes every shard.
func (s *Store) Close() error {
	s.w.stop()
	var errs []error
	for _, sh := range s.shards {
		if sh == nil { // New failed before this shard was opened
			continue
		}
		if err := sh.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Ping pings every shard at once; the error names the shards that failed.
func (s *Store) Ping(ctx context.Context) error {
	errs := make([]error, len(s.shards))
	var wg sync.WaitGroup
	for i, sh := range s.shards {
		wg.Go(func() {
			if err := sh.Ping(ctx); err != nil {
				errs[i] = store.NodeErr(s.addrs[i], err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// MaxValueSize is the smallest limit of the shards.
func (s *Store) MaxValueSize() int {
	m := 0
	for _, sh := range s.shards {
		if v := sh.MaxValueSize(); v > 0 && (m == 0 || v < m) {
			m = v
		}
	}
	return m
}

// NodeOf returns the address of the shard that owns key.
func (s *Store) NodeOf(key string) string { return s.addrs[s.ring.Owner(key)] }

// Nodes returns every shard's address, in Servers order.
func (s *Store) Nodes() []string { return append([]string(nil), s.addrs...) }

// ProbeNode pings the shard at addr on its probe connection.
func (s *Store) ProbeNode(ctx context.Context, addr string) error {
	i, ok := s.byAddr[addr]
	if !ok {
		return &store.NodeError{Addr: addr, Err: fmt.Errorf("redisring: %s is not a shard", addr)}
	}
	return s.shards[i].ProbeNode(ctx, addr)
}

// groups splits indexes 0..n-1 by the shard owning key(i), all groups
// sharing one backing array of n indexes (each key's owner is hashed
// once).
func (s *Store) groups(n int, key func(int) string) [][]int {
	var small [128]int32
	owners := small[:0]
	if n > len(small) {
		owners = make([]int32, 0, n)
	}
	var count [8]int
	counts := count[:0]
	if len(s.shards) > len(count) {
		counts = make([]int, 0, len(s.shards))
	}
	counts = counts[:len(s.shards)]
	for i := 0; i < n; i++ {
		o := s.ring.Owner(key(i))
		owners = append(owners, int32(o))
		counts[o]++
	}
	all := make([]int, n)
	g := make([][]int, len(s.shards))
	at := 0
	for sh, c := range counts {
		if c > 0 {
			g[sh] = all[at : at : at+c]
			at += c
		}
	}
	for i, o := range owners {
		g[o] = append(g[o], i)
	}
	return g
}

// fanout runs fn for every shard with indexes, all at once, and merges
// the per-shard errors into one *store.BatchError for op. The last shard
// runs on the caller's goroutine: a batch over n shards starts n-1
// goroutines (none when only one shard has keys).
func (s *Store) fanout(op string, g [][]int, keyAt func(int) string, fn func(shard int, idx []int) error) error {
	errs := make([]error, len(g))
	s.parallel(g, errs, fn)
	return s.batchErr(op, g, keyAt, errs)
}

// parallel runs fn for every shard with indexes in g, all at once, the
// last on the caller's goroutine, setting errs[shard] to its error. The
// others run on the Store's workers (workers.go).
func (s *Store) parallel(g [][]int, errs []error, fn func(shard int, idx []int) error) {
	last := -1
	for sh, idx := range g {
		if len(idx) > 0 {
			last = sh
		}
	}
	var wg sync.WaitGroup
	for sh, idx := range g {
		if len(idx) == 0 || sh == last {
			continue
		}
		wg.Add(1)
		s.w.run(func() { defer wg.Done(); errs[sh] = fn(sh, idx) })
	}
	if last >= 0 {
		errs[last] = fn(last, g[last])
	}
	wg.Wait()
}

// batchErr merges the per-shard errors of a batch over the shards' key
// indexes g into one *store.BatchError for op, nil when none failed.
func (s *Store) batchErr(op string, g [][]int, keyAt func(int) string, errs []error) error {
	var be *store.BatchError
	for sh, err := range errs {
		if err == nil {
			continue
		}
		if be == nil {
			be = &store.BatchError{Op: op}
		}
		keys := make([]string, len(g[sh]))
		for j, i := range g[sh] {
			keys[j] = keyAt(i)
		}
		var b *store.BatchError
		if errors.As(err, &b) {
			be.Merge(err, keys)
			continue
		}
		for _, k := range keys {
			be.AddNode(k, s.addrs[sh], err)
		}
	}
	if be == nil {
		return nil
	}
	return be.Err()
}

func pick[T any](xs []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = xs[i]
	}
	return out
}

// write sends each shard its part of xs (placed by key) with fn, all
// shards at once.
func write[T any](s *Store, op string, xs []T, key func(T) string, fn func(sh *redisstore.Store, part []T) error) error {
	if len(s.shards) == 1 {
		return fn(s.shards[0], xs)
	}
	k := func(i int) string { return key(xs[i]) }
	return s.fanout(op, s.groups(len(xs), k), k, func(sh int, idx []int) error {
		return fn(s.shards[sh], pick(xs, idx))
	})
}

// read is write for the calls that answer one result per key, aligned
// with keys.
func read[R any](s *Store, op string, keys []string, fn func(sh *redisstore.Store, part []string) ([]R, error)) ([]R, error) {
	if len(s.shards) == 1 {
		return fn(s.shards[0], keys)
	}
	out := make([]R, len(keys))
	k := func(i int) string { return keys[i] }
	err := s.fanout(op, s.groups(len(keys), k), k, func(sh int, idx []int) error {
		res, err := fn(s.shards[sh], pick(keys, idx))
		for j, i := range idx {
			if j < len(res) {
				out[i] = res[j]
			}
		}
		return err
	})
	return out, err
}

func self(k string) string          { return k }
func itemKey(it store.Item) string  { return it.Key }
func fillKey(f store.Fill) string   { return f.Lease.Key }
func leaseKey(l store.Lease) string { return l.Key }

// GetMany implements store.BatchGetter: one MGET pipeline per shard, all
// shards at once, each shard writing its values straight into the result.
func (s *Store) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	if len(s.shards) == 1 {
		return s.shards[0].GetMany(ctx, keys)
	}
	out := make([][]byte, len(keys))
	k := func(i int) string { return keys[i] }
	err := s.fanout("get", s.groups(len(keys), k), k, func(sh int, idx []int) error {
		return s.shards[sh].GetManyAt(ctx, keys, idx, out)
	})
	return out, err
}

// SetMany implements store.BatchSetter.
func (s *Store) SetMany(ctx context.Context, items []store.Item) error {
	return write(s, "set", items, itemKey, func(sh *redisstore.Store, part []store.Item) error {
		return sh.SetMany(ctx, part)
	})
}

// DeleteMany implements store.BatchDeleter.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	return write(s, "delete", keys, self, func(sh *redisstore.Store, part []string) error {
		return sh.DeleteMany(ctx, part)
	})
}

// LeaseGet implements store.Leaser, per shard, all shards at once, each
// shard writing its results straight into the result.
func (s *Store) LeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, error) {
	if len(s.shards) == 1 {
		return s.shards[0].LeaseGet(ctx, keys, opts)
	}
	out := make([]store.LeaseResult, len(keys))
	k := func(i int) string { return keys[i] }
	err := s.fanout("lease", s.groups(len(keys), k), k, func(sh int, idx []int) error {
		return s.shards[sh].LeaseGetAt(ctx, keys, idx, out, opts)
	})
	return out, err
}

// Fill implements store.Leaser.
func (s *Store) Fill(ctx context.Context, fills []store.Fill) error {
	return write(s, "fill", fills, fillKey, func(sh *redisstore.Store, part []store.Fill) error {
		return sh.Fill(ctx, part)
	})
}

// Release implements store.Leaser.
func (s *Store) Release(ctx context.Context, leases []store.Lease) error {
	return write(s, "release", leases, leaseKey, func(sh *redisstore.Store, part []store.Lease) error {
		return sh.Release(ctx, part)
	})
}

// Invalidate implements store.Leaser: each key on the shard that owns it.
func (s *Store) Invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	return write(s, "invalidate", keys, self, func(sh *redisstore.Store, part []string) error {
		return sh.Invalidate(ctx, part, stale)
	})
}

var (
	_ store.PrefixReader = (*Store)(nil)
	_ store.MetaReader   = (*Store)(nil)
)

// GetPrefix implements store.PrefixReader on the shard that owns key
// (GETRANGE there): kura inspect and kura ui read a bounded part of a
// large value whichever shard holds it.
func (s *Store) GetPrefix(ctx context.Context, key string, max int) ([]byte, int64, error) {
	return s.of(key).GetPrefix(ctx, key, max)
}

// KeyMeta implements store.MetaReader on the shard that owns key.
func (s *Store) KeyMeta(ctx context.Context, key string) (store.KeyMeta, error) {
	return s.of(key).KeyMeta(ctx, key)
}

// WalkNodes implements store.KeyWalker: the masters of every shard, in
// shard order, kind "redis-ring".
func (s *Store) WalkNodes(ctx context.Context) (string, []store.NodeWalker, error) {
	var out []store.NodeWalker
	for _, sh := range s.shards {
		_, ws, err := sh.WalkNodes(ctx)
		if err != nil {
			for _, w := range out {
				_ = w.Close()
			}
			return "", nil, err
		}
		out = append(out, ws...)
	}
	return "redis-ring", out, nil
}
