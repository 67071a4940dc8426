// Package l1 is a typed in-process tier of decoded values: a bounded
// W-TinyLFU cache (otter) whose fills are guarded against invalidations
// that arrive while the read that would fill it is in flight. It knows
// nothing of the kura Cache: the read-through pipeline decides when to read
// it, fill it and drop from it; this package only makes each of those safe.
package l1

import (
	"hash/maphash"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/maypok86/otter/v2"
)

// Overhead is the bookkeeping one entry costs beyond its key and value:
// otter's node and the hash table slot.
const Overhead = 96

// shards is the number of locks the placeholders are spread over.
const shards = 64

type item[V any] struct {
	v        V
	negative bool
	weight   uint32
	born     time.Duration // since epoch: when the read that filled it began
}

// epoch is the origin of the tier's monotonic times.
var epoch = time.Now()

// Tier is the L1 of one Cache. The zero value is not usable; see New.
type Tier[V any] struct {
	// Read by every hit and written only by New and Close: no counter
	// shares their cache lines, so a hit on one core does not make the
	// next hit on the other core fetch them again.
	c      *otter.Cache[string, item[V]]
	maxAge time.Duration // > 0: an entry older than this is a miss, to the nanosecond
	vSize  int
	clone  func(V) V // nil: hits share the value
	closed atomic.Bool
	seed   maphash.Seed
	_      [padding]byte

	// stripes count the hits: each hit adds to a stripe picked at random,
	// so hits on different cores rarely write the same cache line (one
	// counter for all of them cost a cache-line transfer per hit under
	// parallel reads). Stats sums them: exact, every hit counted once.
	stripes [stripes]stripe

	shards [shards]shard

	misses, evictions, invalidations, flushes atomic.Uint64
}

// padding is the size of two cache lines: with the adjacent-line
// prefetcher of x86 cores, lines are fetched in pairs.
const padding = 128

// stripes is the number of hit counters; a power of two.
const stripes = 16

// stripe is one hit counter, alone on its pair of cache lines.
type stripe struct {
	hits, negHits atomic.Uint64
	_             [padding - 16]byte
}

// stripe picks the hit counter of one hit: a per-thread random number
// (math/rand/v2's runtime source), no shared state.
func (l *Tier[V]) stripe() *stripe {
	return &l.stripes[rand.Uint32()%stripes]
}

// shard holds the placeholders of the reads in flight for its keys.
type shard struct {
	mu      sync.Mutex
	pending map[string]*pending
	// epoch counts flushes; a read that began before one must not fill.
	epoch uint64
}

// pending is the placeholder of one key's reads in flight: gen moves on
// with every invalidation of the key, and a read fills only if it has not
// moved since the read began.
type pending struct {
	refs int
	gen  uint64
}

// Token is what a read in flight remembers of its placeholder.
type Token struct {
	p          *pending
	gen, epoch uint64
	began      time.Duration
}

// New returns a tier of at most maxBytes (as Weigh estimates) whose entries
// live at most ttl. With maxAge > 0 an entry is served for at most maxAge
// after the read that filled it began, exactly (otter's expiry runs on a
// coarser clock): the staleness bound of a tier no server reports to.
// With clone set, every hit returns clone(v) instead of v itself (the
// root's Cloner).
func New[V any](maxBytes int64, ttl, maxAge time.Duration, clone func(V) V) (*Tier[V], error) {
	l := &Tier[V]{seed: maphash.MakeSeed(), maxAge: maxAge, clone: clone}
	var zero V
	l.vSize = int(unsafe.Sizeof(zero))
	for i := range l.shards {
		l.shards[i].pending = make(map[string]*pending)
	}
	clk := acquireClock()
	c, err := otter.New(&otter.Options[string, item[V]]{
		Clock:            clk,
		MaximumWeight:    uint64(maxBytes),
		Weigher:          func(k string, e item[V]) uint32 { return e.weight },
		ExpiryCalculator: otter.ExpiryWriting[string, item[V]](ttl),
		OnDeletion: func(e otter.DeletionEvent[string, item[V]]) {
			if e.Cause == otter.CauseOverflow {
				l.evictions.Add(1)
			}
		},
	})
	if err != nil {
		releaseClock()
		return nil, err
	}
	l.c = c
	return l, nil
}

// ClockResolution is how often the tiers' clock reads the time: otter
// reads its clock on every lookup (for the entry's expiry), and the
// precise time costs a large part of a hit, so the tiers share a clock
// that reads it once per ClockResolution and costs a hit an atomic load.
// An entry expires (L1Options.MaxTTL) up to ClockResolution earlier or
// later than its TTL says, later still when the process is starved of
// CPU. The staleness bound of a tier without reports (maxAge) does not
// rely on it: Get checks it against the precise time.
const ClockResolution = 10 * time.Millisecond

// clock is the coarse clock the tiers of the process share: one goroutine
// for all of them, stopped when the last tier closes.
var clock struct {
	mu   sync.Mutex
	refs int
	c    *otter.CoarseClock
}

