package memcache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache/meta"
)

// group is the part of a batch bound for one server.
type group struct {
	cl   *meta.Client
	idx  []int // positions in the caller's batch
	reqs []meta.Request
	errs store.BatchError
}

// batch splits n keys by server. Keys without a wire form (the empty key)
// fail at once, without a server.
type batch struct {
	s      *Store
	op     string
	groups []*group
	errs   store.BatchError
}

func (s *Store) newBatch(ctx context.Context, op string, n int, key func(int) string) (*batch, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memcache: %s batch: %w", op, context.Cause(ctx))
	}
	b := &batch{s: s, op: op, groups: make([]*group, len(s.clients)), errs: store.BatchError{Op: op}}
	per := n/len(s.clients) + n/8 + 1
	for i := 0; i < n; i++ {
		k := key(i)
		if _, err := meta.ClassifyKey(k); err != nil {
			b.errs.Add(k, err)
			continue
		}
		si := s.ring.Index(k)
		g := b.groups[si]
		if g == nil {
			g = &group{cl: s.clients[si], idx: make([]int, 0, per), reqs: make([]meta.Request, 0, per)}
			b.groups[si] = g
		}
		g.idx = append(g.idx, i)
	}
	return b, nil
}

// run sends every group's pipeline, all servers at once, and calls
// onAnswer for answers that are not failures. It returns the failures.
func (b *batch) run(ctx context.Context, key func(int) string, onAnswer func(g *group, j int, res *meta.Response) error) error {
	var wg sync.WaitGroup
	rt := store.RoundTrips(ctx) // instrumentation: one report per server
	do := func(g *group) {
		var start time.Time
		if rt != nil {
			start = time.Now()
		}
		_ = g.cl.Exec(ctx, g.reqs, func(j int, res *meta.Response, err error) {
			if err == nil {
				err = onAnswer(g, j, res)
			}
			if err != nil {
				g.errs.AddNode(key(g.idx[j]), g.cl.Addr(), err)
			}
		})
		if rt != nil {
			rt(store.RoundTrip{Op: b.wireOp(g), Addr: g.cl.Addr(), Commands: len(g.reqs), Keys: len(g.reqs),
				Start: start, End: time.Now(), Failed: len(g.errs.Errors)})
		}
	}
	var last *group
	for _, g := range b.groups {
		if g == nil || len(g.reqs) == 0 {
			continue
		}
		if prev := last; prev != nil {
			wg.Go(func() { do(prev) })
		}
		last = g
	}
	if last != nil {
		do(last) // the last server's pipeline runs on this goroutine
	}
	wg.Wait()
	for _, g := range b.groups {
		if g != nil {
			b.errs.Merge(&g.errs, nil)
		}
	}
	return b.errs.Err()
}

// GetMany reads keys with one pipeline of quiet mg per server, all
// servers at once. values[i] is nil for a miss or a failure; failures come
// back in a *store.BatchError naming each key and its server.
func (s *Store) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	key := func(i int) string { return keys[i] }
	b, err := s.newBatch(ctx, "get", len(keys), key)
	if err != nil {
		return nil, err
	}
	for _, g := range b.groups {
		if g == nil {
			continue
		}
		for _, i := range g.idx {
			g.reqs = append(g.reqs, meta.Request{Cmd: meta.Get, Key: keys[i], ReturnValue: true, ReturnCAS: true, Quiet: true})
		}
	}
	vals := make([][]byte, len(keys))
	var mu sync.Mutex     // the servers' pipelines answer at once
	var won []store.Lease // recache tokens of stale items, handed back below
	err = b.run(ctx, key, func(g *group, j int, res *meta.Response) error {
		if res.Won {
			mu.Lock()
			won = append(won, store.Lease{Key: keys[g.idx[j]], CAS: res.CAS})
			mu.Unlock()
		}
		switch {
		case res.Placeholder(), res.Status == meta.EN:
			return nil
		case res.Status == meta.VA:
			vals[g.idx[j]] = res.Value
			return nil
		}
		return fmt.Errorf("unexpected answer %s to mg", res.Status)
	})
	s.handBack(ctx, won)
	return vals, err
}

// handBack gives up the recache tokens (W) that a plain read took of
// stale items: see meta.Client.HandBack. Best effort.
func (s *Store) handBack(ctx context.Context, won []store.Lease) {
	for _, l := range won {
		if cl, err := s.client(l.Key); err == nil {
			cl.HandBack(ctx, l.Key, l.CAS)
		}
	}
}

// SetMany writes items with one pipeline of quiet ms per server, all
// servers at once; only failures come back from the servers. Items that
// cannot be sent (empty key, negative TTL, value over MaxValueSize) and
// items the server refused or may not have received (it failed
// mid-batch) are named in a *store.BatchError with their server; every
// other item was stored.
func (s *Store) SetMany(ctx context.Context, items []store.Item) error {
	key := func(i int) string { return items[i].Key }
	b, err := s.newBatch(ctx, "set", len(items), key)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, g := range b.groups {
		if g == nil {
			continue
		}
		keep := g.idx[:0]
		for _, i := range g.idx {
			it := &items[i]
			if err := store.CheckTTL(it.TTL); err != nil {
				b.errs.Add(it.Key, err)
				continue
			}
			if err := checkValue(g.cl, it.Key, len(it.Value)); err != nil {
				b.errs.AddNode(it.Key, g.cl.Addr(), err)
				continue
			}
			keep = append(keep, i)
			g.reqs = append(g.reqs, meta.Request{Cmd: meta.Set, Key: it.Key, Value: it.Value,
				TTL: meta.TTL(it.TTL, now), Quiet: true})
		}
		g.idx = keep
	}
	return b.run(ctx, key, func(g *group, j int, res *meta.Response) error {
		switch res.Status {
		case meta.HD:
			return nil
		case meta.NS:
			return store.ErrNotStored
		}
		return fmt.Errorf("unexpected answer %s to ms", res.Status)
	})
}

// DeleteMany removes keys with one pipeline of quiet md per server, all
// servers at once. Missing keys are not failures.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	key := func(i int) string { return keys[i] }
	b, err := s.newBatch(ctx, "delete", len(keys), key)
	if err != nil {
		return err
	}
	for _, g := range b.groups {
		if g == nil {
			continue
		}
		for _, i := range g.idx {
			g.reqs = append(g.reqs, meta.Request{Cmd: meta.Delete, Key: keys[i], Quiet: true})
		}
	}
	return b.run(ctx, key, func(g *group, j int, res *meta.Response) error {
		switch res.Status {
		case meta.HD, meta.NF:
			return nil
		}
		return fmt.Errorf("unexpected answer %s to md", res.Status)
	})
}

// wireOp names the meta command of g's requests ("mg", "ms", "md", "ma"...).
func (b *batch) wireOp(g *group) string {
	if len(g.reqs) == 0 {
		return b.op
	}
	return g.reqs[0].Cmd.String()
}
