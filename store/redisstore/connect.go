package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

// Back-off between background connection attempts of a Store started with
// its servers down: it doubles from connectBackoffMin to
// connectBackoffMax, so an idle Store whose server stays down costs two
// dials (or name lookups) a second. A request that finds the Store not
// connected starts the next attempt early, but not sooner than
// connectKickGap after the last one: under traffic a server that comes up
// is used within about connectKickGap, at a cost of at most 20 attempts a
// second however many callers there are.
const (
	connectBackoffMin = 10 * time.Millisecond
	connectBackoffMax = 500 * time.Millisecond
	connectKickGap    = 50 * time.Millisecond
)

// dialOptions routes every connection of co through the Store's dialer:
// host names are looked up again on each dial (counted in ConnStats), and
// a dial in progress ends when the Store is closed. A DialCtxFn set by
// Options.Configure keeps the dial itself; only the cancellation is added.
func (s *Store) dialOptions(co rueidis.ClientOption) rueidis.ClientOption {
	if co.Dialer.Timeout == 0 {
		co.Dialer.Timeout = rueidis.DefaultDialTimeout
	}
	if co.Dialer.KeepAlive == 0 {
		co.Dialer.KeepAlive = rueidis.DefaultTCPKeepAlive
	}
	custom := co.DialCtxFn
	if custom == nil && co.DialFn != nil {
		fn := co.DialFn
		custom = func(_ context.Context, dst string, d *net.Dialer, t *tls.Config) (net.Conn, error) {
			return fn(dst, d, t)
		}
	}
	co.DialFn = nil
	co.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, t *tls.Config) (net.Conn, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(s.bgCtx, cancel)
		defer stop()
		if custom != nil {
			return custom(ctx, dst, d, t)
		}
		if d.Timeout > 0 {
			var c context.CancelFunc
			ctx, c = context.WithTimeout(ctx, d.Timeout)
			defer c()
		}
		nc, err := s.dialer.DialContext(ctx, "tcp", dst)
		if err != nil || t == nil {
			return nc, err
		}
		cfg := t
		if cfg.ServerName == "" {
			// The connection goes to an IP address; the certificate
			// names the host.
			host, _, _ := net.SplitHostPort(dst)
			cfg = t.Clone()
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		return tc, nil
	}
	return co
}

// connect creates the client, proves the credentials and the database
// with a PING and reads the server's limits. On success the Store is
// connected; ctx bounds the checks after the client is created.
func (s *Store) connect(ctx context.Context) error {
	s.attempts.Add(1)
	err := s.tryConnect(ctx)
	if err != nil {
		s.attemptFails.Add(1)
		s.lastErr.Store(&err)
	}
	return err
}

func (s *Store) tryConnect(ctx context.Context) error {
	seeds := strings.Join(s.seeds, ",")
	c, err := rueidis.NewClient(s.co)
	if err != nil {
		if errors.Is(err, rueidis.ErrNoCache) {
			return fmt.Errorf("redisstore: %s: Options.Tracking needs Redis 6 or later speaking RESP3 (CLIENT TRACKING): %w", seeds, err)
		}
		if s.masterSet != "" && errors.Is(explain("", err), ErrAuth) {
			return s.sentinelAuthError(ctx, seeds, err)
		}
		return connectError(seeds, err)
	}
	cn := newConn(c, s.replicaRoute())
	// One PING proves the credentials and the database before the first
	// real command, and CONFIG GET reads the size limit. CONFIG is often
	// disabled (managed services, ACL users without +config): then the
	// default stands.
	if err := s.ping(ctx, cn); err != nil {
		c.Close()
		return err
	}
	if n, err := cn.readMaxValue(ctx); err == nil {
		s.maxValue.Store(int64(n))
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		c.Close()
		return fmt.Errorf("redisstore: %w", store.ErrClosed)
	}
	s.cur.Store(cn)
	close(s.up)
	if s.masterSet != "" {
		// Under mu, checked against closed: Close waits for it.
		s.notePrimary(cn)
		s.bg.Add(1)
		go s.watchPrimary(cn)
	}
	s.mu.Unlock()
	if cn.cluster {
		s.refreshSlots(ctx, cn)
	}
	return nil
}

