package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// A stalled server (SIGSTOP, a frozen VM, a network that drops without
// resetting) answers nothing, and each pipelined command whose context
// ends first keeps its slot in the connection's ring (1,024 slots) until
// the server answers or rueidis closes the connection (10 s after the
// last answer). A command that finds the ring full waits for a slot
// without looking at its context, so once about a thousand calls had run
// out of time, every caller of that server waited up to 10 s instead of
// its own deadline (TestStalledServerUnderTraffic). stallGuard counts the
// calls that ended by their context since the server last answered and,
// past stallLimit, fails calls at once instead of queueing them, letting
// one through every stallProbeGap to notice when the server answers again.
// The ring then never holds more than stallLimit plus those probes.
//
// Calls that end by their context do not tell a stalled server from one
// that answers more slowly than their deadline (a loaded server, a slow
// link, callers with a budget of a millisecond or two): their answers
// come, but to callers that left. Tripped on that alone, the guard
// refused the calls of every caller, also those whose deadline the
// server meets, and kept refusing: its probe was one such short call
// (TestSlowServerIsNotStalled). So past stallLimit the guard asks the
// server itself where it can (a PING of its own, queued behind the
// abandoned calls, with stallCheckTimeout): an answer means the calls
// before it were answered too, and the count starts again; while the
// PING is out, calls still pass unless the server left the last one
// unanswered, up to stallHard abandoned calls (the ring's room for the
// callers waiting in it). Where no PING can go (a Sentinel Store's
// replicas) the guard trips at stallLimit as it did.
const (
	stallLimit        = 256
	stallHard         = 512
	stallProbeGap     = 100 * time.Millisecond
	stallCheckTimeout = time.Second
)

// errStalled is the error of a call refused by the stall guard: it is
// refused only with stallLimit calls or more abandoned since the server
// last answered (and, where the guard can ask, its PING unanswered or
// stallHard reached).
var errStalled = fmt.Errorf("%d or more requests on the connection went unanswered (the server looks stalled); the call was not sent", stallLimit)

// stallGuard wraps the client of a standalone or Sentinel Store, whose
// pipelined commands share one connection (or a few, with
// PipelineMultiplex). A Cluster's client has clusterGuard, which keeps
// one count per master. With Sentinel replica reads, calls that rueidis
// sends to a replica are counted apart from the primary's (replica, as
// rueidis's SendToReplicas decides), so a stalled replica does not fail
// the calls to a primary that answers, nor the other way round.
type stallGuard struct {
	rueidis.Client
	replica func(rueidis.Completed) bool // nil: every call goes to one server
	dest    [2]stallState                // [0] the primary, [1] the replicas
}

// stallState is the guard's count for one destination.
type stallState struct {
	abandoned atomic.Int64 // calls ended by their context since the last answer
	lastProbe atomic.Int64 // unix nanoseconds of the last call let through while tripped

	// ping sends the guard's own PING to the destination; nil where none
	// can be routed there (it then trips at stallLimit). Set before the
	// state is used.
	ping       func(context.Context) error
	checking   atomic.Bool  // a PING of the guard's is out
	lastCheck  atomic.Int64 // unix nanoseconds when the last one was sent
	unanswered atomic.Bool  // the last one got no answer, and no call has since

	// closed: a call ended with a connection error (rueidis gave up on
	// the connection) and none has been answered since, so the next
	// call redials (see suspect).
	closed atomic.Bool
}

// to is the state of the destination cmds go to: a replica only when
// rueidis sends all of them there (as its Sentinel client decides).
func (g *stallGuard) to(cmds ...rueidis.Completed) *stallState {
	if g.replica == nil {
		return &g.dest[0]
	}
	for _, c := range cmds {
		if !g.replica(c) {
			return &g.dest[0]
		}
	}
	return &g.dest[1]
}

