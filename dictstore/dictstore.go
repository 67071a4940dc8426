// Package dictstore distributes compression dictionaries through the cache
// servers themselves, so that a reader decodes values written with a
// dictionary it has never seen.
//
// A writer publishes a dictionary (trained by `kura codecs` or
// codec.TrainContentDictionary) under a reserved key on every server: on
// each master of a Redis Cluster, on each memcached server of a pool (see
// [NodeKeyer]), on the one server otherwise. A reader's codec.Codec asks
// the [Registry] (its codec.Options.DictionarySource) for an id it meets
// in a value and does not hold; the Registry reads the reserved keys once,
// checks that the bytes hash to the id and to the digest the value
// carries (codec.DictDigest: a forged dictionary is never used for such a
// value), and keeps the dictionary in process.
// A lookup waits at most Options.FetchTimeout, and an id that could not be
// found is answered "unknown" for Options.NegativeTTL without asking the
// servers again: the value is a miss, never a crash or a stall.
//
// Caches evict, and a dictionary is read rarely (each reader reads it
// once), so it is among the first keys an LRU drops. Writers keep what
// they published there: [Registry.Republish] checks every node key and
// writes back what is missing; [Registry.Run] does it periodically.
//
// The package holds no global state. A lookup runs on a goroutine of its
// own, bounded by Options.FetchTimeout, so that every caller waits only as
// long as its own context allows.
//
// Hostile keys: anybody who can write to the servers can write the
// reserved keys. A value that names its dictionary's digest (every value
// written by this version) is decoded only with the bytes of that digest,
// so a forged dictionary changes no value; a key larger than
// Options.MaxSize is never read past it (Redis, memcached).
package dictstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// NodeKeyer is implemented by stores with several servers: NodeKeys
// returns variants of key that the store places one on each server
// (redisstore: one per Cluster master; memcache: one per pool server).
// A store without it gets key alone.
type NodeKeyer interface {
	NodeKeys(ctx context.Context, key string) ([]string, error)
}

// Defaults for the zero Options.
const (
	DefaultKeyPrefix       = "kura:dict:"
	DefaultFetchTimeout    = time.Second
	DefaultNegativeTTL     = 5 * time.Second
	DefaultMaxDictionaries = 32
	DefaultMaxSize         = 1 << 20
	DefaultCheckInterval   = 30 * time.Second
	DefaultRecheck         = time.Minute
)

// ErrNotPublished is matched by the error for a dictionary id no server
// holds (or holds only with bytes of another content). It matches
// codec.ErrUnknownDictionary too, so a Codec treats the value as a miss.
var ErrNotPublished = fmt.Errorf("%w: not published on any server", codec.ErrUnknownDictionary)

// Options configures a Registry. Only Store is required.
type Options struct {
	// Store is where dictionaries are published and looked up. It may be
	// the Store the Cache uses.
	Store store.Store

	// SchemaKeyPrefix starts the reserved keys of published schemas
	// (PublishSchema); the fingerprint follows in 8 hex digits. If
	// empty, it defaults to DefaultSchemaKeyPrefix ("kura:schema:").
	SchemaKeyPrefix string

	// KeyPrefix starts every reserved key; the id follows in 8 hex
	// digits. If empty, it defaults to DefaultKeyPrefix ("kura:dict:").
	KeyPrefix string

	// FetchTimeout bounds the lookup of an id the Registry does not hold
	// (every goroutine waiting for that lookup waits at most this long).
	// If 0, it defaults to DefaultFetchTimeout (1s).
	FetchTimeout time.Duration

	// NegativeTTL is how long an id that could not be found, or was found
	// with bytes that do not hash to it, is answered as unknown without
	// asking the servers again. If 0, it defaults to DefaultNegativeTTL
	// (5s); negative disables the negative cache.
	NegativeTTL time.Duration

	// MaxDictionaries bounds the dictionaries fetched from the servers
	// that the Registry keeps in process; the least recently used goes
	// first. Dictionaries given to Publish or Hold are kept regardless.
	// If 0, it defaults to DefaultMaxDictionaries (32).
	MaxDictionaries int

	// MaxSize is the largest dictionary accepted from a server, in
	// bytes. If 0, it defaults to DefaultMaxSize (1 MiB).
	MaxSize int

	// CheckInterval is the period of Run's re-publishing. If 0, it
	// defaults to DefaultCheckInterval (30s).
	CheckInterval time.Duration

	// Recheck bounds how long a dictionary read from the servers is
	// trusted for values that carry no digest (written before digests)
	// before the servers are read again: if they now hold other bytes
	// with the same id, the id is refused for such values from then on
	// (Stats.Conflicts). Values with a digest are matched against it on
	// every lookup. If 0, it defaults to DefaultRecheck (1 minute); if
	// negative, a held dictionary is never re-read.
	Recheck time.Duration
}

