package redisstore

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

// Orphaned leases. A Fill or Release that never got its answer (the
// connection broke: the master was killed, a failover, a restart; or the
// caller's context ended) leaves the lease's placeholder in place, and a
// placeholder the old master had replicated survives on the promoted
// replica. Every reader of the key then finds it Held and waits for a
// fill that never comes (Cache LeaseWait each time, 2 s by default) until
// the lease expires (LeaseTTL, 10 s): measured on a Cluster master kill
// under 64 callers, no call completed in the second after the promotion.
// The Store releases such leases in the background once the server
// answers again. Release is conditional (the placeholder must still be
// this lease's), so releasing a lease whose fill did land, or that
// expired, changes nothing.

// orphanRetry is the pause between background release attempts, and
// orphanMaxAge how long a lease is tried (past any lease TTL kura uses
// by default: an expired lease needs no release).
const (
	orphanRetry  = 50 * time.Millisecond
	orphanMaxAge = 30 * time.Second
)

type orphan struct {
	lease store.Lease
	since time.Time
}

// unanswered reports an error after which the command's fate is unknown:
// not a reply from Redis (a broken connection, a timeout, a cancelled
// context).
func unanswered(err error) bool {
	if err == nil || rueidis.IsRedisNil(err) {
		return false
	}
	_, answered := rueidis.IsRedisErr(err)
	return !answered
}

// adopt queues leases for release in the background.
func (s *Store) adopt(leases ...store.Lease) {
	if len(leases) == 0 {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return
	}
	for _, l := range leases {
		// The token may be the caller's buffer.
		l.Token = append([]byte(nil), l.Token...)
		s.orphans = append(s.orphans, orphan{lease: l, since: now})
	}
	if !s.releasing {
		s.releasing = true
		s.bg.Add(1)
		go s.releaseOrphans()
	}
}

// releaseOrphans releases the queued leases until none is left, the
// Store is closed, or a lease has been tried for orphanMaxAge.
func (s *Store) releaseOrphans() {
	defer s.bg.Done()
	t := time.NewTicker(orphanRetry)
	defer t.Stop()
	for {
		select {
		case <-s.bgCtx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		batch := s.orphans
		s.orphans = nil
		s.mu.Unlock()
		var again []orphan
		if cn := s.cur.Load(); cn == nil {
			for _, o := range batch {
				if time.Since(o.since) < orphanMaxAge {
					again = append(again, o)
				}
			}
		} else if len(batch) > 0 {
			execs := make([]rueidis.LuaExec, len(batch))
			for i, o := range batch {
				execs[i] = rueidis.LuaExec{Keys: []string{o.lease.Key}, Args: []string{string(o.lease.Token)}}
			}
			ctx, cancel := context.WithTimeout(s.bgCtx, time.Second)
			for i, r := range releaseScript.execMulti(ctx, cn.c, execs) {
				if err := r.Error(); err != nil && time.Since(batch[i].since) < orphanMaxAge {
					again = append(again, batch[i])
				} else if err == nil {
					s.orphansReleased.Add(1)
				}
			}
			cancel()
		}
		s.mu.Lock()
		s.orphans = append(again, s.orphans...)
		if len(s.orphans) == 0 {
			s.releasing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}
