package redisstore

import (
	"context"
	"errors"
	"fmt"
	hashslot "github.com/kuracache/kura/internal/slot"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

// group is the keys of a batch that one multi-key command can carry: all of
// them on a standalone server, one hash slot's on a cluster.
type group struct {
	slot uint16
	idx  []int // positions in the caller's slice
}

// perGroup builds one multi-key command per group from the group's keys.
func perGroup(groups []group, keys []string, build func(keys []string) rueidis.Completed) []rueidis.Completed {
	cmds := make([]rueidis.Completed, len(groups))
	var buf []string
	for g, grp := range groups {
		buf = buf[:0]
		for _, i := range grp.idx {
			buf = append(buf, keys[i])
		}
		cmds[g] = build(buf)
	}
	return cmds
}

// groups splits the n keys of a batch into groups, leaving out (and
// recording in fails) the keys that are invalid.
func (s *Store) groups(cn *conn, n int, key func(int) string, fails *failures) []group {
	var out []group
	var bySlot map[uint16]int
	if cn.cluster {
		bySlot = make(map[uint16]int)
	}
	for i := 0; i < n; i++ {
		k := key(i)
		if err := store.CheckKey(k); err != nil {
			fails.add(k, "", err)
			continue
		}
		if !cn.cluster {
			if len(out) == 0 {
				out = append(out, group{idx: make([]int, 0, n)})
			}
			out[0].idx = append(out[0].idx, i)
			continue
		}
		sl := hashslot.Of(k)
		g, ok := bySlot[sl]
		if !ok {
			g = len(out)
			bySlot[sl] = g
			out = append(out, group{slot: sl})
		}
		out[g].idx = append(out[g].idx, i)
	}
	return out
}

// failures collects the KeyErrors of a batch.
type failures struct {
	be *store.BatchError
	op string
	n  int // keys in the batch; 0 when not counted
}

func (f *failures) add(key, addr string, err error) {
	if f.be == nil {
		f.be = &store.BatchError{Op: f.op}
	}
	f.be.AddNode(key, addr, err)
}

// result is the batch's error: nil, a *store.BatchError, or, when ctx
// ended and every key failed, the context's error for the whole batch.
// When some keys were answered (on a cluster, a stalled master's slots
// fail while the others answer), the failed keys stay in a BatchError with
// their servers, so the answers are used and node health knows which
// server failed.
func (f *failures) result(ctx context.Context) error {
	if f.be == nil {
		return nil
	}
	if f.n > 0 && len(f.be.Errors) < f.n {
		return f.be
	}
	if err := ctx.Err(); err != nil {
		for _, ke := range f.be.Errors {
			if errors.Is(ke.Err, err) {
				return fmt.Errorf("redisstore: %s batch: %w", f.op, err)
			}
		}
	}
	return f.be
}

// GetMany returns the values of keys, aligned with keys; a missing key
// gives nil. It sends one MGET per hash slot (one in all on a standalone
// server), pipelined together, so the batch costs one round trip per
// server. A server's failure fails only its keys, in a *store.BatchError.
func (s *Store) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	cn, err := s.ready(ctx)
	if err != nil {
		return nil, err
	}
	return s.getManyOn(ctx, cn, keys)
}

// getManyOn is GetMany on the client cn.
func (s *Store) getManyOn(ctx context.Context, cn *conn, keys []string) ([][]byte, error) {
	vals := make([][]byte, len(keys))
	fails := failures{op: "get", n: len(keys)}
	groups := s.groups(cn, len(keys), func(i int) string { return keys[i] }, &fails)
	if len(groups) == 0 {
		return vals, fails.result(ctx)
	}
	cmds := perGroup(groups, keys, func(k []string) rueidis.Completed { return cn.c.B().Mget().Key(k...).Build() })
	var split []int // keys of groups that met TRYAGAIN
	for g, r := range s.doMulti(ctx, cn, cmds) {
		grp := groups[g]
		arr, err := r.ToArray()
		if err == nil && len(arr) != len(grp.idx) {
			err = fmt.Errorf("MGET of %d keys answered %d values", len(grp.idx), len(arr))
		}
		if err != nil {
			if isTryAgain(err) {
				split = append(split, grp.idx...)
				continue
			}
			addr := s.addrOfSlot(grp.slot)
			err = s.keyErr(addr, err)
			for _, i := range grp.idx {
				fails.add(keys[i], addr, err)
			}
			continue
		}
		for j, i := range grp.idx {
			s.gotValue(vals, i, keys[i], arr[j].AsBytes, &fails)
		}
	}
	if len(split) > 0 {
		res := s.oneByOne(ctx, cn, keys, split, func(k string) rueidis.Completed { return cn.c.B().Get().Key(k).Build() })
		for j, i := range split {
			s.gotValue(vals, i, keys[i], res[j].AsBytes, &fails)
		}
	}
	return vals, fails.result(ctx)
}