// Stats counts what a Registry did. Counters only grow.
type Stats struct {
	// Lookups counts lookups that asked the servers; LookupFailures
	// those that found nothing usable (not published, store error,
	// timeout, wrong bytes).
	Lookups, LookupFailures uint64
	// NegativeHits counts lookups answered "unknown" from the negative
	// cache without asking the servers.
	NegativeHits uint64
	// Mismatches counts dictionaries found on a server whose bytes do not
	// hash to their id (corruption or tampering); they are never used.
	Mismatches uint64
	// Republished counts node keys Republish wrote back after finding
	// them missing (evicted) or wrong.
	Republished uint64
	// Conflicts counts ids for which two different contents were found
	// (a held dictionary and other bytes on a server, or two servers):
	// a forgery of the 28-bit id, or a genuine collision. Such an id is
	// refused for values without a digest.
	Conflicts uint64
	// Held is the number of dictionaries in process now.
	Held int
}

// Registry publishes dictionaries and finds them by id. It implements
// codec.DictionarySource. It is safe for concurrent use.
type Registry struct {
	opts Options

	mu        sync.Mutex
	dicts     map[uint32]*held
	clock     uint64
	fetched   int
	negative  map[lookupKey]time.Time
	flights   map[lookupKey]*flight
	conflicts map[uint32]bool
	published []uint32

	schemas    map[uint32]*heldSchema
	schemaNeg  map[uint32]time.Time
	pubSchemas []uint32

	lookups, failures, negHits, mismatches, republished, conflicted atomic.Uint64
}

// lookupKey names a lookup: an id, and the digest the value carries (zero
// for values without one).
type lookupKey struct {
	id     uint32
	digest codec.DictDigest
}

var (
	_ codec.DictionarySource = (*Registry)(nil)
	_ codec.DigestSource     = (*Registry)(nil)
	_ codec.ContextSource    = (*Registry)(nil)
)

type held struct {
	d       []byte
	digest  codec.DictDigest
	pinned  bool // given to Publish or Hold
	used    uint64
	checked time.Time // when the servers last vouched for d (fetched ones)
}

type flight struct {
	done chan struct{}
	d    []byte
	err  error
}

// New returns a Registry for opts, or an error naming the invalid field.
func New(opts Options) (*Registry, error) {
	if opts.Store == nil {
		return nil, errors.New("kura: dictstore: Options.Store is nil")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"FetchTimeout", int64(opts.FetchTimeout)}, {"MaxDictionaries", int64(opts.MaxDictionaries)},
		{"MaxSize", int64(opts.MaxSize)}, {"CheckInterval", int64(opts.CheckInterval)}} {
		if f.v < 0 {
			return nil, fmt.Errorf("kura: dictstore: Options.%s is negative (%d)", f.name, f.v)
		}
	}
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = DefaultKeyPrefix
	}
	if opts.SchemaKeyPrefix == "" {
		opts.SchemaKeyPrefix = DefaultSchemaKeyPrefix
	}
	if opts.FetchTimeout == 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.NegativeTTL == 0 {
		opts.NegativeTTL = DefaultNegativeTTL
	}
	if opts.MaxDictionaries == 0 {
		opts.MaxDictionaries = DefaultMaxDictionaries
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.CheckInterval == 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.Recheck == 0 {
		opts.Recheck = DefaultRecheck
	}
	return &Registry{
		opts:      opts,
		dicts:     map[uint32]*held{},
		negative:  map[lookupKey]time.Time{},
		flights:   map[lookupKey]*flight{},
		conflicts: map[uint32]bool{},
		schemas:   map[uint32]*heldSchema{},
		schemaNeg: map[uint32]time.Time{},
	}, nil
}