// admit reports whether a call may be sent.
func (g *stallState) admit() bool {
	n := g.abandoned.Load()
	if n < stallLimit {
		return true
	}
	now := time.Now().UnixNano()
	if g.ping != nil {
		g.check(now)
		if n < stallHard && !g.unanswered.Load() {
			return true
		}
	}
	last := g.lastProbe.Load()
	return now-last >= int64(stallProbeGap) && g.lastProbe.CompareAndSwap(last, now)
}

// check sends the guard's PING unless one is out or the last was sent
// within stallProbeGap. An answer (a Redis error reply is one too) starts
// the count again.
func (g *stallState) check(now int64) {
	if g.checking.Load() || now-g.lastCheck.Load() < int64(stallProbeGap) || !g.checking.CompareAndSwap(false, true) {
		return
	}
	g.lastCheck.Store(now)
	go func() {
		defer g.checking.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), stallCheckTimeout)
		err := g.ping(ctx)
		cancel()
		if err != nil {
			g.unanswered.Store(true)
			return
		}
		g.note(nil) // an answer: the count starts again
	}()
}

// note records how a sent call ended: by its context (its command may
// still hold a ring slot), or with an answer or a connection error (the
// ring has moved on, or the connection and its ring are gone).
//
// A connection error empties the ring, so the count starts again, but it
// is no answer: the server may still be stalled, and the next call
// redials it, so calls stay detached until one is answered.
func (g *stallState) note(err error) {
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		g.abandoned.Add(1)
		return
	}
	if g.abandoned.Load() != 0 {
		g.abandoned.Store(0)
	}
	if g.unanswered.Load() {
		g.unanswered.Store(false)
	}
	if closed := err != nil; g.closed.Load() != closed {
		g.closed.Store(closed)
	}
}

// Do sends cmd unless the server is stalled. Blocking commands go to
// rueidis's pool of dedicated connections, not the ring, and pass as they
// are.
func (g *stallGuard) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if cmd.IsBlock() {
		return g.Client.Do(ctx, cmd)
	}
	return doGuarded(ctx, g.Client, g.to(cmd), cmd)
}

// doGuarded sends cmd with c unless st, the count of the server it goes
// to (nil: none, it passes unguarded), refuses it, and notes how it ended.
func doGuarded(ctx context.Context, c rueidis.Client, st *stallState, cmd rueidis.Completed) rueidis.RedisResult {
	if st == nil {
		return c.Do(ctx, cmd)
	}
	if !st.admit() {
		return rueidis.NewErrorResult(errStalled)
	}
	r := do(ctx, c, st.suspect(ctx), cmd)
	st.note(r.NonRedisError())
	return r
}

// suspect reports whether a call with ctx should wait for its answer
// apart from rueidis (see detach): a call to this destination ended by
// its context or with a connection error since the last answer, and ctx
// can end.
func (g *stallState) suspect(ctx context.Context) bool {
	return (g.abandoned.Load() != 0 || g.closed.Load()) && ctx.Done() != nil
}

// do is c.Do(ctx, cmd), in a goroutine of its own with detached (see
// detach).
func do(ctx context.Context, c rueidis.Client, detached bool, cmd rueidis.Completed) rueidis.RedisResult {
	if !detached {
		return c.Do(ctx, cmd)
	}
	return detach(ctx, func() rueidis.RedisResult { return c.Do(ctx, cmd) }, rueidis.NewErrorResult)
}

// doMulti is c.DoMulti(ctx, multi...), in a goroutine of its own with
// detached (see detach).
func doMulti(ctx context.Context, c rueidis.Client, detached bool, multi []rueidis.Completed) []rueidis.RedisResult {
	if !detached {
		return c.DoMulti(ctx, multi...)
	}
	return detach(ctx, func() []rueidis.RedisResult { return c.DoMulti(ctx, multi...) }, func(err error) []rueidis.RedisResult {
		res := make([]rueidis.RedisResult, len(multi))
		for i := range res {
			res[i] = rueidis.NewErrorResult(err)
		}
		return res
	})
}

