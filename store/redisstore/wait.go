package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

// waitPolicy resolves InvalidateWait's zero values: replicas is how many
// replicas to wait for, auto that (outside Sentinel mode) the wait
// applies only on a Cluster, to the masters that have replicas.
func waitPolicy(w InvalidateWait, sentinel bool) (replicas int, auto bool, timeout time.Duration, err error) {
	if w.Timeout < 0 {
		return 0, false, 0, errors.New("redisstore: Options.InvalidateWait.Timeout is negative")
	}
	replicas = w.Replicas
	if replicas == 0 {
		replicas, auto = 1, !sentinel
	}
	if replicas < 0 {
		replicas = 0
	}
	timeout = w.Timeout
	if timeout == 0 {
		timeout = DefaultInvalidateWaitTimeout
	}
	return replicas, auto, max(timeout, time.Millisecond), nil
}

// invalidateWaiting is Invalidate when it waits for replicas (handled is
// false when it does not: the caller deletes without waiting).
func (s *Store) invalidateWaiting(ctx context.Context, keys []string) (handled bool, err error) {
	if s.waitReplicas == 0 {
		return false, nil
	}
	cn, err := s.ready(ctx)
	if err != nil {
		return true, err
	}
	for _, k := range keys {
		if err := store.CheckKey(k); err != nil {
			return true, err
		}
	}
	if len(keys) == 0 {
		return true, nil
	}
	if !cn.cluster {
		if s.waitAuto {
			return false, nil // a standalone server: no wait unless asked
		}
		s.wrote(keys...)
		if s.combiner != nil {
			return true, s.waitCombined(ctx, cn, keys, s.waitReplicas)
		}
		return true, s.waitGroup(ctx, cn, keys, s.waitReplicas)
	}
	fails := failures{op: "invalidate", n: len(keys)}
	groups := s.groups(cn, keys, nil, &fails)
	s.wrote(keys...)
	var plain []string // keys whose master has no replica to wait for
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, g := range groups {
		gk := make([]string, len(g.idx))
		for j, i := range g.idx {
			gk[j] = keys[i]
		}
		n := s.waitReplicas
		if s.waitAuto {
			n = min(n, s.slotReplicas(g.slot))
		}
		if n == 0 {
			plain = append(plain, gk...)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.waitGroup(ctx, cn, gk, n); err != nil {
				mu.Lock()
				for _, k := range gk {
					fails.add(k, s.addrOfSlot(g.slot), err)
				}
				mu.Unlock()
			}
		}()
	}
	if len(plain) > 0 {
		if err := s.DeleteMany(ctx, plain); err != nil {
			var be *store.BatchError
			if !errors.As(err, &be) {
				wg.Wait()
				return true, err
			}
			mu.Lock()
			for _, ke := range be.Errors {
				fails.add(ke.Key, ke.Addr, ke.Err)
			}
			mu.Unlock()
		}
	}
	wg.Wait()
	return true, fails.result(ctx)
}

// slotReplicas is how many replicas the master of slot has, as the slot
// map last said (1 when it has not been read yet: the wait then asks the
// master, see acked). A map older than 10 s is read again in the
// background, so replicas added or lost are noticed.
func (s *Store) slotReplicas(sl uint16) int {
	m := s.slots.Load()
	if m == nil || time.Since(m.at) > 10*time.Second {
		s.refreshSlotsAsync()
	}
	if m == nil {
		return 1
	}
	return int(m.replicas[sl])
}

// doer is a rueidis client, dedicated connection or node client.
type doer interface {
	B() rueidis.Builder
	Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult
	DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult
}

// waitRedirects bounds the MOVED and ASK replies one waited deletion
// follows.
const waitRedirects = 4

// waitGroup deletes keys (of one hash slot on a Cluster) and waits until
// want replicas have the deletion (WAIT). DEL and WAIT go together on one
// dedicated connection to the server that owns the keys: WAIT covers the
// writes of its own connection, and it never holds up other callers'
// pipelined reads. On a Cluster the first attempt goes where rueidis
// routes the slot; a MOVED or ASK reply (the slot moved, or is moving)
// sends it again to the node the reply names, with ASKING for ASK; keys
// split between two masters by a migration (TRYAGAIN) are deleted one
// at a time.
func (s *Store) waitGroup(ctx context.Context, cn *conn, keys []string, want int) error {
	cmds := func() []rueidis.Completed {
		return []rueidis.Completed{cn.c.B().Del().Key(keys...).Build(),
			cn.c.B().Wait().Numreplicas(int64(want)).Timeout(s.waitTimeout.Milliseconds()).Build()}
	}
	addr, asking := "", false
	for range waitRedirects + 1 {
		var res []rueidis.RedisResult
		have := int64(-1)
		run := func(d doer, prefix ...rueidis.Completed) {
			res = d.DoMulti(ctx, append(prefix, cmds()...)...)[len(prefix):]
			if n, err := res[1].AsInt64(); err == nil && n < int64(want) {
				if h, err := connectedReplicas(ctx, d); err == nil {
					have = h
				}
			}
		}
		if addr == "" {
			if err := cn.c.Dedicated(func(dc rueidis.DedicatedClient) error {
				run(dc)
				return nil
			}); err != nil {
				return s.wrapErr(s.addrOf(keys[0]), err)
			}
		} else {
			nc, ok := cn.c.Nodes()[addr]
			if !ok {
				return s.wrapErr(addr, fmt.Errorf("redirected to %s, a node the client does not know yet", addr))
			}
			if asking {
				run(nc, cn.c.B().Asking().Build())
			} else {
				run(nc)
			}
		}
		if err := res[0].Error(); err != nil {
			if re, ok := rueidis.IsRedisErr(err); ok {
				if a, ok := re.IsMoved(); ok {
					addr, asking = a, false
					continue
				}
				if a, ok := re.IsAsk(); ok {
					addr, asking = a, true
					continue
				}
				if re.IsTryAgain() && len(keys) > 1 {
					s.splits.Add(1)
					var errs []error
					for _, k := range keys {
						errs = append(errs, s.waitGroup(ctx, cn, []string{k}, want))
					}
					return errors.Join(errs...)
				}
			}
			return s.wrapErr(cmpOr(addr, s.addrOf(keys[0])), err)
		}
		return s.acked(cmpOr(addr, s.addrOf(keys[0])), res[1], have, want)
	}
	return s.wrapErr(addr, fmt.Errorf("redis: invalidation redirected more than %d times", waitRedirects))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// acked checks WAIT's answer: enough replicas, or (have >= 0: ROLE's
// count of connected replicas) every connected replica.
func (s *Store) acked(addr string, wait rueidis.RedisResult, have int64, want int) error {
	n, err := wait.AsInt64()
	if err != nil {
		return s.wrapErr(addr, err)
	}
	if n >= int64(want) {
		return nil
	}
	// A primary with fewer replicas connected than asked for (the one
	// replica was just promoted, and its old primary has not come back
	// yet) has nothing more to wait for: every replica that is connected
	// has the deletion.
	if have >= 0 && have <= n {
		return nil
	}
	s.notReplicated.Add(1)
	return store.NodeErr(addr, fmt.Errorf("redis: %w: %d of %d replicas within %v", ErrNotReplicated, n, want, s.waitTimeout))
}

// connectedReplicas asks a master (ROLE) how many replicas are connected
// to it.
func connectedReplicas(ctx context.Context, d doer) (int64, error) {
	role, err := d.Do(ctx, d.B().Role().Build()).ToArray()
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