// connectLoop connects a Store started without waiting, trying again with
// back-off until a seed answers or the Store is closed. Close does not
// wait for it: an attempt can sit in a dial or a handshake with a stalled
// server for up to the dial timeout (our dialer is cancelled by Close, a
// custom one may not be), and its client is closed when it ends.
func (s *Store) connectLoop() {
	backoff := connectBackoffMin
	for first := true; ; first = false {
		ctx, cancel := context.WithTimeout(s.bgCtx, s.co.Dialer.Timeout)
		err := s.connect(ctx)
		cancel()
		if first {
			close(s.first)
		}
		if err == nil || s.bgCtx.Err() != nil {
			return
		}
		ended := time.Now()
		t := time.NewTimer(backoff)
		select {
		case <-s.bgCtx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-s.kick:
			t.Stop()
			if wait := connectKickGap - time.Since(ended); wait > 0 {
				t.Reset(wait)
				select {
				case <-s.bgCtx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		}
		backoff = min(2*backoff, connectBackoffMax)
	}
}

// kickConnect asks the connection loop for an early attempt.
func (s *Store) kickConnect() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// firstWaitMax is how long after New requests still wait for the first
// connection attempt (see waitFirst).
const firstWaitMax = time.Second

// waitFirst is ready's slow path, on a Store not connected yet: a request
// made in the first second waits for the first connection attempt (a
// server that is up is used by the first requests as before), bounded by
// its ctx; after that, and once that attempt failed, requests fail at once
// until an attempt in the background succeeds. (The first attempt against
// a stalled server lasts up to the dial timeout; requests stop waiting for
// it after a second.)
func (s *Store) waitFirst(ctx context.Context) (*conn, error) {
	select {
	case <-s.first:
	default:
		if time.Since(s.created) > firstWaitMax {
			break
		}
		select {
		case <-s.first:
		case <-ctx.Done():
			return nil, s.notConnected(ctx.Err())
		}
	}
	if cn := s.cur.Load(); cn != nil {
		return cn, ctx.Err()
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("redisstore: %w", store.ErrClosed)
	}
	s.kickConnect()
	var last error
	if p := s.lastErr.Load(); p != nil {
		last = *p
	}
	return nil, s.notConnected(last)
}

// notConnected is the error of a request that found no client: it
// matches store.ErrNotConnected and, when known, why the last attempt
// failed (ErrAuth, a refused dial), and names the first seed.
func (s *Store) notConnected(why error) error {
	err := fmt.Errorf("redis %s: %w", strings.Join(s.seeds, ","), store.ErrNotConnected)
	if why != nil {
		err = fmt.Errorf("redis %s: %w (last attempt: %w)", strings.Join(s.seeds, ","), store.ErrNotConnected, why)
	}
	if len(s.seeds) == 0 {
		return err
	}
	return &store.NodeError{Addr: s.seeds[0], Err: err}
}

// WaitConnected waits until the Store has connected, for tools that need
// the server itself (Client, IsCluster) rather than a cache in front of a
// loader. It fails with an error matching store.ErrNotConnected (and why
// the last attempt failed) when ctx ends first, or store.ErrClosed.
func (s *Store) WaitConnected(ctx context.Context) error {
	select {
	case <-s.up:
		return nil
	case <-s.bgCtx.Done():
		return fmt.Errorf("redisstore: %w", store.ErrClosed)
	case <-ctx.Done():
	}
	select {
	case <-s.up:
		return nil
	default:
	}
	var last error
	if p := s.lastErr.Load(); p != nil {
		last = *p
	}
	return s.notConnected(errors.Join(ctx.Err(), last))
}

// ConnStats reports whether the Store has connected, its background
// connection attempts, and per address the dials, reconnections, name
// lookups and address changes (probe connections included).
func (s *Store) ConnStats() store.ConnStats {
	st := store.ConnStats{Connected: s.cur.Load() != nil, ConnectAttempts: s.attempts.Load(), ConnectFailures: s.attemptFails.Load(),
		Failovers: s.failovers.Load(), NotReplicated: s.notReplicated.Load(), ReplicaReads: s.replicaReads.Load(),
		SlotSplits: s.splits.Load(), OrphanedLeases: s.orphansReleased.Load()}
	if p := s.primary.Load(); p != nil {
		st.Primary = *p
	}
	_, st.TrackingFlushes = s.TrackingReports()
	if s.dialer != nil {
		st.Nodes = s.dialer.Stats()
	}
	return st
}