// gotValue stores the answer for keys[i] in vals[i], nil for a missing
// key, or records its failure.
func (s *Store) gotValue(vals [][]byte, i int, key string, answer func() ([]byte, error), fails *failures) {
	b, err := answer()
	switch {
	case err == nil:
		vals[i] = nonNil(b)
	case rueidis.IsRedisNil(err):
	default:
		addr := s.addrOf(key)
		fails.add(key, addr, s.keyErr(addr, err))
	}
}

// oneByOne sends one single-key command per key of keys[idx], pipelined:
// the fallback for a multi-key command that met TRYAGAIN. While Redis
// Cluster migrates a slot, a command on several of its keys is refused
// with TRYAGAIN whenever some of them have moved to the importing master
// and some have not (or do not exist), for as long as the slot's
// migration lasts; a command on one key is always served, by the
// migrating master or, after an ASK redirect (rueidis follows it), by the
// importing one.
func (s *Store) oneByOne(ctx context.Context, cn *conn, keys []string, idx []int, build func(key string) rueidis.Completed) []rueidis.RedisResult {
	s.splits.Add(1)
	cmds := make([]rueidis.Completed, len(idx))
	for j, i := range idx {
		cmds[j] = build(keys[i])
	}
	return s.doMulti(ctx, cn, cmds)
}

// isTryAgain reports Redis Cluster's TRYAGAIN reply (see oneByOne).
func isTryAgain(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsTryAgain()
}

// SetMany writes all items with one pipelined SET key value [PX ttl] per
// item; rueidis sends each server its share at once. Items with an
// invalid key, a negative TTL or an oversized value are not sent and are
// reported in the *store.BatchError, with the keys a server refused.
//
// Per-slot MSET transactions and Lua scripts were measured against this
// (docs/benchmarks/redis.md): none was reliably faster on a standalone
// server, and on a cluster with keys spread over many slots they cost
// 1.25x to 5.8x more. SET PX also sets each value and its TTL atomically and fails
// key by key.
func (s *Store) SetMany(ctx context.Context, items []store.Item) error {
	cn, err := s.ready(ctx)
	if err != nil {
		return err
	}
	fails := failures{op: "set", n: len(items)}
	sent := make([]int, 0, len(items))
	for i, it := range items {
		if err := s.checkItem(it.Key, it.Value, it.TTL); err != nil {
			fails.add(it.Key, "", err)
			continue
		}
		sent = append(sent, i)
	}
	if len(sent) > 0 {
		s.setEach(ctx, cn, items, sent, &fails)
	}
	return fails.result(ctx)
}

// setEach pipelines one SET [PX] per item.
func (s *Store) setEach(ctx context.Context, cn *conn, items []store.Item, sent []int, fails *failures) {
	cmds := make([]rueidis.Completed, len(sent))
	for j, i := range sent {
		s.wrote(items[i].Key)
		cmds[j] = s.setCmd(ctx, cn, items[i].Key, items[i].Value, items[i].TTL)
	}
	for j, r := range s.doMulti(ctx, cn, cmds) {
		if err := r.Error(); err != nil {
			k := items[sent[j]].Key
			addr := s.addrOf(k)
			fails.add(k, addr, s.keyErr(addr, err))
		}
	}
}

// DeleteMany removes keys with one DEL per hash slot (one in all on a
// standalone server), pipelined together. Missing keys are not failures.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	cn, err := s.ready(ctx)
	if err != nil {
		return err
	}
	fails := failures{op: "delete", n: len(keys)}
	groups := s.groups(cn, len(keys), func(i int) string { return keys[i] }, &fails)
	if len(groups) == 0 {
		return fails.result(ctx)
	}
	s.wrote(keys...)
	cmds := perGroup(groups, keys, func(k []string) rueidis.Completed { return cn.c.B().Del().Key(k...).Build() })
	var split []int
	for g, r := range s.doMulti(ctx, cn, cmds) {
		if err := r.Error(); err != nil {
			if isTryAgain(err) {
				split = append(split, groups[g].idx...)
				continue
			}
			addr := s.addrOfSlot(groups[g].slot)
			err = s.keyErr(addr, err)
			for _, i := range groups[g].idx {
				fails.add(keys[i], addr, err)
			}
		}
	}
	if len(split) > 0 {
		res := s.oneByOne(ctx, cn, keys, split, func(k string) rueidis.Completed { return cn.c.B().Del().Key(k).Build() })
		for j, i := range split {
			if err := res[j].Error(); err != nil {
				addr := s.addrOf(keys[i])
				fails.add(keys[i], addr, s.keyErr(addr, err))
			}
		}
	}
	return fails.result(ctx)
}
