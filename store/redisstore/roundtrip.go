package redisstore

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	hashslot "github.com/kuracache/kura/internal/slot"
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
	// In Sentinel mode a pipeline goes to the replica only if every
	// command of it does (rueidis's sentinel client); on a Cluster each
	// command goes to its slot's replica or master.
	all := s.masterSet != ""
	for i := range cmds {
		all = all && s.toReplica(cmds[i])
	}
	for i := range cmds {
		args := cmds[i].Commands()
		keys := 1
		if len(args) > 0 && (args[0] == "MGET" || args[0] == "DEL") {
			keys = len(args) - 1
		}
		if len(args) > 0 {
			info[i].op = args[0]
		}
		sl := cmds[i].Slot()
		info[i].addr, info[i].keys = s.answering(s.addrOfSlot(sl)), keys
		if all || (s.masterSet == "" && s.toReplica(cmds[i])) {
			if r := s.replicaOf(sl); r != "" {
				info[i].addr = r
			}
		}
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

// ServerOf implements store.ServerLocator: the server a command on key
// goes to now. In Sentinel mode that is the primary the Store follows (as
// of its last look at the sentinels, every primaryPoll), not the master
// set NodeOf names; with Options.ReadFromReplicas a read of a key this
// Store did not write within the primary window goes to a replica: the
// one the Sentinel-mode client reads from, or the one rueidis chose for
// the key's slot on a Cluster. "" when not known.
func (s *Store) ServerOf(key string, read bool) string {
	if read && s.recent != nil && !s.recent.has(key) {
		if r := s.replicaOf(hashslot.Of(key)); r != "" {
			return r
		}
	}
	return s.answering(s.addrOf(key))
}

var _ store.ServerLocator = (*Store)(nil)

// replicaOf is the replica that reads of slot sl go to with replica reads
// on, "" when not known (no replica; replica reads off).
func (s *Store) replicaOf(sl uint16) string {
	if s.recent == nil {
		return ""
	}
	if s.masterSet != "" {
		if r := s.replica.Load(); r != nil {
			return *r
		}
		return ""
	}
	return s.replicaSlots.of(sl)
}

// noteReplica records the replica a Sentinel-mode client reads from: the
// node of its two (primary and replica) that is not the primary.
func (s *Store) noteReplica(cn *conn, primary string) {
	r := ""
	for a := range cn.c.Nodes() {
		if a != primary {
			r = a
		}
	}
	if old := s.replica.Load(); old == nil || *old != r {
		s.replica.Store(&r)
	}
}

// slotReplicas is the replica rueidis's Cluster client chose for each
// slot (ClientOption.ReplicaSelector), for ServerOf and the round trips'
// addresses.
type slotReplicas struct {
	mu    sync.Mutex
	addrs map[string]*string // one string per replica address
	slot  [hashslot.Count]atomic.Pointer[string]
}

// pick is the ReplicaSelector: a random replica of slot sl, as rueidis
// picks by default, noted.
func (r *slotReplicas) pick(sl uint16, replicas []rueidis.NodeInfo) int {
	if len(replicas) == 0 {
		return -1 // rueidis falls back to the master
	}
	i := rand.IntN(len(replicas))
	r.mu.Lock()
	a, ok := r.addrs[replicas[i].Addr]
	if !ok {
		if r.addrs == nil {
			r.addrs = map[string]*string{}
		}
		addr := replicas[i].Addr
		a = &addr
		r.addrs[addr] = a
	}
	r.mu.Unlock()
	if int(sl) < len(r.slot) {
		r.slot[sl].Store(a)
	}
	return i
}

func (r *slotReplicas) of(sl uint16) string {
	if r == nil || int(sl) >= len(r.slot) {
		return ""
	}
	if a := r.slot[sl].Load(); a != nil {
		return *a
	}
	return ""
}

// answering is the network address of the server that answers the
// commands of node addr: addr itself, except in Sentinel mode, whose node
// is the master set (SentinelNode): there, the primary the Store follows
// now (as of its last look, every primaryPoll). Reads that go to a
// replica are told apart by the callers (ServerOf, doMulti).
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
