package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

var _ store.Leaser = (*Store)(nil)

// fillScript stores ARGV[2] (with PX ARGV[3] unless it is 0) only while the
// key still holds this lease's placeholder ARGV[1]. An invalidation (DEL),
// an expired lease or a later lease all leave other bytes (or none), and
// the fill is dropped.
var fillScript = newScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] == '0' then redis.call('SET', KEYS[1], ARGV[2]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1`)

// releaseScript deletes the key only while it holds this lease's
// placeholder.
var releaseScript = newScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])`)

// LeaseGet reads keys with a plain GET (MGET per hash slot for several),
// so a hit costs what a Get costs and writes nothing; only for the keys
// that missed does it send "SET key placeholder NX PX ttl", pipelined
// together. The caller whose SET succeeded holds the lease (Won); a key
// whose SET found something there is Held (another caller's placeholder,
// or a fill that landed between the two round trips: the next read sees
// it). A key holding another caller's placeholder comes back as a Value
// for the caller to recognise. A hit's Lease carries the value's bytes as
// its Token: a Fill with it replaces the value only if it is unchanged.
//
// opts.Recache is ignored: Redis cannot tell a key's remaining TTL in the
// same round trip as its value; the Cache refreshes early from the
// envelope's own timestamps instead.
func (s *Store) LeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, error) {
	if err := checkLeaseOptions(opts); err != nil {
		return nil, err
	}
	cn, err := s.ready(ctx)
	if err != nil {
		return nil, s.leaseReadErr(ctx, keys, err)
	}
	return s.leaseGet(ctx, cn, keys, opts)
}

// leaseReadErr is the error of a lease read of keys that failed as a
// whole: a one-key read's failure is that key's (a *store.BatchError
// naming its server), unless ctx ended or the store is closed.
func (s *Store) leaseReadErr(ctx context.Context, keys []string, err error) error {
	if len(keys) != 1 || ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
		return err
	}
	be := store.BatchError{Op: "lease"}
	be.AddNode(keys[0], s.addrOf(keys[0]), err)
	return &be
}

// LeaseGetAt is LeaseGet for a part of a larger batch, for a store that
// spreads one batch over several Stores (a ring's shards): it reads
// keys[i] for every i in idx and sets out[i] (aligned with keys) to its
// result; the other elements of out are not touched, so several Stores may
// fill one out at once. The error names only keys of idx.
func (s *Store) LeaseGetAt(ctx context.Context, keys []string, idx []int, out []store.LeaseResult, opts store.LeaseOptions) error {
	if err := checkLeaseOptions(opts); err != nil {
		return err
	}
	cn, err := s.ready(ctx)
	if err != nil {
		if len(idx) == 1 {
			return s.leaseReadErr(ctx, keys[idx[0]:idx[0]+1], err)
		}
		return err
	}
	return s.leaseGetAt(ctx, cn, keys, idx, out, opts)
}

func checkLeaseOptions(opts store.LeaseOptions) error {
	if opts.TTL <= 0 {
		return fmt.Errorf("redisstore: lease TTL must be positive, got %v", opts.TTL)
	}
	if len(opts.Placeholder) == 0 {
		return errors.New("redisstore: LeaseGet needs a placeholder")
	}
	return nil
}

// leaseGet is LeaseGet on the client cn: the store's own, or the lease
// path's push client (wake.go), whose reads the server tracks.
func (s *Store) leaseGet(ctx context.Context, cn *conn, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, error) {
	out := make([]store.LeaseResult, len(keys))
	if err := s.leaseGetAt(ctx, cn, keys, nil, out, opts); err != nil {
		var be *store.BatchError
		if !errors.As(err, &be) {
			return nil, err
		}
		return out, err
	}
	return out, nil
}