// Key returns the reserved key of dictionary id (before NodeKeys spreads
// it over the servers).
func (r *Registry) Key(id uint32) string {
	return fmt.Sprintf("%s%08x", r.opts.KeyPrefix, id)
}

// nodeKeys returns the keys id is published under.
func (r *Registry) nodeKeys(ctx context.Context, id uint32) ([]string, error) {
	return r.nodeKeysOf(ctx, r.Key(id))
}

// nodeKeysOf returns the keys a reserved key is published under.
func (r *Registry) nodeKeysOf(ctx context.Context, key string) ([]string, error) {
	if nk, ok := store.Find[NodeKeyer](r.opts.Store); ok {
		keys, err := nk.NodeKeys(ctx, key)
		if err != nil {
			return nil, err
		}
		if len(keys) > 0 {
			return keys, nil
		}
	}
	return []string{key}, nil
}

// Hold keeps dictionary d in process under its content id, without
// publishing it: for dictionaries shipped with the program (a file,
// embedded bytes). It returns the id.
func (r *Registry) Hold(d []byte) (uint32, error) {
	if len(d) == 0 {
		return 0, errors.New("kura: dictstore: Hold: empty dictionary")
	}
	if len(d) > r.opts.MaxSize {
		return 0, fmt.Errorf("kura: dictstore: Hold: %d-byte dictionary, over Options.MaxSize (%d)", len(d), r.opts.MaxSize)
	}
	id := codec.DictionaryID(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holdLocked(id, slices.Clone(d), true)
	for k := range r.negative {
		if k.id == id {
			delete(r.negative, k)
		}
	}
	return id, nil
}

func (r *Registry) holdLocked(id uint32, d []byte, pinned bool) {
	r.clock++
	digest := codec.DigestOf(d)
	if h, ok := r.dicts[id]; ok {
		if h.digest == digest {
			h.used = r.clock
			h.checked = time.Now()
			if pinned && !h.pinned {
				h.pinned = true
				r.fetched--
			}
			return
		}
		if h.pinned && !pinned {
			return // what this process publishes or ships wins
		}
		// Other bytes under the same id: two contents exist, so the id
		// alone no longer says which one a value was written with.
		r.conflictLocked(id)
		delete(r.dicts, id)
		if !h.pinned {
			r.fetched--
		}
	}
	r.dicts[id] = &held{d: d, digest: digest, pinned: pinned, used: r.clock, checked: time.Now()}
	if pinned {
		return
	}
	r.fetched++
	for r.fetched > r.opts.MaxDictionaries {
		var oldest uint32
		var at uint64
		found := false
		for id, h := range r.dicts {
			if !h.pinned && (!found || h.used < at) {
				oldest, at, found = id, h.used, true
			}
		}
		if !found {
			break
		}
		delete(r.dicts, oldest)
		r.fetched--
	}
}

// Publish writes dictionary d under its reserved key on every server,
// holds it, and keeps it published: Republish (and Run) write it back
// wherever it was evicted. It returns the content id. A key already
// holding other bytes (an id collision, or corruption) is overwritten:
// the content decides what an id means. Publishing is idempotent.
func (r *Registry) Publish(ctx context.Context, d []byte) (uint32, error) {
	id, err := r.Hold(d)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	if !slices.Contains(r.published, id) {
		r.published = append(r.published, id)
	}
	r.mu.Unlock()
	keys, err := r.nodeKeys(ctx, id)
	if err != nil {
		return id, fmt.Errorf("kura: dictstore: publish %08x: %w", id, err)
	}
	items := make([]store.Item, len(keys))
	for i, k := range keys {
		items[i] = store.Item{Key: k, Value: d}
	}
	if err := store.SetMany(ctx, r.opts.Store, items); err != nil {
		return id, fmt.Errorf("kura: dictstore: publish %08x on %d server(s): %w", id, len(keys), err)
	}
	return id, nil
}

// Retire stops keeping dictionary id published (after a rotation, once
// no live value uses it any more). The keys stay until the servers evict
// them or Delete removes them; the Registry still holds the bytes.
func (r *Registry) Retire(id uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.published = slices.DeleteFunc(r.published, func(p uint32) bool { return p == id })
}

// Delete removes dictionary id's keys from every server and retires it.
// Readers that hold it keep it; readers that do not will miss values that
// use it.
func (r *Registry) Delete(ctx context.Context, id uint32) error {
	r.Retire(id)
	keys, err := r.nodeKeys(ctx, id)
	if err != nil {
		return fmt.Errorf("kura: dictstore: delete %08x: %w", id, err)
	}
	if err := store.DeleteMany(ctx, r.opts.Store, keys); err != nil {
		return fmt.Errorf("kura: dictstore: delete %08x: %w", id, err)
	}
	return nil
}

// Published returns the ids this Registry keeps published.
func (r *Registry) Published() []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.published)
}

