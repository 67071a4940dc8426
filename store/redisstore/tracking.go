package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

// Tracking configures server-assisted invalidation (Redis client-side
// caching, CLIENT TRACKING over RESP3), which kura's L1 tier
// (kura.Options.L1) needs on Redis: the server remembers which keys this
// client read through the L1 and pushes an invalidation when one changes
// (a write or delete from any client, expiry, eviction, FLUSHALL). The zero
// value is off. Requires Redis 6 or later (RESP3).
//
// Two modes, chosen by Prefixes:
//
//   - Default (no Prefixes): CLIENT TRACKING ON OPTIN. Only reads made for
//     the L1 are tracked; the server keeps, per key, the set of clients that
//     read it (its tracking table, bounded by tracking-table-max-keys; when
//     full the server evicts entries and invalidates them). Invalidations go
//     only to the clients that read the key. Choose it when each process
//     reads a small part of the key space, or writes are frequent.
//   - Broadcast (Prefixes set): CLIENT TRACKING ON BCAST PREFIX p ... The
//     server keeps no per-key state, only the prefix list per client, and
//     sends every change of a key under a prefix to every such client,
//     whether it read the key or not. Choose it when many processes read
//     the same large key space (the tracking table would hold keys x
//     clients) and writes under the prefixes are rare compared with reads:
//     it saves server memory at the cost of invalidation traffic
//     proportional to writes x clients. Keys outside the prefixes are never
//     reported, so the L1 does not keep them.
//
// Either way the client-side memory is kura's: rueidis's own per-connection
// cache (128 MiB per connection by default) is replaced by a store that
// holds nothing and only relays the server's reports, so the L1's byte
// bound is the whole client-side cache.
type Tracking struct {
	// Enabled turns tracking on.
	Enabled bool
	// Prefixes, when not empty, selects broadcast mode with these key
	// prefixes (see above). Prefixes must not overlap.
	Prefixes []string
}

// trackTTL is the client-side TTL handed to rueidis for tracked reads. The
// relay store keeps nothing, so it only has to be positive; the L1 applies
// its own bounds.
const trackTTL = time.Hour

// hub fans the invalidations of every connection out to the subscribers
// (one per kura Cache with an L1).
type hub struct {
	mu   sync.Mutex
	subs atomic.Pointer[[]*subscriber]
	// reports and flushes count what the server sent, for tests.
	reports, flushes atomic.Uint64
}

type subscriber struct{ fn func(keys []string) }

func (h *hub) subscribe(fn func(keys []string)) func() {
	s := &subscriber{fn: fn}
	h.mu.Lock()
	old := h.load()
	next := append(append(make([]*subscriber, 0, len(old)+1), old...), s)
	h.subs.Store(&next)
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		old := h.load()
		next := make([]*subscriber, 0, len(old))
		for _, o := range old {
			if o != s {
				next = append(next, o)
			}
		}
		h.subs.Store(&next)
	}
}

func (h *hub) load() []*subscriber {
	if p := h.subs.Load(); p != nil {
		return *p
	}
	return nil
}

func (h *hub) publish(keys []string) {
	for _, s := range h.load() {
		s.fn(keys)
	}
	// Counted after the subscribers ran: a test that sees the count knows
	// every L1 has handled the report.
	if keys == nil {
		h.flushes.Add(1)
	} else {
		h.reports.Add(uint64(len(keys)))
	}
}

// relay is the rueidis CacheStore of one connection. It caches nothing:
// every tracked read goes to the server (the L1 above answers the hits),
// and it passes the server's invalidations, and the loss of the
// connection, to the hub.
type relay struct{ h *hub }

var _ rueidis.CacheStore = relay{}

// Flight always misses, so rueidis sends the read.
func (relay) Flight(string, string, time.Duration, time.Time) (rueidis.RedisMessage, rueidis.CacheEntry) {
	return rueidis.RedisMessage{}, nil
}

// Update keeps nothing.
func (relay) Update(string, string, rueidis.RedisMessage) int64 { return 0 }

// Cancel has no waiters to release.
func (relay) Cancel(string, string, error) {}

// Delete passes an invalidation on: the keys, or nil for "everything".
func (r relay) Delete(keys []rueidis.RedisMessage) {
	if keys == nil {
		r.h.publish(nil)
		return
	}
	ks := make([]string, 0, len(keys))
	for i := range keys {
		if k, err := keys[i].ToString(); err == nil {
			ks = append(ks, k)
		}
	}
	r.h.publish(ks)
}

