package redisstore

import (
	"context"
	"time"

	hashslot "github.com/kuracache/kura/internal/slot"
	"github.com/kuracache/kura/internal/wire"
)

// numSlots is the number of hash slots of a Redis Cluster.
const numSlots = hashslot.Count

// slotMap is a cluster's slot ownership as CLUSTER SLOTS last reported
// it. It serves error messages (KeyError.Addr) and the default of the
// Invalidate wait (whether a slot's master has replicas): rueidis routes
// the commands and follows MOVED itself, so a stale map costs the
// precision of a message, or one WAIT answered by ROLE.
type slotMap struct {
	addr [numSlots]string
	// replicas is how many replicas the slot's master has (the Invalidate
	// wait's default, wait.go).
	replicas [numSlots]uint8
	at       time.Time
}

// addrOf returns the address of the server that holds key: the server on
// a standalone store, the slot's master on a cluster ("" when unknown).
func (s *Store) addrOf(key string) string {
	cn := s.cur.Load()
	if cn == nil || !cn.cluster {
		return s.standaloneAddr(cn)
	}
	return s.addrOfSlot(hashslot.Of(key))
}

// standaloneAddr is the server of a standalone store, or the first seed
// while the store has not connected (its mode is not known yet).
func (s *Store) standaloneAddr(cn *conn) string {
	if s.masterSet != "" {
		// The primary moves on a failover; the master set is what the
		// Store talks to.
		return SentinelNode(s.masterSet)
	}
	if cn != nil {
		return cn.addr
	}
	if len(s.seeds) > 0 {
		return s.seeds[0]
	}
	return ""
}

func (s *Store) addrOfSlot(sl uint16) string {
	cn := s.cur.Load()
	if cn == nil || !cn.cluster {
		return s.standaloneAddr(cn)
	}
	m := s.slots.Load()
	if m == nil || time.Since(m.at) > time.Second {
		s.refreshSlotsAsync()
	}
	if m == nil {
		return ""
	}
	return m.addr[sl]
}

// refreshSlotsAsync reloads the slot map in the background, one refresh at
// a time. It is called on error paths only, so a failing batch is never
// slowed down by the question "where did this key live?".
func (s *Store) refreshSlotsAsync() {
	if !s.refreshing.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		s.refreshing.Store(false)
		return
	}
	s.bg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.bg.Done()
		defer s.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(s.bgCtx, 2*time.Second)
		defer cancel()
		if cn := s.cur.Load(); cn != nil {
			s.refreshSlots(ctx, cn)
		}
	}()
}

// refreshSlots asks the cluster for its slot map. On failure the old map
// stays.
func (s *Store) refreshSlots(ctx context.Context, cn *conn) {
	reply, err := cn.c.Do(ctx, cn.c.B().ClusterSlots().Build()).ToAny()
	if err != nil {
		return
	}
	ranges, err := wire.ParseSlots(reply, "")
	if err != nil {
		return
	}
	m := &slotMap{at: time.Now()}
	for _, r := range ranges {
		reps := uint8(min(r.Replicas, 255))
		for i := r.First; i <= r.Last; i++ {
			m.addr[i], m.replicas[i] = r.Master, reps
		}
	}
	s.slots.Store(m)
	if cn.guard != nil {
		cn.guard.update(m)
	}
}
