package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

// Sentinel selects a primary/replica pair (or group) managed by Redis
// Sentinel: Options.Addrs are then the sentinels' addresses, and the Store
// sends every command to the primary they name, following them to the new
// primary when they promote a replica (their +switch-master event, and a
// periodic check in case the event is missed). The zero value (no
// MasterSet) is off.
//
// A failover is seen by the Store as the connection to the old primary
// breaking: requests fail until the sentinels have promoted a replica (a
// kura Cache serves them from its loader meanwhile), the L1 is flushed
// when Options.Tracking is on (the old primary's reports are gone), and
// invalidations wait for a replica (Options.InvalidateWait) so that one
// acknowledged by the old primary is not lost with it.
type Sentinel struct {
	// MasterSet is the name the sentinels monitor ("sentinel monitor
	// <name> ..."). Setting it turns Sentinel mode on.
	MasterSet string
	// Username and Password authenticate to the sentinels, separately from
	// Options.Username and Options.Password, which authenticate to the
	// data servers. Empty: the sentinels need no password.
	Username, Password string
	// TLS, when set, connects to the sentinels with TLS; Options.TLS
	// covers the data servers. NewFromURL uses the URL's scheme for both
	// (rediss+sentinel://).
	TLS *tls.Config
	// RefreshInterval is how often the Store asks the sentinels for the
	// primary besides reacting to their events. If zero, it defaults to
	// DefaultSentinelRefresh; negative turns the check off.
	RefreshInterval time.Duration
}

// DefaultSentinelRefresh is Sentinel.RefreshInterval when left at zero.
const DefaultSentinelRefresh = 5 * time.Second

// InvalidateWait makes an invalidation wait until replicas have it
// (Redis's WAIT), so that a failover right after Invalidate returns does
// not bring the old value back: replication is asynchronous, and a DEL
// acknowledged by a primary that dies before its replica received it is
// lost when the replica is promoted.
type InvalidateWait struct {
	// Replicas is how many replicas must acknowledge an invalidation. If
	// zero, it is 1 in Sentinel mode and 0 (no wait) otherwise; negative
	// turns waiting off. Invalidate fails with an error matching
	// ErrNotReplicated when fewer acknowledge within Timeout: the keys
	// were deleted on the primary, but a failover now could bring them
	// back. Only replicas connected to the primary are waited for (ROLE):
	// after a failover that left no replica, Invalidate does not fail;
	// a replica whose link was down when the DEL ran gets it when it
	// reconnects, unless it is promoted first (Redis's
	// min-replicas-to-write on the primary closes that case).
	Replicas int
	// Timeout bounds the wait. If zero, DefaultInvalidateWaitTimeout.
	Timeout time.Duration
}

// DefaultInvalidateWaitTimeout is InvalidateWait.Timeout when left at zero.
const DefaultInvalidateWaitTimeout = time.Second

// ErrNotReplicated reports an invalidation the primary applied but fewer
// replicas than InvalidateWait.Replicas acknowledged in time.
var ErrNotReplicated = errors.New("kura: invalidation not acknowledged by a replica in time")

// configureSentinel sets the rueidis options of Sentinel mode.
func configureSentinel(co *rueidis.ClientOption, sn Sentinel) error {
	if sn.MasterSet == "" {
		if sn.Username != "" || sn.Password != "" || sn.TLS != nil {
			return errors.New("redisstore: Options.Sentinel has credentials or TLS but no MasterSet")
		}
		return nil
	}
	co.Sentinel = rueidis.SentinelOption{
		MasterSet: sn.MasterSet,
		Username:  sn.Username,
		Password:  sn.Password,
		TLSConfig: sn.TLS,
		Dialer:    co.Dialer,
	}
	switch {
	case sn.RefreshInterval == 0:
		co.Sentinel.TopologyRefreshInterval = DefaultSentinelRefresh
	case sn.RefreshInterval > 0:
		co.Sentinel.TopologyRefreshInterval = sn.RefreshInterval
	}
	return nil
}

