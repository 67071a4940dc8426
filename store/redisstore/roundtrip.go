package redisstore

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

// doMulti is cn.c.DoMulti that reports its server batches to the
// context's store.RoundTrips (instrumentation), when one asks: one
// RoundTrip per server and command, with the pipeline's bounds. Without
// one it costs a context lookup.
func (s *Store) doMulti(ctx context.Context, cn *conn, cmds []rueidis.Completed) []rueidis.RedisResult {
	rt := store.RoundTrips(ctx)
	if rt == nil {
		return cn.c.DoMulti(ctx, cmds...)
	}
	// rueidis recycles the commands once sent: read them first.
	type sent struct {
		op, addr string
		keys     int
	}
	info := make([]sent, len(cmds))
	for i := range cmds {
		args := cmds[i].Commands()
		keys := 1
		if len(args) > 0 && (args[0] == "MGET" || args[0] == "DEL") {
			keys = len(args) - 1
		}
		if len(args) > 0 {
			info[i].op = args[0]
		}
		info[i].addr, info[i].keys = s.answering(s.addrOfSlot(cmds[i].Slot())), keys
	}
	start := time.Now()
	res := cn.c.DoMulti(ctx, cmds...)
	end := time.Now()
	var b batches
	for i, in := range info {
		b.add(in.op, in.addr, in.keys, failedResult(res, i))
	}
	b.report(rt, start, end)
	return res
}

// execMulti is script.execMulti reporting its server batches (one per
// server: EVALSHA of the script per key) like doMulti.
func (s *Store) execMulti(ctx context.Context, cn *conn, script *script, execs []rueidis.LuaExec) []rueidis.RedisResult {
	rt := store.RoundTrips(ctx)
	if rt == nil {
		return script.execMulti(ctx, cn.c, execs)
	}
	start := time.Now()
	res := script.execMulti(ctx, cn.c, execs)
	end := time.Now()
	var b batches
	for i := range execs {
		addr := ""
		if len(execs[i].Keys) > 0 {
			addr = s.answering(s.addrOf(execs[i].Keys[0]))
		}
		b.add("EVALSHA", addr, len(execs[i].Keys), failedResult(res, i))
	}
	b.report(rt, start, end)
	return res
}

// answering is the network address of the server that answers the
// commands of node addr: addr itself, except in Sentinel mode, whose node
// is the master set (SentinelNode): there, the primary the Store follows
// now (as of its last look, every primaryPoll). Reads that rueidis sends
// to a replica (Options.ReadFromReplicas) are reported with the primary's
// address too: rueidis does not say which server answered them.
func (s *Store) answering(addr string) string {
	if s.masterSet != "" {
		if p := s.primary.Load(); p != nil && *p != "" {
			return *p
		}
	}
	return addr
}

func failedResult(res []rueidis.RedisResult, i int) bool {
	if i >= len(res) {
		return true
	}
	err := res[i].Error()
	return err != nil && !rueidis.IsRedisNil(err)
}

// batches groups the commands of one pipeline by server and command; a
// pipeline carries a few, so a slice beats a map.
type batches []store.RoundTrip

func (b *batches) add(op, addr string, keys int, failed bool) {
	i := 0
	for i < len(*b) && ((*b)[i].Op != op || (*b)[i].Addr != addr) {
		i++
	}
	if i == len(*b) {
		*b = append(*b, store.RoundTrip{Op: op, Addr: addr})
	}
	r := &(*b)[i]
	r.Commands++
	r.Keys += keys
	if failed {
		r.Failed += keys
	}
}

func (b batches) report(fn store.RoundTripFunc, start, end time.Time) {
	for _, r := range b {
		r.Start, r.End = start, end
		fn(r)
	}
}