// Close runs when the connection breaks: reports may have been lost, so
// everything read through it must go.
func (r relay) Close(error) { r.h.publish(nil) }

// configureTracking sets the rueidis options for t.
func configureTracking(co *rueidis.ClientOption, t Tracking, h *hub) error {
	for _, p := range t.Prefixes {
		if p == "" {
			return errors.New("redisstore: Tracking.Prefixes holds an empty prefix (track everything by leaving Prefixes empty)")
		}
	}
	co.DisableCache = false
	co.NewCacheStoreFn = func(rueidis.CacheStoreOption) rueidis.CacheStore { return relay{h: h} }
	// The relay gets the reports; setting a callback as well makes rueidis
	// read every connection in the background from the start. Without it
	// a connection that has not pipelined yet reads the server's pushes
	// only with its next reply, so a report could wait indefinitely.
	co.OnInvalidations = func([]rueidis.RedisMessage) {}
	if len(t.Prefixes) == 0 {
		co.ClientTrackingOptions = []string{"OPTIN"}
		return nil
	}
	opts := []string{"BCAST"}
	for _, p := range t.Prefixes {
		opts = append(opts, "PREFIX", p)
	}
	co.ClientTrackingOptions = opts
	return nil
}

var _ store.Tracker = (*Store)(nil)

// Tracking reports whether the store was opened with Options.Tracking.
func (s *Store) Tracking() bool { return s.hub != nil }

// Tracks reports whether the server reports changes of key: always in
// default mode, only under one of the prefixes in broadcast mode.
func (s *Store) Tracks(key string) bool {
	if s.hub == nil {
		return false
	}
	if len(s.prefixes) == 0 {
		return true
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// Subscribe registers fn for the server's invalidations (see
// store.Tracker). Without tracking fn is never called.
func (s *Store) Subscribe(fn func(keys []string)) func() {
	if s.hub == nil {
		return func() {}
	}
	return s.hub.subscribe(fn)
}

// GetTracked reads key and asks the server to report its next change.
// Without tracking it is Get.
func (s *Store) GetTracked(ctx context.Context, key string) ([]byte, error) {
	if s.hub == nil {
		return s.Get(ctx, key)
	}
	cn, err := s.ready(ctx)
	if err != nil {
		return nil, err
	}
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	cmd := cn.c.B().Get().Key(key).Cache().ToStaticTTL()
	b, err := cn.c.DoCache(ctx, cmd, trackTTL).AsBytes()
	if err != nil {
		if rueidis.IsRedisNil(err) {
			return nil, store.ErrNotFound
		}
		return nil, s.wrapErr(s.addrOf(key), err)
	}
	return nonNil(b), nil
}

// GetManyTracked reads keys, one tracked GET each pipelined together (one
// round trip per server), and asks the server to report their next
// changes. Without tracking it is GetMany.
func (s *Store) GetManyTracked(ctx context.Context, keys []string) ([][]byte, error) {
	if s.hub == nil {
		return s.GetMany(ctx, keys)
	}
	cn, err := s.ready(ctx)
	if err != nil {
		return nil, err
	}
	vals := make([][]byte, len(keys))
	fails := failures{op: "get"}
	cmds := make([]rueidis.CacheableTTL, 0, len(keys))
	idx := make([]int, 0, len(keys))
	for i, k := range keys {
		if err := store.CheckKey(k); err != nil {
			fails.add(k, "", err)
			continue
		}
		cmds = append(cmds, rueidis.CT(cn.c.B().Get().Key(k).Cache().ToStaticTTL(), trackTTL))
		idx = append(idx, i)
	}
	if len(cmds) == 0 {
		return vals, fails.result(ctx)
	}
	for j, r := range cn.c.DoMultiCache(ctx, cmds...) {
		i := idx[j]
		b, err := r.AsBytes()
		switch {
		case err == nil:
			vals[i] = nonNil(b)
		case rueidis.IsRedisNil(err):
		default:
			addr := s.addrOf(keys[i])
			fails.add(keys[i], addr, s.keyErr(addr, err))
		}
	}
	return vals, fails.result(ctx)
}

// TrackingReports returns how many invalidated keys and how many "drop
// everything" events (a broken connection, FLUSHALL) the server's tracking
// has delivered so far.
func (s *Store) TrackingReports() (keys, flushes uint64) {
	if s.hub == nil {
		return 0, 0
	}
	return s.hub.reports.Load(), s.hub.flushes.Load()
}