func acquireClock() *otter.CoarseClock {
	clock.mu.Lock()
	defer clock.mu.Unlock()
	if clock.refs == 0 {
		clock.c = otter.NewCoarseClock(ClockResolution)
	}
	clock.refs++
	return clock.c
}

// releaseClock stops the clock when no tier uses it any more. A closed
// tier may still hold it: a stopped CoarseClock reads the precise time.
func releaseClock() {
	clock.mu.Lock()
	defer clock.mu.Unlock()
	if clock.refs--; clock.refs == 0 {
		clock.c.Stop()
		clock.c = nil
	}
}

// weigh estimates the memory of an entry: the key, the size of V, twice
// the serialized size for what V points to, and the bookkeeping.
func (l *Tier[V]) weigh(key string, rawLen int) uint32 {
	w := uint64(len(key)) + uint64(l.vSize) + 2*uint64(rawLen) + Overhead
	return uint32(min(w, math.MaxUint32))
}

func (l *Tier[V]) shard(key string) *shard {
	return &l.shards[maphash.String(l.seed, key)%shards]
}

// Get serves key: its value (clone's copy with New's clone), whether it is
// cached as absent, and whether the tier holds it. A miss is counted.
func (l *Tier[V]) Get(key string) (v V, negative, ok bool) {
	e, ok := l.c.GetIfPresent(key)
	if ok && l.maxAge > 0 && time.Since(epoch)-e.born > l.maxAge {
		ok = false
	}
	if !ok || l.closed.Load() {
		l.misses.Add(1)
		return v, false, false
	}
	if e.negative {
		l.stripe().negHits.Add(1)
		return v, true, true
	}
	l.stripe().hits.Add(1)
	v = e.v
	if l.clone != nil {
		v = l.clone(v)
	}
	return v, false, true
}

// Begin places the placeholder of a read of key that may fill the tier.
func (l *Tier[V]) Begin(key string) Token {
	s := l.shard(key)
	s.mu.Lock()
	p := s.pending[key]
	if p == nil {
		p = &pending{}
		s.pending[key] = p
	}
	p.refs++
	t := Token{p: p, gen: p.gen, epoch: s.epoch}
	if l.maxAge > 0 {
		t.began = time.Since(epoch)
	}
	s.mu.Unlock()
	return t
}

// Finish ends a read begun with Begin. With ok it fills key with v
// (decoded from rawLen serialized bytes), but only if no invalidation of
// the key and no flush happened since Begin.
func (l *Tier[V]) Finish(key string, t Token, v V, negative bool, rawLen int, ok bool) {
	if ok && !negative && l.clone != nil {
		// The filling read's caller keeps v: the tier holds its own copy,
		// or a change that caller makes would reach every later hit. A
		// Clone that panics fills nothing and still releases the read.
		cloned := false
		defer func() {
			if !cloned {
				l.Finish(key, t, v, negative, rawLen, false)
			}
		}()
		v = l.clone(v)
		cloned = true
	}
	s := l.shard(key)
	s.mu.Lock()
	if ok && t.p.gen == t.gen && t.epoch == s.epoch && !l.closed.Load() {
		l.c.Set(key, item[V]{v: v, negative: negative, weight: l.weigh(key, rawLen), born: t.began})
	}
	if t.p.refs--; t.p.refs == 0 {
		delete(s.pending, key)
	}
	s.mu.Unlock()
}

// Drop removes key and stops the reads in flight from filling it.
func (l *Tier[V]) Drop(key string) {
	s := l.shard(key)
	s.mu.Lock()
	if p := s.pending[key]; p != nil {
		p.gen++
	}
	l.c.Invalidate(key)
	s.mu.Unlock()
}

// Flush removes everything and stops every read in flight from filling.
func (l *Tier[V]) Flush() {
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

// OnReport handles a server's invalidation report: keys changed, or (nil)
// everything must go.
func (l *Tier[V]) OnReport(keys []string) {
	if keys == nil {
		l.Flush()
		return
	}
	l.invalidations.Add(uint64(len(keys)))
	for _, k := range keys {
		l.Drop(k)
	}
}

// Close empties the tier and stops otter's goroutines (and the shared
// clock's, if this was the last tier); later reads miss.
func (l *Tier[V]) Close() {
	if l.closed.Swap(true) {
		return
	}
	l.c.InvalidateAll()
	l.c.StopAllGoroutines()
	releaseClock()
}

// Stats are the tier's counters.
type Stats struct {
	Hits, NegativeHits, Misses, Entries, Bytes, Evictions, Invalidations, Flushes uint64
}

// Stats returns a snapshot of the counters.
func (l *Tier[V]) Stats() Stats {
	var hits, negHits uint64
	for i := range l.stripes {
		hits += l.stripes[i].hits.Load()
		negHits += l.stripes[i].negHits.Load()
	}
	return Stats{
		Hits: hits, NegativeHits: negHits, Misses: l.misses.Load(),
		Entries: uint64(l.c.EstimatedSize()), Bytes: l.c.WeightedSize(), Evictions: l.evictions.Load(),
		Invalidations: l.invalidations.Load(), Flushes: l.flushes.Load(),
	}
}