// detach runs call in a goroutine of its own and returns its result, or
// failed(ctx.Err()) as soon as ctx ends, leaving the goroutine to finish
// alone.
//
// rueidis does not bound every wait by the call's context. A connection
// that a call's deadline closed (rueidis runs a connection that has only
// ever had one call at a time synchronously, bound by the deadline; or
// its own timeout closed a stalled one) is redialled by the next call on
// that call's context, and every other call waits for that dial
// (mux._pipe), whatever its own deadline: on a stalled server, callers
// with a 40 ms deadline waited for a write-back's 210 ms
// (TestStalledServerDeadlineWhateverHistory). A call ended by its
// context, or by a connection error (rueidis closing the stalled
// connection: TestStalledServerDeadlineAfterConnectionClosed), is what
// comes before such a redial, so the guard detaches calls from then
// until the server answers again; a call that finds the server answering
// goes straight to rueidis and costs two atomic loads more
// (BenchmarkStallGuard; docs/benchmarks/deadline.md). The goroutine left
// behind ends when the dial does (bounded by the dialling call's context
// and Options.DialTimeout).
func detach[R any](ctx context.Context, call func() R, failed func(error) R) R {
	ch := make(chan R, 1)
	go func() { ch <- call() }()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		return failed(ctx.Err())
	}
}

// DoMulti is Do for a pipeline, which takes one ring slot.
func (g *stallGuard) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	if len(multi) == 0 {
		return g.Client.DoMulti(ctx, multi...)
	}
	for _, cmd := range multi {
		if cmd.IsBlock() {
			return g.Client.DoMulti(ctx, multi...)
		}
	}
	st := g.to(multi...)
	if !st.admit() {
		res := make([]rueidis.RedisResult, len(multi))
		for i := range res {
			res[i] = rueidis.NewErrorResult(errStalled)
		}
		return res
	}
	res := doMulti(ctx, g.Client, st.suspect(ctx), multi)
	var err error
	for _, r := range res {
		if err = r.NonRedisError(); err != nil {
			break
		}
	}
	st.note(err)
	return res
}

// clusterGuard is the stall guard of a Cluster's client. rueidis keeps one
// pipelined connection (one ring) per node, so a stalled master fills its
// own ring and no other's: the guard keeps a count per master (and one
// for that master's replicas, with replica reads), and finds a command's
// by its hash slot in the slot map CLUSTER SLOTS last gave (refreshSlots,
// which calls update). A call to a stalled master fails at once while the
// others' calls go on; a pipeline over several masters sends the commands
// of those that are not stalled and fails the others' alone. A command
// with no key (rueidis sends it to any node), a slot the map does not
// know yet, and blocking commands pass unguarded. A stale map costs only
// precision: an answer on a slot's new owner resets the count it is filed
// under.
type clusterGuard struct {
	rueidis.Client
	replica func(rueidis.Completed) bool // nil without replica reads
	table   atomic.Pointer[guardTable]

	mu     sync.Mutex            // serialises update
	byAddr map[string]*stallPair // the counts of the masters in table
}

// stallPair is the guard's counts for a master ([0]) and its replicas ([1]).
type stallPair [2]stallState

// guardTable is the count of each hash slot's master.
type guardTable [numSlots]*stallPair

// update files the slots under the masters m names, keeping the counts of
// the masters already known.
func (g *clusterGuard) update(m *slotMap) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := new(guardTable)
	next := make(map[string]*stallPair, len(g.byAddr))
	for i := range t {
		a := m.addr[i]
		if a == "" {
			continue
		}
		p := next[a]
		if p == nil {
			if p = g.byAddr[a]; p == nil {
				p = new(stallPair)
				p[0].ping = nodePing(g.Client, a)
			}
			next[a] = p
		}
		t[i] = p
	}
	g.byAddr = next
	g.table.Store(t)
}