// Republish checks every node key of every dictionary and schema this
// Registry published and writes back those that are missing (evicted, or lost with
// a restarted server) or hold other bytes. It returns how many keys it
// wrote. Its reads also count as use for the servers' LRU, which keeps a
// dictionary that is checked often from being evicted first.
func (r *Registry) Republish(ctx context.Context) (int, error) {
	r.mu.Lock()
	type pub struct {
		what, key string
		d         []byte
	}
	var pubs []pub
	for _, id := range r.published {
		if h, ok := r.dicts[id]; ok {
			pubs = append(pubs, pub{fmt.Sprintf("dictionary %08x", id), r.Key(id), h.d})
		}
	}
	for _, fp := range r.pubSchemas {
		if h, ok := r.schemas[fp]; ok {
			pubs = append(pubs, pub{fmt.Sprintf("schema %08x", fp), r.SchemaKey(fp), []byte(h.desc)})
		}
	}
	r.mu.Unlock()
	var errs []error
	wrote := 0
	for _, p := range pubs {
		keys, err := r.nodeKeysOf(ctx, p.key)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.what, err))
			continue
		}
		vals, _, err := r.getBounded(ctx, keys) // a hostile key is not read whole
		if err != nil && !isBatchErr(err) {
			errs = append(errs, fmt.Errorf("%s: %w", p.what, err))
			continue
		}
		var items []store.Item
		for i, k := range keys {
			if vals == nil || string(vals[i]) != string(p.d) {
				items = append(items, store.Item{Key: k, Value: p.d})
			}
		}
		if len(items) == 0 {
			continue
		}
		if err := store.SetMany(ctx, r.opts.Store, items); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.what, err))
			if be := (*store.BatchError)(nil); errors.As(err, &be) {
				n := len(items) - len(be.Failed())
				wrote += n
				r.republished.Add(uint64(n))
			}
			continue
		}
		wrote += len(items)
		r.republished.Add(uint64(len(items)))
	}
	if len(errs) > 0 {
		return wrote, fmt.Errorf("kura: dictstore: republish: %w", errors.Join(errs...))
	}
	return wrote, nil
}

func isBatchErr(err error) bool {
	var be *store.BatchError
	return errors.As(err, &be)
}

// Run calls Republish every Options.CheckInterval until ctx is done, and
// returns ctx's error. Republish failures are retried at the next tick;
// pass onError to see them (nil ignores them).
func (r *Registry) Run(ctx context.Context, onError func(error)) error {
	t := time.NewTicker(r.opts.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if _, err := r.Republish(ctx); err != nil && onError != nil && ctx.Err() == nil {
				onError(err)
			}
		}
	}
}

