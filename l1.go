package kura

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/maypok86/otter/v2"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// DefaultL1MaxTTL is L1Options.MaxTTL when left at zero.
const DefaultL1MaxTTL = 5 * time.Minute

// L1Options configures the in-process L1 tier of a Cache: decoded values
// kept in the process, so a hit costs neither a round trip nor a decode.
// The zero value (MaxBytes 0) turns it off.
//
// An L1 must not serve a value another process has changed. Over a store
// whose server reports changes (store.Tracker: redisstore with
// Options.Tracking, on Redis or Redis Cluster) a key read into the L1 is
// dropped when the server reports its change; over any other store
// (memcached, Redis without tracking) the L1 is refused unless
// MaxStaleness is set, and then a value is served from it for at most
// MaxStaleness after it was read, however it changed meanwhile.
type L1Options struct {
	// MaxBytes bounds the memory of the L1, as estimated per entry: the
	// key, the size of V itself, twice the serialized (uncompressed) size
	// of the value for what it points to (Go strings, slices and maps take
	// more room than msgpack), and 96 bytes of bookkeeping. Entries beyond
	// the bound are evicted by W-TinyLFU, which admits a new key only if it
	// is used more often than the one it would evict, so a scan of one-off
	// keys does not push out hot ones. Zero turns the L1 off; negative is
	// invalid.
	MaxBytes int64

	// MaxTTL bounds how long a value stays in the L1 without being read
	// from the server again, however long it lives there. It bounds the
	// harm of a report the server never sent (a cluster slot moved to
	// another node). If zero, DefaultL1MaxTTL (5 minutes).
	MaxTTL time.Duration

	// MaxStaleness allows an L1 over a store with no server-assisted
	// invalidation (memcached; Redis without redisstore's
	// Options.Tracking), and is the staleness bound it then has: a value
	// is served from the L1 for at most MaxStaleness after it was read
	// from the store, even if another process changed or deleted it in
	// the meantime (writes through this Cache drop the key at once). If
	// zero, such a store with MaxBytes set is an error. Ignored over a
	// tracking store.
	MaxStaleness time.Duration
}

// Cloner is implemented by value types whose L1 hits should return a copy.
// A Cache with an L1 returns the value it holds to every caller that hits
// it: for a struct the struct itself is copied, but the slices, maps and
// pointers in it are shared, so callers must treat them as read-only. If V
// implements Cloner, every L1 hit returns v.Clone() instead (BENCHMARKS.md,
// "L1": shared vs copied hits).
type Cloner[V any] interface {
	Clone() V
}

// l1Overhead is the bookkeeping one L1 entry costs beyond its key and
// value: otter's node and the hash table slot.
const l1Overhead = 96

// l1Shards is the number of locks the placeholders are spread over.
const l1Shards = 64

// l1Entry is what the L1 holds for one key.
type l1Entry[V any] struct {
	v        V
	negative bool
	weight   uint32
}

// l1 is the in-process tier of one Cache.
type l1[V any] struct {
	c       *otter.Cache[string, l1Entry[V]]
	tracker store.Tracker // nil: TTL-bounded only
	ttl     time.Duration
	vSize   int
	clone   bool
	seed    maphash.Seed
	shards  [l1Shards]l1Shard
	unsub   func()
	closed  atomic.Bool

	hits, negHits, misses, evictions, invalidations, flushes atomic.Uint64
}

// l1Shard holds the placeholders of the reads in flight for its keys.
type l1Shard struct {
	mu      sync.Mutex
	pending map[string]*l1Pending
	// epoch counts flushes; a read that began before one must not fill.
	epoch uint64
}

// l1Pending is the placeholder of one key's reads in flight: gen moves on
// with every invalidation of the key, and a read fills the L1 only if it
// has not moved since the read began.
type l1Pending struct {
	refs int
	gen  uint64
}

// l1Token is what a read in flight remembers of its placeholder.
type l1Token struct {
	p          *l1Pending
	gen, epoch uint64
}

