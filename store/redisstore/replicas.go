package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// ReplicaReads sends reads to a replica (opt-in): in Sentinel mode to a
// replica the sentinels name, on a Redis Cluster to a replica of the
// slot's master (READONLY connections; a master without a replica serves
// its slots' reads itself). A standalone server has no replica to read
// from: its reads stay on it.
//
// What it costs in staleness: replication is asynchronous, so a replica
// may serve a value the primary has already deleted or replaced, for as
// long as it lags behind (on a healthy link, well under a millisecond;
// unbounded while the link is down, until the replica's repl-timeout).
//
//   - This process's own writes and invalidations: reads of a key go to
//     the primary for PrimaryWindow after this Store deleted, set or
//     filled it, so a process reads its own invalidation at once.
//   - Other processes' invalidations: an Invalidate that waited for the
//     replica (InvalidateWait, the default in Sentinel mode and on a
//     Cluster with replicas) has reached it when it returns, so with one
//     replica per master (or Replicas set to the number of replicas) a
//     read that begins after it never sees the old value. Without the
//     wait, the window is the replica's lag.
type ReplicaReads struct {
	// Enabled sends reads (GET, MGET, the reads of leases and of the
	// L1) to a replica. Writes, fills and invalidations always go to the
	// primary (the slot's master).
	Enabled bool
	// PrimaryWindow is how long this Store's reads of a key it deleted,
	// set or filled go to the primary. If zero,
	// DefaultPrimaryWindow; it should exceed the replica's usual lag.
	PrimaryWindow time.Duration
}

// DefaultPrimaryWindow is ReplicaReads.PrimaryWindow when left at zero.
const DefaultPrimaryWindow = time.Second

// recentKeys remembers the keys this Store wrote, until their window
// ends, so their reads go to the primary.
type recentKeys struct {
	window time.Duration
	n      atomic.Int64 // len(m), read without the lock
	mu     sync.Mutex
	m      map[string]int64 // key -> end of its window (UnixNano)
	purged int64
}

func (r *recentKeys) add(keys ...string) {
	if r == nil || len(keys) == 0 {
		return
	}
	now := time.Now().UnixNano()
	end := now + int64(r.window)
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]int64{}
	}
	for _, k := range keys {
		r.m[k] = end
	}
	if now-r.purged > int64(r.window) {
		for k, e := range r.m {
			if e < now {
				delete(r.m, k)
			}
		}
		r.purged = now
	}
	r.n.Store(int64(len(r.m)))
	r.mu.Unlock()
}

// has reports whether key is in its window.
func (r *recentKeys) has(key string) bool {
	if r.n.Load() == 0 {
		return false
	}
	r.mu.Lock()
	end, ok := r.m[key]
	r.mu.Unlock()
	return ok && end >= time.Now().UnixNano()
}

// configureReplicaReads sets rueidis's SendToReplicas for s.
func (s *Store) configureReplicaReads(co *rueidis.ClientOption, rr ReplicaReads) error {
	if !rr.Enabled {
		return nil
	}
	if rr.PrimaryWindow < 0 {
		return errors.New("redisstore: Options.ReadFromReplicas.PrimaryWindow is negative")
	}
	s.recent = &recentKeys{window: rr.PrimaryWindow}
	if s.recent.window == 0 {
		s.recent.window = DefaultPrimaryWindow
	}
	s.replicaSlots = new(slotReplicas)
	co.SendToReplicas = func(cmd rueidis.Completed) bool {
		if !s.toReplica(cmd) {
			return false
		}
		// Count only what a replica answers: rueidis sends the read to
		// the master when it knows no replica for it (a Cluster slot
		// map that lists none yet, a Sentinel set without a replica).
		if s.replicaOf(cmd.Slot()) != "" {
			s.replicaReads.Add(1)
		}
		return true
	}
	// The Cluster client asks for a replica per slot when it reads the
	// slot map: a random one (rueidis's own choice), noted for ServerOf.
	// Other clients do not ask. (ReadNodeSelector, which rueidis would
	// have us use instead, chooses per command, after a span has named
	// the server: ReplicaSelector's choice is known before the send.)
	//lint:ignore SA1019 the per-slot choice is what ServerOf reports
	co.ReplicaSelector = s.replicaSlots.pick
	return nil
}

// toReplica reports whether rueidis sends cmd to a replica: with replica
// reads on, a read-only command none of whose keys this Store wrote within
// the primary window (SendToReplicas, without counting).
func (s *Store) toReplica(cmd rueidis.Completed) bool {
	if s.recent == nil || !cmd.IsReadOnly() {
		return false
	}
	args := cmd.Commands()
	for _, k := range args[min(1, len(args)):] {
		if s.recent.has(k) {
			return false
		}
	}
	return true
}

// wrote marks keys as written by this Store: with replica reads on, their
// reads go to the primary for the window.
func (s *Store) wrote(keys ...string) {
	if s.recent != nil {
		s.recent.add(keys...)
	}
}

// primaryOf returns the address of the server that says it is the
// primary among the client's nodes (the primary and, with replica reads,
// a replica).
func primaryOf(ctx context.Context, cn *conn) string {
	nodes := cn.c.Nodes()
	if len(nodes) == 1 {
		for a := range nodes {
			return a
		}
	}
	for a, c := range nodes {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		role, err := c.Do(ctx, c.B().Role().Build()).ToArray()
		cancel()
		if err == nil && len(role) > 0 {
			if kind, _ := role[0].ToString(); kind == "master" {
				return a
			}
		}
	}
	return ""
}

// replicaRoute is how the stall guard tells the calls rueidis sends to a
// replica from the primary's: nil without replica reads.
func (s *Store) replicaRoute() func(rueidis.Completed) bool {
	if s.recent == nil {
		return nil
	}
	return s.toReplica
}