// Dictionary returns the dictionary with content id id, for a value that
// carries no digest: from process memory, or read from the servers (one
// lookup per id at a time, bounded by Options.FetchTimeout, failures
// remembered for Options.NegativeTTL), and read again after
// Options.Recheck. An id for which two contents were seen is refused
// (codec.ErrDictionaryMismatch) unless this process published or holds
// it. Errors match codec.ErrUnknownDictionary. It implements
// codec.DictionarySource.
func (r *Registry) Dictionary(id uint32) ([]byte, error) {
	return r.DictionaryContext(context.Background(), id, codec.DictDigest{})
}

// DictionaryDigest returns the bytes of dictionary id whose digest is
// digest: the held ones if they match, otherwise read from the servers
// (a held dictionary of another digest is never returned). It implements
// codec.DigestSource.
func (r *Registry) DictionaryDigest(id uint32, digest codec.DictDigest) ([]byte, error) {
	return r.DictionaryContext(context.Background(), id, digest)
}

// DictionaryContext is Dictionary (zero digest) or DictionaryDigest that
// returns when ctx is done: the caller waits at most until its deadline
// (a Fetch's budget), while the lookup itself goes on, bounded by
// Options.FetchTimeout, for the callers that can wait. It implements
// codec.ContextSource.
func (r *Registry) DictionaryContext(ctx context.Context, id uint32, digest codec.DictDigest) ([]byte, error) {
	key := lookupKey{id, digest}
	now := time.Now()
	r.mu.Lock()
	if h, ok := r.dicts[id]; ok {
		r.clock++
		h.used = r.clock
		switch {
		case !digest.IsZero() && h.digest == digest:
			r.mu.Unlock()
			return h.d, nil
		case digest.IsZero() && h.pinned:
			r.mu.Unlock()
			return h.d, nil
		case digest.IsZero() && r.conflicts[id]:
			// Refused below.
		case digest.IsZero() && (r.opts.Recheck < 0 || now.Sub(h.checked) < r.opts.Recheck):
			r.mu.Unlock()
			return h.d, nil
		}
		// A digest the held bytes do not have, or a re-check is due.
	}
	if digest.IsZero() && r.conflicts[id] {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: dictionary %08x: two contents share this id; values without a digest that name it are refused", codec.ErrDictionaryMismatch, id)
	}
	if until, ok := r.negative[key]; ok {
		if now.Before(until) {
			r.mu.Unlock()
			r.negHits.Add(1)
			return nil, fmt.Errorf("%w: dictionary %08x (looked up recently)", ErrNotPublished, id)
		}
		delete(r.negative, key)
	}
	f, ok := r.flights[key]
	if !ok {
		f = &flight{done: make(chan struct{})}
		r.flights[key] = f
		// The lookup runs on its own goroutine, bounded by FetchTimeout,
		// so that a caller with a shorter deadline can leave without
		// cancelling it for the others.
		go r.fetch(key, f)
	}
	r.mu.Unlock()
	select {
	case <-f.done:
		return f.d, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: dictionary %08x: %w", codec.ErrUnknownDictionary, id, ctx.Err())
	}
}

// fetch reads id's node keys and settles the flight.
func (r *Registry) fetch(key lookupKey, f *flight) {
	r.lookups.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.FetchTimeout)
	defer cancel()
	d, err := r.read(ctx, key)
	r.mu.Lock()
	delete(r.flights, key)
	if err != nil {
		if h, ok := r.dicts[key.id]; ok && key.digest.IsZero() && !errors.Is(err, codec.ErrDictionaryMismatch) {
			// A re-check that found nothing (evicted, a store error):
			// nothing contradicts the held bytes. Keep them; ask again
			// after another Recheck.
			h.checked = time.Now()
			d, err = h.d, nil
		} else {
			r.failures.Add(1)
			if r.opts.NegativeTTL > 0 {
				r.negative[key] = time.Now().Add(r.opts.NegativeTTL)
				if len(r.negative) > 4096 {
					r.pruneNegativeLocked()
				}
			}
		}
	} else {
		r.holdLocked(key.id, d, false)
		if key.digest.IsZero() && r.conflicts[key.id] {
			d, err = nil, fmt.Errorf("%w: dictionary %08x: the servers hold other bytes than this process held under this id", codec.ErrDictionaryMismatch, key.id)
		}
	}
	r.mu.Unlock()
	f.d, f.err = d, err
	close(f.done)
}