// leaseGetAt is LeaseGetAt on the client cn (idx nil: every key). The hits
// are read straight into out, with no slice of values in between: on warm
// keys the lease read costs what GetMany costs.
func (s *Store) leaseGetAt(ctx context.Context, cn *conn, keys []string, idx []int, out []store.LeaseResult, opts store.LeaseOptions) error {
	n := len(keys)
	if idx != nil {
		n = len(idx)
	}
	fails := failures{op: "lease", n: n}
	if n == 1 {
		i := 0
		if idx != nil {
			i = idx[0]
		}
		v, err := s.getOn(ctx, cn, keys[i])
		switch {
		case err == nil:
			out[i].Value = v
			out[i].Lease = store.Lease{Key: keys[i], Token: v}
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return s.leaseReadErr(ctx, keys[i:i+1], err)
		}
	} else {
		s.mget(ctx, cn, keys, idx, &fails, func(i int, v []byte) {
			out[i].Value = v
			out[i].Lease = store.Lease{Key: keys[i], Token: v}
		})
	}
	var failed map[string]error
	if fails.be != nil {
		failed = fails.be.Failed()
	}
	var missing []int
	for j := 0; j < n; j++ {
		i := j
		if idx != nil {
			i = idx[j]
		}
		if out[i].Value != nil {
			continue
		}
		if _, bad := failed[keys[i]]; !bad {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return fails.result(ctx)
	}
	ph := string(opts.Placeholder)
	px := pxMillis(opts.TTL)
	cmds := make([]rueidis.Completed, len(missing))
	for j, i := range missing {
		s.wrote(keys[i])
		cmds[j] = cn.c.B().Set().Key(keys[i]).Value(ph).Nx().PxMilliseconds(px).Build()
	}
	var taken []int // keys MGET saw empty whose SET NX found a key
	for j, r := range s.doMulti(ctx, cn, cmds) {
		i := missing[j]
		err := r.Error()
		switch {
		case err == nil:
			out[i].Won = true
			out[i].Lease = store.Lease{Key: keys[i], Token: opts.Placeholder}
		case rueidis.IsRedisNil(err):
			if n == 1 {
				out[i].Held = true // GET saw nothing: another caller got there first
			} else {
				taken = append(taken, i)
			}
		default:
			addr := s.addrOf(keys[i])
			fails.add(keys[i], addr, s.keyErr(addr, err))
		}
	}
	if len(taken) > 0 {
		s.recheck(ctx, cn, keys, taken, out, &fails)
	}
	return fails.result(ctx)
}

// recheck reads again the keys of a lease batch that MGET saw empty but
// whose SET NX found a key. MGET answers nil for a key that holds another
// type (a hash, a list) as well as for a missing one, so without this a
// key of the wrong type would look held by a lease that is never filled,
// and every reader would wait for it. GET tells the cases apart: a
// WRONGTYPE error fails the key (the caller loads without writing back,
// as for a single key); bytes are what another caller stored between the
// two commands (its lease's placeholder, or a value); nothing means that
// caller's key is gone again, and the lease counts as held.
func (s *Store) recheck(ctx context.Context, cn *conn, keys []string, taken []int, out []store.LeaseResult, fails *failures) {
	cmds := make([]rueidis.Completed, len(taken))
	for j, i := range taken {
		cmds[j] = cn.c.B().Get().Key(keys[i]).Build()
	}
	for j, r := range s.doMulti(ctx, cn, cmds) {
		i := taken[j]
		b, err := r.AsBytes()
		switch {
		case err == nil:
			out[i].Value = nonNil(b)
			out[i].Lease = store.Lease{Key: keys[i], Token: out[i].Value}
		case rueidis.IsRedisNil(err):
			out[i].Held = true
		default:
			addr := s.addrOf(keys[i])
			fails.add(keys[i], addr, s.keyErr(addr, err))
		}
	}
}

// Fill runs, per fill, a script that compares the key's bytes with the
// lease's placeholder and only then SETs the value with its PX, all
// pipelined (rueidis sends each cluster node its share). A fill whose
// lease was lost is reported matching store.ErrNotStored.
func (s *Store) Fill(ctx context.Context, fills []store.Fill) error {
	cn, err := s.ready(ctx)
	if err != nil {
		return err
	}
	fails := failures{op: "fill"}
	execs := make([]rueidis.LuaExec, 0, len(fills))
	sent := make([]int, 0, len(fills))
	for i, f := range fills {
		if err := s.checkItem(f.Lease.Key, f.Value, f.TTL); err != nil {
			fails.add(f.Lease.Key, "", err)
			continue
		}
		if len(f.Lease.Token) == 0 {
			fails.add(f.Lease.Key, "", errors.New("redisstore: fill without a lease token"))
			continue
		}
		px := "0"
		if f.TTL > 0 {
			px = strconv.FormatInt(pxMillis(f.TTL), 10)
		}
		s.wrote(f.Lease.Key)
		execs = append(execs, rueidis.LuaExec{Keys: []string{f.Lease.Key},
			Args: []string{string(f.Lease.Token), string(f.Value), px}})
		sent = append(sent, i)
	}
	if len(execs) == 0 {
		return fails.result(ctx)
	}
	var lost []store.Lease
	for j, r := range s.execMulti(ctx, cn, fillScript, execs) {
		k := fills[sent[j]].Lease.Key
		n, err := r.AsInt64()
		switch {
		case err != nil:
			if unanswered(err) {
				lost = append(lost, fills[sent[j]].Lease)
			}
			addr := s.addrOf(k)
			fails.add(k, addr, s.keyErr(addr, err))
		case n == 0:
			fails.add(k, "", fmt.Errorf("redisstore: lease lost: %w", store.ErrNotStored))
		}
	}
	s.adopt(lost...) // see orphans.go
	return fails.result(ctx)
}

// Release deletes each lease's placeholder if it is still there.
func (s *Store) Release(ctx context.Context, leases []store.Lease) error {
	cn, err := s.ready(ctx)
	if err != nil {
		return err
	}
	fails := failures{op: "release"}
	execs := make([]rueidis.LuaExec, 0, len(leases))
	sent := make([]int, 0, len(leases))
	for i, l := range leases {
		if err := store.CheckKey(l.Key); err != nil {
			fails.add(l.Key, "", err)
			continue
		}
		execs = append(execs, rueidis.LuaExec{Keys: []string{l.Key}, Args: []string{string(l.Token)}})
		sent = append(sent, i)
	}
	if len(execs) == 0 {
		return fails.result(ctx)
	}
	var lost []store.Lease
	for j, r := range s.execMulti(ctx, cn, releaseScript, execs) {
		if err := r.Error(); err != nil {
			if unanswered(err) {
				lost = append(lost, leases[sent[j]])
			}
			k := leases[sent[j]].Key
			addr := s.addrOf(k)
			fails.add(k, addr, s.keyErr(addr, err))
		}
	}
	s.adopt(lost...) // see orphans.go
	return fails.result(ctx)
}

// Invalidate deletes keys (one DEL per hash slot, pipelined): values and
// placeholders alike, so any lease taken before is void and its fill is
// dropped. Redis has no stale-while-revalidate here; stale is ignored.
//
// With Options.InvalidateWait (the default in Sentinel mode, and on a
// Cluster for the masters that have replicas) it returns only once the
// replicas have the deletion too, or fails with an error matching
// ErrNotReplicated (see InvalidateWait).
func (s *Store) Invalidate(ctx context.Context, keys []string, stale time.Duration) error {
	if err := store.CheckTTL(stale); err != nil {
		return err
	}
	if handled, err := s.invalidateWaiting(ctx, keys); handled {
		return err
	}
	if len(keys) == 1 {
		return s.Delete(ctx, keys[0])
	}
	return s.DeleteMany(ctx, keys)
}
