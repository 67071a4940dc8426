package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
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
	// zero, it is 1 in Sentinel mode and on a Redis Cluster for the keys
	// whose master has a replica (as CLUSTER SLOTS last said: the slot
	// map is read at connect, after errors and every 10 s while
	// invalidating), and 0 (no wait) on a standalone server; negative
	// turns waiting off. On a Cluster each master owning one of the keys
	// is waited for. Invalidate fails with an error matching
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

// ErrSentinelAuth reports that a sentinel refused the credentials meant
// for it (Sentinel.Username and Sentinel.Password; sentinel_user= and
// sentinel_password= in a URL), or needs some and none were given. It
// matches ErrAuth too. A refusal by the data servers the sentinels name
// (Options.Username and Options.Password; the URL's user info) matches
// ErrAuth only.
var ErrSentinelAuth = fmt.Errorf("%w by the sentinel", ErrAuth)

// sentinelAuthError explains a refusal met while connecting in Sentinel
// mode. rueidis returns the server's reply without saying whether a
// sentinel or the primary it named sent it, and the two take different
// credentials, so one sentinel is asked again with the sentinels'
// credentials alone: a sentinel that accepts them (and names the primary)
// means the data servers refused.
func (s *Store) sentinelAuthError(ctx context.Context, seeds string, err error) error {
	for _, addr := range s.seeds {
		c, perr := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:       []string{addr},
			Username:          s.co.Sentinel.Username,
			Password:          s.co.Sentinel.Password,
			TLSConfig:         s.co.Sentinel.TLSConfig,
			Dialer:            s.co.Dialer,
			DialCtxFn:         s.co.DialCtxFn,
			ForceSingleClient: true,
			DisableCache:      true,
			DisableRetry:      true,
		})
		if perr != nil {
			if errors.Is(explain("", perr), ErrAuth) {
				return store.NodeErr(addr, explainAuth("redis sentinel", sentinelAuth, err))
			}
			continue // not answering: ask the next one
		}
		primary := ""
		if a, err := c.Do(ctx, c.B().SentinelGetMasterAddrByName().Master(s.masterSet).Build()).AsStrSlice(); err == nil && len(a) == 2 {
			primary = net.JoinHostPort(a[0], a[1])
		}
		c.Close()
		if primary == "" {
			return explainAuth("redis "+seeds, sentinelDataAuth, err)
		}
		return store.NodeErr(primary, explainAuth("redis", sentinelDataAuth, err))
	}
	return explainAuth("redis "+seeds, eitherAuth, err)
}

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

// SentinelNode is the node name a Store in Sentinel mode reports (NodeOf,
// Nodes, error messages, per-node stats) for master set name: the node is
// the master set, whichever server the sentinels have made primary.
func SentinelNode(name string) string { return "sentinel/" + name }

// NotReplicated returns how many invalidations failed with
// ErrNotReplicated.
func (s *Store) NotReplicated() uint64 { return s.notReplicated.Load() }

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
	if s.recent != nil { // replica reads: the replica the client reads from
		s.noteReplica(cn, addr)
	}
}