// conflictLocked records that two contents were seen under id.
func (r *Registry) conflictLocked(id uint32) {
	if !r.conflicts[id] {
		r.conflicts[id] = true
		r.conflicted.Add(1)
	}
}

func (r *Registry) pruneNegativeLocked() {
	now := time.Now()
	for k, until := range r.negative {
		if now.After(until) {
			delete(r.negative, k)
		}
	}
}

// read returns the first node key's bytes that hash to the id (and to
// the digest, when the lookup has one). No key is read past
// Options.MaxSize bytes when the store can read a prefix
// (store.PrefixReader: Redis GETRANGE, memcached's size check); others
// are read whole and refused above it.
func (r *Registry) read(ctx context.Context, key lookupKey) ([]byte, error) {
	id := key.id
	keys, err := r.nodeKeys(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%w: dictionary %08x: %w", codec.ErrUnknownDictionary, id, err)
	}
	vals, oversize, err := r.getBounded(ctx, keys)
	if err != nil && !isBatchErr(err) {
		return nil, fmt.Errorf("%w: dictionary %08x: %w", codec.ErrUnknownDictionary, id, err)
	}
	mismatch := oversize
	var found []byte
	for _, v := range vals {
		if v == nil {
			continue
		}
		if len(v) > r.opts.MaxSize || codec.CheckDictionaryDigest(id, key.digest, v) != nil {
			mismatch = true
			continue
		}
		if found == nil {
			found = v
		} else if string(found) != string(v) {
			// Two servers hold two contents that both hash to the id.
			r.mu.Lock()
			r.conflictLocked(id)
			r.mu.Unlock()
		}
	}
	if found != nil {
		return found, nil
	}
	if mismatch {
		r.mismatches.Add(1)
		return nil, fmt.Errorf("%w: dictionary %08x: %w", ErrNotPublished, id, codec.ErrDictionaryMismatch)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: dictionary %08x: %w", ErrNotPublished, id, err)
	}
	return nil, fmt.Errorf("%w: dictionary %08x on %d key(s)", ErrNotPublished, id, len(keys))
}

// getBounded reads keys, none past MaxSize+1 bytes when the store can
// read a prefix; oversize reports a key larger than MaxSize (left nil).
func (r *Registry) getBounded(ctx context.Context, keys []string) (vals [][]byte, oversize bool, err error) {
	pr, ok := store.Find[store.PrefixReader](r.opts.Store)
	if !ok {
		vals, err = store.GetMany(ctx, r.opts.Store, keys)
		return vals, false, err
	}
	vals = make([][]byte, len(keys))
	failed := 0
	for i, k := range keys {
		b, size, gerr := pr.GetPrefix(ctx, k, r.opts.MaxSize+1)
		switch {
		case errors.Is(gerr, store.ErrNotFound):
		case gerr != nil:
			failed++
			if err == nil {
				err = gerr
			}
		case size > int64(r.opts.MaxSize):
			oversize = true
		default:
			vals[i] = b
		}
		if ctx.Err() != nil {
			break
		}
	}
	if failed > 0 && failed < len(keys) {
		err = nil // the other keys answered
	}
	return vals, oversize, err
}

// Stats returns a snapshot of the counters.
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	n := len(r.dicts)
	r.mu.Unlock()
	return Stats{
		Lookups: r.lookups.Load(), LookupFailures: r.failures.Load(), NegativeHits: r.negHits.Load(),
		Mismatches: r.mismatches.Load(), Republished: r.republished.Load(), Conflicts: r.conflicted.Load(), Held: n,
	}
}