func newL1[V any](s store.Store, o L1Options) (*l1[V], error) {
	if o.MaxBytes == 0 {
		return nil, nil
	}
	if o.MaxBytes < 0 {
		return nil, fmt.Errorf("kura: Options.L1.MaxBytes must not be negative, got %d", o.MaxBytes)
	}
	if o.MaxTTL < 0 || o.MaxStaleness < 0 {
		return nil, errors.New("kura: Options.L1.MaxTTL and MaxStaleness must not be negative")
	}
	l := &l1[V]{ttl: o.MaxTTL, seed: maphash.MakeSeed()}
	if l.ttl == 0 {
		l.ttl = DefaultL1MaxTTL
	}
	if t, ok := store.Find[store.Tracker](s); ok && t.Tracking() {
		l.tracker = t
	} else {
		if o.MaxStaleness == 0 {
			return nil, errors.New("kura: Options.L1 needs a store whose server reports changes (redisstore with Options.Tracking) or, to accept stale reads, Options.L1.MaxStaleness (memcached and other stores: a value may be served that long after another process changed it)")
		}
		l.ttl = min(l.ttl, o.MaxStaleness)
	}
	var zero V
	l.vSize = int(unsafe.Sizeof(zero))
	_, l.clone = any(zero).(Cloner[V])
	for i := range l.shards {
		l.shards[i].pending = make(map[string]*l1Pending)
	}
	c, err := otter.New(&otter.Options[string, l1Entry[V]]{
		MaximumWeight:    uint64(o.MaxBytes),
		Weigher:          func(k string, e l1Entry[V]) uint32 { return e.weight },
		ExpiryCalculator: otter.ExpiryWriting[string, l1Entry[V]](l.ttl),
		OnDeletion: func(e otter.DeletionEvent[string, l1Entry[V]]) {
			if e.Cause == otter.CauseOverflow {
				l.evictions.Add(1)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("kura: L1: %w", err)
	}
	l.c = c
	if l.tracker != nil {
		l.unsub = l.tracker.Subscribe(l.onReport)
	}
	return l, nil
}

// weigh estimates the memory of an entry (see L1Options.MaxBytes).
func (l *l1[V]) weigh(key string, rawLen int) uint32 {
	w := uint64(len(key)) + uint64(l.vSize) + 2*uint64(rawLen) + l1Overhead
	return uint32(min(w, math.MaxUint32))
}

func (l *l1[V]) shard(key string) *l1Shard {
	return &l.shards[maphash.String(l.seed, key)%l1Shards]
}

// get serves key from the L1.
func (l *l1[V]) get(key string) (entry[V], bool) {
	e, ok := l.c.GetIfPresent(key)
	if !ok || l.closed.Load() {
		return entry[V]{}, false
	}
	if e.negative {
		l.negHits.Add(1)
	} else {
		l.hits.Add(1)
	}
	v := e.v
	if l.clone && !e.negative {
		v = any(v).(Cloner[V]).Clone()
	}
	return entry[V]{v: v, negative: e.negative}, true
}

// begin places the placeholder of a read of key that may fill the L1.
func (l *l1[V]) begin(key string) l1Token {
	s := l.shard(key)
	s.mu.Lock()
	p := s.pending[key]
	if p == nil {
		p = &l1Pending{}
		s.pending[key] = p
	}
	p.refs++
	t := l1Token{p: p, gen: p.gen, epoch: s.epoch}
	s.mu.Unlock()
	return t
}

// finish ends a read begun with begin. It fills the L1 with e (decoded
// from rawLen serialized bytes) when ok, and only if no invalidation of
// the key and no flush happened since begin.
func (l *l1[V]) finish(key string, t l1Token, e entry[V], rawLen int, ok bool) {
	s := l.shard(key)
	s.mu.Lock()
	if ok && t.p.gen == t.gen && t.epoch == s.epoch && !l.closed.Load() {
		l.c.Set(key, l1Entry[V]{v: e.v, negative: e.negative, weight: l.weigh(key, rawLen)})
	}
	if t.p.refs--; t.p.refs == 0 {
		delete(s.pending, key)
	}
	s.mu.Unlock()
}

// drop removes key and stops the reads in flight from filling it.
func (l *l1[V]) drop(key string) {
	s := l.shard(key)
	s.mu.Lock()
	if p := s.pending[key]; p != nil {
		p.gen++
	}
	l.c.Invalidate(key)
	s.mu.Unlock()
}

// flush removes everything and stops every read in flight from filling.
func (l *l1[V]) flush() {
	l.flushes.Add(1)
	for i := range l.shards {
		l.shards[i].mu.Lock()
	}
	for i := range l.shards {
		l.shards[i].epoch++
	}
	l.c.InvalidateAll()
	for i := range l.shards {
		l.shards[i].mu.Unlock()
	}
}

// onReport handles the server's invalidations (on the connection's reader).
func (l *l1[V]) onReport(keys []string) {
	if keys == nil {
		l.flush()
		return
	}
	l.invalidations.Add(uint64(len(keys)))
	for _, k := range keys {
		l.drop(k)
	}
}

// keeps reports whether key may be kept: over a broadcast tracker, only
// keys under its prefixes are reported.
func (l *l1[V]) keeps(key string) bool {
	return l.tracker == nil || l.tracker.Tracks(key)
}

func (l *l1[V]) close() {
	if l.closed.Swap(true) {
		return
	}
	if l.unsub != nil {
		l.unsub()
	}
	l.c.InvalidateAll()
	l.c.StopAllGoroutines()
}

func (l *l1[V]) stats() L1Stats {
	return L1Stats{
		Hits: l.hits.Load() + l.negHits.Load(), Misses: l.misses.Load(), Entries: uint64(l.c.EstimatedSize()),
		Bytes: l.c.WeightedSize(), Evictions: l.evictions.Load(),
		Invalidations: l.invalidations.Load(), Flushes: l.flushes.Load(),
	}
}

// L1Stats are the counters of a Cache's L1 tier (all zero without one).
type L1Stats struct {
	// Hits counts reads answered by the L1, of a value or of a negative
	// entry (included in Stats.Hits and Stats.NegativeHits); Misses reads
	// that went on to the store.
	Hits, Misses uint64
	// Entries and Bytes are the L1's current size: entries, and their
	// estimated memory (L1Options.MaxBytes).
	Entries, Bytes uint64
	// Evictions counts entries evicted to stay within MaxBytes.
	Evictions uint64
	// Invalidations counts keys the server reported changed;
	// Flushes counts "drop everything" events (a tracking connection
	// broke, FLUSHALL).
	Invalidations, Flushes uint64
}

// l1Hit serves key from the L1, if there is one and it holds key.
func (c *Cache[V]) l1Hit(key string) (entry[V], bool) {
	if c.l1 == nil {
		return entry[V]{}, false
	}
	return c.l1.get(key)
}

// l1Read is read with the L1 in front: a hit is served from it; a miss
// reads the store (tracked, when the server reports changes) and fills
// the L1 unless the key was invalidated while the read was in flight.
func (c *Cache[V]) l1Read(ctx context.Context, key string) (entry[V], error) {
	l := c.l1
	if e, ok := l.get(key); ok {
		return e, nil
	}
	l.misses.Add(1)
	if !l.keeps(key) {
		return c.storeRead(ctx, key)
	}
	t := l.begin(key)
	start := time.Now()
	var data []byte
	var err error
	if l.tracker != nil {
		data, err = l.tracker.GetTracked(ctx, key)
	} else {
		data, err = c.store.Get(ctx, key)
	}
	c.stats.since(OpGet, start)
	if err != nil {
		l.finish(key, t, entry[V]{}, 0, false)
		return entry[V]{}, c.countReadErr(err)
	}
	e, h, err := c.foundH(key, data)
	l.finish(key, t, e, h.RawLen, err == nil)
	return e, err
}

// l1GetMany serves the keys the L1 holds, reads the rest in one batch
// (tracked, when the server reports changes) and fills the L1 with them.
func (c *Cache[V]) l1GetMany(ctx context.Context, keys []string, fn func(key string, e entry[V], err error)) error {
	l := c.l1
	rest := make([]string, 0, len(keys))
	for _, k := range keys {
		if e, ok := l.get(k); ok {
			fn(k, e, nil)
			continue
		}
		l.misses.Add(1)
		rest = append(rest, k)
	}
	if len(rest) == 0 {
		return nil
	}
	toks := make([]l1Token, len(rest))
	kept := make([]bool, len(rest))
	for i, k := range rest {
		if kept[i] = l.keeps(k); kept[i] {
			toks[i] = l.begin(k)
		}
	}
	get := func(ctx context.Context, keys []string) ([][]byte, error) {
		if l.tracker != nil {
			return l.tracker.GetManyTracked(ctx, keys)
		}
		return store.GetMany(ctx, c.store, keys)
	}
	pos := 0
	err := c.getManyWith(ctx, rest, get, func(key string, e entry[V], h codec.Header, err error) {
		for rest[pos] != key { // getManyWith reports in order
			pos++
		}
		if kept[pos] {
			l.finish(key, toks[pos], e, h.RawLen, err == nil)
			kept[pos] = false
		}
		fn(key, e, err)
	})
	for i, k := range rest { // keys never reported (a failed batch)
		if kept[i] {
			l.finish(k, toks[i], entry[V]{}, 0, false)
		}
	}
	return err
}

// l1Drop removes keys this Cache is about to write or delete, so its own
// process never reads its old value after the write returns (the server's
// report of the write reaches the other processes).
func (c *Cache[V]) l1Drop(keys ...string) {
	if c.l1 == nil {
		return
	}
	for _, k := range keys {
		c.l1.drop(k)
	}
}

// Close releases the L1 tier (its clean-up goroutine and its subscription
// to the store's invalidations). It does not close the Store, which may be
// shared. A Cache without an L1 has nothing to release.
func (c *Cache[V]) Close() error {
	if c.l1 != nil {
		c.l1.close()
	}
	return nil
}

// fetchManyL1Leased is FetchMany with an L1 over a store with leases: the
// L1 and one tracked batch read (which fills the L1) answer first, and only
// the keys still missing take the leased path.
func (c *Cache[V]) fetchManyL1Leased(ctx context.Context, keys []string, ttl time.Duration, loader ManyLoader[V]) (map[string]V, error) {
	out := make(map[string]V, len(keys))
	var rest []string
	b := c.newBudget()
	sctx, done := b.ctx(ctx)
	err := c.getMany(sctx, keys, func(key string, e entry[V], err error) {
		switch {
		case err != nil:
			rest = append(rest, key)
		case !e.negative:
			out[key] = e.v
		}
	})
	done()
	if err != nil {
		c.reportErr(OpGetMany, "", err)
		clear(out)
		rest = keys
	}
	if len(rest) == 0 {
		return out, nil
	}
	got, err := c.fetchManyLeased(ctx, rest, ttl, loader)
	for k, v := range got {
		out[k] = v
	}
	return out, err
}
