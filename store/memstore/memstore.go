// Package memstore is the in-process store: a byte-bounded cache with a TTL
// per entry, safe for concurrent use. It is kura's embedded store (no
// server needed), for a single process and for tests. It is not the L1
// tier: a Cache's L1 (kura.Options.L1) keeps decoded values in its own
// structure, invalidated by the server.
//
// It is not a shared cache: every process has its own, so an invalidation
// in one process does not reach another. It is not persistent either.
//
// # Why otter
//
// The map, the eviction policy and the expiry wheel come from
// github.com/maypok86/otter/v2 rather than code of our own. It is the one
// well-kept library that has both things this store needs:
//
//   - a bound in bytes, through MaximumWeight and a Weigher that charges each
//     entry its key, its value and a fixed overhead; and
//   - a TTL per entry, through an ExpiryCalculator that reads the TTL the
//     entry was written with (a timer wheel, so expiry costs O(1)).
//
// hashicorp/golang-lru/v2/expirable was the other candidate: it bounds the
// number of entries, not bytes, and has one TTL for the whole cache, so a
// Set with its own TTL could not be honoured. Otter's eviction is W-TinyLFU
// rather than plain LRU: it keeps frequently used entries when a scan of
// one-off keys passes through, which is what an in-process cache wants, and a new
// entry may be refused admission when the cache is full of hotter ones (a
// later Get then misses, as after any eviction).
//
// Values are copied on the way in and on the way out, so callers may reuse
// their buffers and may modify what they get.
package memstore

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/kuracache/kura/store"
)

// DefaultMaxBytes is the bound used when Options.MaxBytes is zero.
const DefaultMaxBytes = 64 << 20

// entryOverhead is what one entry costs beyond its key and value bytes:
// otter's node, the entry struct, the slice and string headers and the
// hash table slot, rounded up. It keeps a cache of many tiny values from
// growing far past MaxBytes.
const entryOverhead = 128

// Options configure a Store. The zero value is a 64 MiB cache.
type Options struct {
	// MaxBytes bounds the memory held by entries: keys, values and a
	// fixed per-entry overhead of 128 bytes. The least valuable entries
	// are evicted past it. If zero, it defaults to 64 MiB.
	MaxBytes int64
}

// Store is an in-process cache. Create it with New.
type Store struct {
	c        *otter.Cache[string, entry]
	maxValue int
	closed   atomic.Bool
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.Batcher       = (*Store)(nil)
	_ store.MaxValueSizer = (*Store)(nil)
)

// entry is what the cache holds: a private copy of the value and the TTL
// it was written with, which the expiry calculator reads.
type entry struct {
	val []byte
	ttl time.Duration
}

// never is otter's "no expiry".
const never = time.Duration(math.MaxInt64)

// New returns an empty Store.
func New(opts Options) (*Store, error) {
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("memstore: Options.MaxBytes is negative (%d)", opts.MaxBytes)
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxBytes <= entryOverhead {
		return nil, fmt.Errorf("memstore: Options.MaxBytes %d is too small to hold one entry", opts.MaxBytes)
	}
	c, err := otter.New(&otter.Options[string, entry]{
		MaximumWeight: uint64(opts.MaxBytes),
		Weigher:       weigh,
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, entry]) time.Duration {
			if e.Value.ttl == 0 {
				return never
			}
			return e.Value.ttl
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	// A value larger than the whole cache would be evicted as it is
	// written; the weigher's uint32 bounds one entry too.
	maxValue := min(opts.MaxBytes, math.MaxUint32) - entryOverhead
	return &Store{c: c, maxValue: int(min(maxValue, math.MaxInt))}, nil
}

func weigh(key string, e entry) uint32 {
	w := uint64(len(key)) + uint64(len(e.val)) + entryOverhead
	return uint32(min(w, math.MaxUint32))
}

// ready fails once the store is closed or ctx is done.
func (s *Store) ready(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("memstore: %w", store.ErrClosed)
	}
	return ctx.Err()
}

func (s *Store) check(ctx context.Context, key string) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	return store.CheckKey(key)
}

// Get returns a copy of the value stored under key, or an error matching
// store.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.check(ctx, key); err != nil {
		return nil, err
	}
	e, ok := s.c.GetIfPresent(key)
	if !ok {
		return nil, store.ErrNotFound
	}
	return clone(e.val), nil
}

// Set stores a copy of value under key for ttl (0 = no expiry).
func (s *Store) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	if err := store.CheckTTL(ttl); err != nil {
		return err
	}
	if len(key)+len(value) > s.maxValue {
		return fmt.Errorf("memstore: %w: %d bytes with its key, the cache holds at most %d",
			store.ErrValueTooLarge, len(key)+len(value), s.maxValue)
	}
	s.c.Set(key, entry{val: clone(value), ttl: ttl})
	return nil
}

// Delete removes key; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	s.c.Invalidate(key)
	return nil
}

// GetMany returns copies of the values of keys, aligned with keys; misses
// are nil. Invalid keys are reported in a *store.BatchError.
func (s *Store) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	vals := make([][]byte, len(keys))
	be := store.BatchError{Op: "get"}
	for i, k := range keys {
		if err := store.CheckKey(k); err != nil {
			be.Add(k, err)
			continue
		}
		if e, ok := s.c.GetIfPresent(k); ok {
			vals[i] = clone(e.val)
		}
	}
	return vals, be.Err()
}

// SetMany stores copies of all items. Items with an invalid key, a
// negative TTL or an oversized value are reported in a *store.BatchError;
// the others are stored.
func (s *Store) SetMany(ctx context.Context, items []store.Item) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	be := store.BatchError{Op: "set"}
	for _, it := range items {
		if err := s.Set(ctx, it.Key, it.Value, it.TTL); err != nil {
			be.Add(it.Key, err)
		}
	}
	return be.Err()
}

// DeleteMany removes all keys; missing keys are not failures.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	be := store.BatchError{Op: "delete"}
	for _, k := range keys {
		if err := store.CheckKey(k); err != nil {
			be.Add(k, err)
			continue
		}
		s.c.Invalidate(k)
	}
	return be.Err()
}

// MaxValueSize returns the largest value the store accepts: one that,
// with its key, fits in MaxBytes.
func (s *Store) MaxValueSize() int { return s.maxValue }

// Len returns the approximate number of entries, expired ones included
// until they are cleaned up.
func (s *Store) Len() int { return s.c.EstimatedSize() }

// Bytes returns the weight of the entries held: keys, values and the
// per-entry overhead.
func (s *Store) Bytes() int64 { return int64(s.c.WeightedSize()) }

// Close drops every entry and stops the cache's clean-up goroutine. Later
// calls fail with an error matching store.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.c.InvalidateAll()
	s.c.StopAllGoroutines()
	return nil
}

func clone(b []byte) []byte {
	// Never nil: an empty value is a hit, and the caller tells hits from
	// misses by nil.
	return append(make([]byte, 0, len(b)), b...)
}
