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
// A group that is the whole batch in order hands keys over as they are.
func perGroup(groups []group, keys []string, build func(keys []string) rueidis.Completed) []rueidis.Completed {
	cmds := make([]rueidis.Completed, len(groups))
	var buf []string
	for g, grp := range groups {
		if inOrder(grp.idx, len(keys)) {
			cmds[g] = build(keys)
			continue
		}
		buf = buf[:0]
		if cap(buf) < len(grp.idx) {
			buf = make([]string, 0, len(grp.idx))
		}
		for _, i := range grp.idx {
			buf = append(buf, keys[i])
		}
		cmds[g] = build(buf)
	}
	return cmds
}

// inOrder reports whether idx is 0..n-1.
func inOrder(idx []int, n int) bool {
	if len(idx) != n {
		return false
	}
	for j, i := range idx {
		if i != j {
			return false
		}
	}
	return true
}

// groups splits the keys of a batch into groups, leaving out (and
// recording in fails) the keys that are invalid. idx names the positions
// of keys the batch reads (a ring shard's share of a larger batch); nil
// means all of them. On a standalone server whose keys are all valid the
// one group is idx itself, or 0..len(keys)-1: a batch of n keys costs one
// slice of n positions, no more.
func (s *Store) groups(cn *conn, keys []string, idx []int, fails *failures) []group {
	n := len(keys)
	if idx != nil {
		n = len(idx)
	}
	at := func(j int) int {
		if idx == nil {
			return j
		}
		return idx[j]
	}
	if !cn.cluster {
		g := group{idx: idx}
		for j := 0; j < n; j++ {
			if err := store.CheckKey(keys[at(j)]); err != nil {
				g.idx = validOnly(keys, idx, n, fails)
				break
			}
		}
		if g.idx == nil {
			g.idx = make([]int, n)
			for j := range g.idx {
				g.idx[j] = j
			}
		}
		if len(g.idx) == 0 {
			return nil
		}
		return []group{g}
	}
	var out []group
	bySlot := make(map[uint16]int)
	for j := 0; j < n; j++ {
		i := at(j)
		k := keys[i]
		if err := store.CheckKey(k); err != nil {
			fails.add(k, "", err)
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

// validOnly is the positions of the valid keys among the n named by idx
// (all keys when nil), recording the invalid ones in fails: never nil.
func validOnly(keys []string, idx []int, n int, fails *failures) []int {
	out := make([]int, 0, n)
	for j := 0; j < n; j++ {
		i := j
		if idx != nil {
			i = idx[j]
		}
		if err := store.CheckKey(keys[i]); err != nil {
			fails.add(keys[i], "", err)
			continue
		}
		out = append(out, i)
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

// GetManyAt is GetMany for a part of a larger batch, for a store that
// spreads one batch over several Stores (a ring's shards): it reads
// keys[i] for every i in idx and sets vals[i] (aligned with keys) to its
// value, leaving it nil for a missing key; the other elements of vals are
// not touched, so several Stores may fill one vals at once. The error
// names only keys of idx.
func (s *Store) GetManyAt(ctx context.Context, keys []string, idx []int, vals [][]byte) error {
	cn, err := s.ready(ctx)
	if err != nil {
		return err
	}
	fails := failures{op: "get", n: len(idx)}
	s.mget(ctx, cn, keys, idx, &fails, func(i int, v []byte) { vals[i] = v })
	return fails.result(ctx)
}

// getManyOn is GetMany on the client cn.
func (s *Store) getManyOn(ctx context.Context, cn *conn, keys []string) ([][]byte, error) {
	vals := make([][]byte, len(keys))
	fails := failures{op: "get", n: len(keys)}
	s.mget(ctx, cn, keys, nil, &fails, func(i int, v []byte) { vals[i] = v })
	return vals, fails.result(ctx)
}

// mget reads keys[i] for every i in idx (every key when idx is nil) with
// one MGET per hash slot, pipelined, and hands each value found to
// put(i, value) (never nil: an empty value is empty, not nil); a missing
// key is not handed over, a failed one is recorded in fails.
func (s *Store) mget(ctx context.Context, cn *conn, keys []string, idx []int, fails *failures, put func(i int, v []byte)) {
	groups := s.groups(cn, keys, idx, fails)
	if len(groups) == 0 {
		return
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
			s.gotValue(i, keys[i], arr[j].AsBytes, fails, put)
		}
	}
	if len(split) > 0 {
		res := s.oneByOne(ctx, cn, keys, split, func(k string) rueidis.Completed { return cn.c.B().Get().Key(k).Build() })
		for j, i := range split {
			s.gotValue(i, keys[i], res[j].AsBytes, fails, put)
		}
	}
}

// gotValue hands the answer for keys[i] to put, or records its failure;
// a missing key is neither.
func (s *Store) gotValue(i int, key string, answer func() ([]byte, error), fails *failures, put func(i int, v []byte)) {
	b, err := answer()
	switch {
	case err == nil:
		put(i, nonNil(b))
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
	vc := getValueCopy()
	for j, i := range sent {
		s.wrote(items[i].Key)
		cmds[j] = s.setCmd(cn, vc, items[i].Key, items[i].Value, items[i].TTL)
	}
	res := s.doMulti(ctx, cn, cmds)
	answered := true
	for _, r := range res {
		answered = answered && r.NonRedisError() == nil
	}
	vc.release(answered)
	for j, r := range res {
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
	groups := s.groups(cn, keys, nil, &fails)
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
