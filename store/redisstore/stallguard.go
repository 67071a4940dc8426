package redisstore

import (
	"context"
	"errors"
	"fmt"
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
const (
	stallLimit    = 256
	stallProbeGap = 100 * time.Millisecond
)

// errStalled is the error of a call refused by the stall guard.
var errStalled = fmt.Errorf("%d requests on the connection are still unanswered (the server is stalled); the call was not sent", stallLimit)

// stallGuard wraps the client of a standalone or Sentinel Store, whose
// pipelined commands share one connection (or a few, with
// PipelineMultiplex). A Cluster's client is not wrapped: one stalled node
// must not stop the calls to the others, and the guard does not know which
// node a command goes to.
type stallGuard struct {
	rueidis.Client
	abandoned atomic.Int64 // calls ended by their context since the last answer
	lastProbe atomic.Int64 // unix nanoseconds of the last call let through while tripped
}

// admit reports whether a call may be sent.
func (g *stallGuard) admit() bool {
	if g.abandoned.Load() < stallLimit {
		return true
	}
	now := time.Now().UnixNano()
	last := g.lastProbe.Load()
	return now-last >= int64(stallProbeGap) && g.lastProbe.CompareAndSwap(last, now)
}

// note records how a sent call ended: by its context (its command may
// still hold a ring slot), or with an answer or a connection error (the
// ring has moved on, or the connection and its ring are gone).
func (g *stallGuard) note(err error) {
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		g.abandoned.Add(1)
		return
	}
	if g.abandoned.Load() != 0 {
		g.abandoned.Store(0)
	}
}

// Do sends cmd unless the server is stalled. Blocking commands go to
// rueidis's pool of dedicated connections, not the ring, and pass as they
// are.
func (g *stallGuard) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if cmd.IsBlock() {
		return g.Client.Do(ctx, cmd)
	}
	if !g.admit() {
		return rueidis.NewErrorResult(errStalled)
	}
	r := g.Client.Do(ctx, cmd)
	g.note(r.NonRedisError())
	return r
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
	if !g.admit() {
		res := make([]rueidis.RedisResult, len(multi))
		for i := range res {
			res[i] = rueidis.NewErrorResult(errStalled)
		}
		return res
	}
	res := g.Client.DoMulti(ctx, multi...)
	var err error
	for _, r := range res {
		if err = r.NonRedisError(); err != nil {
			break
		}
	}
	g.note(err)
	return res
}
