package redisstore

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

var _ store.LeaseWaker = (*Store)(nil)

// WakeClientName is the CLIENT SETNAME of the lease path's push
// connections (one per server), so that an operator can tell them apart
// in CLIENT LIST.
const WakeClientName = "kura-lease-wake"

// errPushRefused: the server refused the push client for good.
var errPushRefused = errors.New("redisstore: the server refuses client tracking")

// wakeRetry is how long after a failed attempt to open the push client
// the next one may start: until it is up, waiters poll.
const wakeRetry = time.Second

// waker is the lease path's push client: a rueidis client of its own, one
// connection per server, with CLIENT TRACKING ON (default mode:
// the server tracks every key this connection reads, and only those).
// Lease waiters' reads go through it, so the server reports the next
// change of each key a waiter read: the holder's fill, an Invalidate, a
// release, the lease's expiry. It is opened on the first watched read,
// whatever Options.Tracking says, and shared by every Cache on the Store.
//
// Measured against keyspace notifications (BENCHMARKS.md, "Lease
// waiters woken by the server"): tracking needs no server configuration
// (notify-keyspace-events is server-wide and often locked on managed
// services) and costs the server work only for the keys someone waits
// for, where notifications cost every write of every client.
type waker struct {
	h     hub                  // the push client's reports
	c     atomic.Pointer[conn] // nil until opened
	busy  atomic.Bool          // an attempt to open c is running
	last  atomic.Int64         // unix nanos of the last failed attempt
	reads atomic.Uint64        // watched reads sent, for tests
}

// WatchLeases registers fn for the reports of the push client (see
// store.LeaseWaker).
func (s *Store) WatchLeases(fn func(keys []string)) func() { return s.wake.h.subscribe(fn) }

// WatchedLeaseGet is LeaseGet through the push client, so the server
// reports the next change of every key it read (see store.LeaseWaker).
// Until the push client is up (it is opened in the background on the
// first call) and for a Store from NewFromClient, which has no options to
// open one with, it is LeaseGet and watched is false.
func (s *Store) WatchedLeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, bool, error) {
	pc := s.pushConn()
	if pc == nil {
		res, err := s.LeaseGet(ctx, keys, opts)
		return res, false, err
	}
	if _, err := s.ready(ctx); err != nil {
		return nil, false, s.leaseReadErr(ctx, keys, err)
	}
	s.wake.reads.Add(1)
	res, err := s.leaseGet(ctx, pc, keys, opts)
	return res, true, err
}

// pushConn returns the push client, or nil while it is not open; then it
// starts opening it in the background, once the Store has connected.
func (s *Store) pushConn() *conn {
	if pc := s.wake.c.Load(); pc != nil {
		return pc
	}
	if !s.owned || s.cur.Load() == nil || s.closed.Load() {
		return nil
	}
	if last := s.wake.last.Load(); last == math.MaxInt64 || time.Since(time.Unix(0, last)) < wakeRetry || !s.wake.busy.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() { // under mu: Close waits for bg
		s.wake.busy.Store(false)
		return nil
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.wake.busy.Store(false)
		if err := s.openPush(); err != nil && !errors.Is(err, errPushRefused) {
			s.wake.last.Store(time.Now().UnixNano())
		}
	}()
	return nil
}

// openPush opens the push client with the Store's own connection options
// (credentials, TLS, Sentinel, the dialer), tracking in default mode
// without NOLOOP (the lease SET NX it sends must be reported to itself:
// Redis forgets a key's tracking when the key changes, and with NOLOOP it
// would do so silently, losing the report of the fill that follows), reads
// from the primary only, and one connection per server.
func (s *Store) openPush() error {
	co := s.co
	co.DisableCache = false
	co.NewCacheStoreFn = func(rueidis.CacheStoreOption) rueidis.CacheStore { return relay{h: &s.wake.h} }
	co.OnInvalidations = func([]rueidis.RedisMessage) {} // read pushes in the background from the start (see configureTracking)
	co.ClientTrackingOptions = []string{}
	//lint:ignore SA1019 cleared with SendToReplicas (rueidis refuses one without the other)
	co.SendToReplicas, co.ReplicaSelector = nil, nil
	co.ReplicaOnly = false
	co.PipelineMultiplex = -1
	co.ClientName = WakeClientName
	c, err := rueidis.NewClient(co)
	var refused *rueidis.RedisError
	if errors.Is(err, rueidis.ErrNoCache) || errors.As(err, &refused) {
		// A server without RESP3 (Redis before 6), or one that refuses
		// CLIENT TRACKING (an ACL user without it), never will: poll.
		s.wake.last.Store(math.MaxInt64)
		return errPushRefused
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		c.Close()
		return store.ErrClosed
	}
	s.wake.c.Store(newConn(c, nil)) // SendToReplicas is cleared: every call goes to the primary
	return nil
}

// closePush closes the push client; Close calls it after the background
// work ended.
func (s *Store) closePush() {
	if pc := s.wake.c.Load(); pc != nil {
		pc.c.Close()
	}
}

// LeaseWakeReports returns how many watched lease reads the Store sent,
// how many changed keys the server reported to the lease path, and how
// many "read everything again" events it passed on (the push connection
// broke, or the server was flushed).
func (s *Store) LeaseWakeReports() (reads, keys, flushes uint64) {
	return s.wake.reads.Load(), s.wake.h.reports.Load(), s.wake.h.flushes.Load()
}
