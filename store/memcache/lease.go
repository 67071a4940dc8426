package memcache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache/meta"
)

var _ store.Leaser = (*Store)(nil)

// LeaseGet reads keys and takes a lease on each missing one in the same
// round trip, with one pipeline of "mg <key> v c N<ttl>" per server, all
// servers at once. memcached creates an empty item for a miss and answers
// W (won) to exactly one reader and Z to the others until the item is
// filled or expires; the item's CAS is the lease. With opts.Recache, a
// hit whose TTL is below it hands one reader W besides the value (R flag).
// Lease TTLs are whole seconds (rounded up).
func (s *Store) LeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, error) {
	if opts.TTL <= 0 {
		return nil, fmt.Errorf("memcache: lease TTL must be positive, got %v", opts.TTL)
	}
	now := time.Now()
	req := meta.Request{Cmd: meta.Get, ReturnValue: true, ReturnCAS: true,
		Vivify: meta.TTL(opts.TTL, now), Recache: meta.TTL(opts.Recache, now)}
	out := make([]store.LeaseResult, len(keys))
	if len(keys) == 1 {
		// One key: a plain request, without the pipeline's closing mn.
		cl, err := s.client(keys[0])
		if err != nil {
			return nil, &store.BatchError{Op: "lease", Errors: []store.KeyError{{Key: keys[0], Err: err}}}
		}
		r := req
		r.Key = keys[0]
		var res meta.Response
		if err := cl.Do(ctx, &r, &res); err != nil {
			be := store.BatchError{Op: "lease"}
			be.AddNode(keys[0], cl.Addr(), err)
			return nil, &be
		}
		out[0] = leaseResult(keys[0], &res)
		return out, nil
	}
	key := func(i int) string { return keys[i] }
	b, err := s.newBatch(ctx, "lease", len(keys), key)
	if err != nil {
		return nil, err
	}
	for _, g := range b.groups {
		if g == nil {
			continue
		}
		for _, i := range g.idx {
			r := req
			r.Key = keys[i]
			g.reqs = append(g.reqs, r)
		}
	}
	err = b.run(ctx, key, func(g *group, j int, res *meta.Response) error {
		if res.Status != meta.VA && res.Status != meta.EN {
			return fmt.Errorf("unexpected answer %s to mg N", res.Status)
		}
		i := g.idx[j]
		out[i] = leaseResult(keys[i], res)
		return nil
	})
	return out, err
}

func leaseResult(key string, res *meta.Response) store.LeaseResult {
	var r store.LeaseResult
	if res.Status != meta.VA {
		return r // EN: only without N; no value, no lease
	}
	if !res.Placeholder() {
		r.Value, r.Stale = res.Value, res.Stale
	}
	switch {
	case res.Won:
		r.Won = true
		r.Lease = store.Lease{Key: key, CAS: res.CAS}
	case res.AlreadyWon:
		r.Held = true
	}
	return r
}

// Fill stores each value with "ms <key> C<cas>", one quiet pipeline per
// server: memcached refuses it (EX, or NF once the item is gone) when an
// invalidation, an expiry or another lease changed the item since the
// lease was taken; such fills are reported matching store.ErrNotStored.
func (s *Store) Fill(ctx context.Context, fills []store.Fill) error {
	key := func(i int) string { return fills[i].Lease.Key }
	b, err := s.newBatch(ctx, "fill", len(fills), key)
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
			f := &fills[i]
			if err := store.CheckTTL(f.TTL); err != nil {
				b.errs.Add(f.Lease.Key, err)
				continue
			}
			if f.Lease.CAS == 0 {
				b.errs.Add(f.Lease.Key, errors.New("memcache: fill without a lease (CAS 0)"))
				continue
			}
			if err := checkValue(g.cl, f.Lease.Key, len(f.Value)); err != nil {
				b.errs.AddNode(f.Lease.Key, g.cl.Addr(), err)
				continue
			}
			keep = append(keep, i)
			g.reqs = append(g.reqs, meta.Request{Cmd: meta.Set, Key: f.Lease.Key, Value: f.Value,
				TTL: meta.TTL(f.TTL, now), ForceTTL: true, CompareCAS: f.Lease.CAS, Quiet: true})
		}
		g.idx = keep
	}
	return b.run(ctx, key, func(g *group, j int, res *meta.Response) error {
		switch res.Status {
		case meta.HD:
			return nil
		case meta.EX, meta.NF, meta.NS:
			return fmt.Errorf("memcache: lease lost (%s): %w", res.Status, store.ErrNotStored)
		}
		return fmt.Errorf("unexpected answer %s to ms C", res.Status)
	})
}

// Release deletes each lease's placeholder with "md <key> C<cas>", so a
// lease already lost (the CAS no longer matches) leaves the item alone.
func (s *Store) Release(ctx context.Context, leases []store.Lease) error {
	key := func(i int) string { return leases[i].Key }
	b, err := s.newBatch(ctx, "release", len(leases), key)
	if err != nil {
		return err
	}
	for _, g := range b.groups {
		if g == nil {
			continue
		}
		for _, i := range g.idx {
			g.reqs = append(g.reqs, meta.Request{Cmd: meta.Delete, Key: leases[i].Key, CompareCAS: leases[i].CAS, Quiet: true})
		}
	}
	return b.run(ctx, key, func(g *group, j int, res *meta.Response) error {
		switch res.Status {
		case meta.HD, meta.NF, meta.EX:
			return nil
		}
		return fmt.Errorf("unexpected answer %s to md C", res.Status)
	})
}

// Invalidate removes keys with a quiet md each, one pipeline per server;
// any lease on them is void (its fill finds no item, or another CAS).
// With stale > 0 it sends "md <key> I T<stale>" instead: the value stays,
// marked stale, for stale (whole seconds); readers get it with X, and
// exactly one of them gets W to refill it. A fill under a lease taken
// before the invalidation is refused either way (md I bumps the CAS).
func (s *Store) Invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	if err := store.CheckTTL(stale); err != nil {
		return err
	}
	key := func(i int) string { return keys[i] }
	b, err := s.newBatch(ctx, "invalidate", len(keys), key)
	if err != nil {
		return err
	}
	secs := meta.TTL(stale, time.Now())
	for _, g := range b.groups {
		if g == nil {
			continue
		}
		for _, i := range g.idx {
			r := meta.Request{Cmd: meta.Delete, Key: keys[i], Quiet: true}
			if stale > 0 {
				r.Invalidate, r.TTL = true, secs
			}
			g.reqs = append(g.reqs, r)
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