// of is the count cmd is filed under, nil when it passes unguarded.
func (g *clusterGuard) of(t *guardTable, cmd *rueidis.Completed) *stallState {
	sl := cmd.Slot()
	if t == nil || int(sl) >= len(t) || cmd.IsBlock() {
		return nil
	}
	p := t[sl]
	if p == nil {
		return nil
	}
	if g.replica != nil && g.replica(*cmd) {
		return &p[1]
	}
	return &p[0]
}

// Do sends cmd unless its master is stalled.
func (g *clusterGuard) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return doGuarded(ctx, g.Client, g.of(g.table.Load(), &cmd), cmd)
}

// DoMulti sends the commands of multi whose masters are not stalled (one
// pipeline, which rueidis splits per node) and fails the others'. Each
// master's count notes how its own commands ended.
func (g *clusterGuard) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	t := g.table.Load()
	if t == nil || len(multi) == 0 {
		return g.Client.DoMulti(ctx, multi...)
	}
	var small [8]*stallState
	dests := small[:0]
	for i := range multi {
		if multi[i].IsBlock() {
			return g.Client.DoMulti(ctx, multi...)
		}
		if st := g.of(t, &multi[i]); st != nil && !slices.Contains(dests, st) {
			dests = append(dests, st)
		}
	}
	var refusedSmall [8]*stallState
	refused := refusedSmall[:0]
	for _, st := range dests {
		if !st.admit() {
			refused = append(refused, st)
		}
	}
	detached := false
	for _, st := range dests {
		detached = detached || st.suspect(ctx)
	}
	if len(refused) == 0 {
		res := doMulti(ctx, g.Client, detached, multi)
		g.noteEach(t, dests, multi, res)
		return res
	}
	res := make([]rueidis.RedisResult, len(multi))
	send := make([]rueidis.Completed, 0, len(multi))
	at := make([]int, 0, len(multi))
	for i := range multi {
		if st := g.of(t, &multi[i]); st != nil && slices.Contains(refused, st) {
			res[i] = rueidis.NewErrorResult(errStalled)
			continue
		}
		send = append(send, multi[i])
		at = append(at, i)
	}
	if len(send) == 0 {
		return res
	}
	sent := doMulti(ctx, g.Client, detached, send)
	for j, r := range sent {
		res[at[j]] = r
	}
	g.noteEach(t, slices.DeleteFunc(dests, func(st *stallState) bool { return slices.Contains(refused, st) }), send, sent)
	return res
}

// noteEach notes, for each count in dests, how its commands in cmds
// ended: by their context if one of them did.
func (g *clusterGuard) noteEach(t *guardTable, dests []*stallState, cmds []rueidis.Completed, res []rueidis.RedisResult) {
	if len(dests) == 1 {
		var err error
		for _, r := range res {
			if err = r.NonRedisError(); err != nil {
				break
			}
		}
		dests[0].note(err)
		return
	}
	var small [8]error
	errs := small[:0]
	if len(dests) > len(small) {
		errs = make([]error, 0, len(dests))
	}
	errs = errs[:len(dests)]
	for i, r := range res {
		err := r.NonRedisError()
		if err == nil {
			continue
		}
		if k := slices.Index(dests, g.of(t, &cmds[i])); k >= 0 && errs[k] == nil {
			errs[k] = err
		}
	}
	for k, st := range dests {
		st.note(errs[k])
	}
}

// ping is the guard's PING through c, which sends it to a standalone or
// Sentinel Store's primary (PING is not a read: it never goes to a
// replica).
func ping(c rueidis.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		return c.Do(ctx, c.B().Ping().Build()).NonRedisError()
	}
}

// errNoNode is the guard PING's error for a master rueidis no longer has.
var errNoNode = errors.New("not a node of the cluster now")

// nodePing is the guard's PING to one Cluster master, on the connection
// (the ring) its commands share.
func nodePing(c rueidis.Client, addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		n, ok := c.Nodes()[addr]
		if !ok {
			return errNoNode
		}
		return n.Do(ctx, n.B().Ping().Build()).NonRedisError()
	}
}