// waitPolicy resolves InvalidateWait's zero values.
func waitPolicy(w InvalidateWait, sentinel bool) (replicas int, timeout time.Duration, err error) {
	if w.Timeout < 0 {
		return 0, 0, errors.New("redisstore: Options.InvalidateWait.Timeout is negative")
	}
	replicas = w.Replicas
	if replicas == 0 && sentinel {
		replicas = 1
	}
	if replicas < 0 {
		replicas = 0
	}
	timeout = w.Timeout
	if timeout == 0 {
		timeout = DefaultInvalidateWaitTimeout
	}
	return replicas, max(timeout, time.Millisecond), nil
}

// deleteAndWait deletes keys on the primary and waits (WAIT) until
// s.waitReplicas replicas have the deletion. DEL and WAIT go together on
// a connection of their own (rueidis sends a batch holding a blocking
// command on a dedicated connection), so the wait never holds up other
// callers' pipelined reads, and WAIT covers this DEL.
func (s *Store) deleteAndWait(ctx context.Context, cn *conn, keys []string) error {
	for _, k := range keys {
		if err := store.CheckKey(k); err != nil {
			return err
		}
	}
	if len(keys) == 0 {
		return nil
	}
	s.wrote(keys...)
	res := cn.c.DoMulti(ctx,
		cn.c.B().Del().Key(keys...).Build(),
		cn.c.B().Wait().Numreplicas(int64(s.waitReplicas)).Timeout(s.waitTimeout.Milliseconds()).Build())
	addr := s.addrOf(keys[0])
	if err := res[0].Error(); err != nil {
		return s.wrapErr(addr, err)
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return s.wrapErr(addr, err)
	}
	if n < int64(s.waitReplicas) {
		// A primary with fewer replicas connected than asked for (the
		// one replica was just promoted, and its old primary has not come
		// back yet) has nothing more to wait for: every replica that is
		// connected has the deletion.
		if have, err := connectedReplicas(ctx, cn); err == nil && have <= n {
			return nil
		}
		s.notReplicated.Add(1)
		return store.NodeErr(addr, fmt.Errorf("redis: %w: %d of %d replicas within %v", ErrNotReplicated, n, s.waitReplicas, s.waitTimeout))
	}
	return nil
}

// SentinelNode is the node name a Store in Sentinel mode reports (NodeOf,
// Nodes, error messages, per-node stats) for master set name: the node is
// the master set, whichever server the sentinels have made primary.
func SentinelNode(name string) string { return "sentinel/" + name }

// NotReplicated returns how many invalidations failed with
// ErrNotReplicated.
func (s *Store) NotReplicated() uint64 { return s.notReplicated.Load() }

// connectedReplicas asks the primary (ROLE) how many replicas are
// connected to it.
func connectedReplicas(ctx context.Context, cn *conn) (int64, error) {
	role, err := cn.c.Do(ctx, cn.c.B().Role().Build()).ToArray()
	if err != nil {
		return 0, err
	}
	if len(role) < 3 {
		return 0, errors.New("redis: short ROLE reply")
	}
	if kind, _ := role[0].ToString(); kind != "master" {
		return 0, fmt.Errorf("redis: ROLE says %q", kind)
	}
	replicas, err := role[2].ToArray()
	return int64(len(replicas)), err
}

// primaryPoll is how often a Sentinel-mode Store looks at which server
// its client follows, to count failovers (ConnStats).
const primaryPoll = 250 * time.Millisecond

// watchPrimary notes the primary every primaryPoll until the Store is
// closed.
func (s *Store) watchPrimary(cn *conn) {
	defer s.bg.Done()
	t := time.NewTicker(primaryPoll)
	defer t.Stop()
	for {
		select {
		case <-s.bgCtx.Done():
			return
		case <-t.C:
			s.notePrimary(cn)
		}
	}
}

// notePrimary records the server the client sends writes to, counting a
// change as a failover.
func (s *Store) notePrimary(cn *conn) {
	addr := primaryOf(s.bgCtx, cn)
	if addr == "" {
		return
	}
	old := s.primary.Swap(&addr)
	if old != nil && *old != addr {
		s.failovers.Add(1)
	}
}
