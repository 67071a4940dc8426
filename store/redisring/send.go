package redisring

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// How a ring reads a batch. rueidis's DoMultiStream writes a pipeline on
// a connection of its own (from the client's pool) and returns once it is
// flushed; the replies are read later, one WriteTo per command. So the
// caller writes every shard its share, one shard after another, and the
// three servers work at the same time while it writes the next; then it
// reads the replies, which have usually arrived by the time it gets to a
// shard. Compared with a goroutine per shard, each sending one MGET with
// DoMulti (which writes and then waits), this starts no goroutine, parses
// no message per value (a value is copied once, into an allocation of its
// size) and leaves no goroutine to schedule when a reply arrives. A
// streamed reply must be a single string, so each shard gets one GET per
// key instead of one MGET; the servers spend a little more per key.

// maxSends bounds the batches a Store reads at once over dedicated
// connections (send): each holds one connection per shard from rueidis's
// pool, so a shard never has more than this many such connections. The
// batches beyond it go through the shards' shared auto-pipelined
// connections, one goroutine per shard, where many callers' commands
// share a write.
const maxSends = 8

// hedgeAfter is how long the caller reads the shards' replies one after
// another before the shards it has not reached yet are read at once, each
// on a goroutine of its own: a stopped shard costs its own keys the
// deadline, not the other shards' keys.
const hedgeAfter = 2 * time.Millisecond

// sending reports whether a batch over the shards' key indexes g is read
// with sendRead: when it spans several shards that can all send
// (redisstore.Store.CanSend) and fewer than maxSends batches are being
// read so. It then counts the batch: the caller ends it with
// s.sends.Add(-1).
func (s *Store) sending(g [][]int) bool {
	if s.noSends {
		return false
	}
	n := 0
	for sh, idx := range g {
		if len(idx) == 0 {
			continue
		}
		if !s.shards[sh].CanSend() {
			return false
		}
		n++
	}
	if n < 2 {
		return false // one shard: its MGET on the caller's goroutine
	}
	if s.sends.Add(1) > maxSends {
		s.sends.Add(-1)
		return false
	}
	return true
}

// The states of a shard in a batch read by sendRead.
const (
	idle    = iota // not sent yet
	sending        // the caller is sending it
	sent           // sent, not read yet
	taken          // being read (or sent and read) by someone
)

// batch is one sendRead in flight, registered with the Store's hedger.
type batch struct {
	s     *Store
	ctx   context.Context
	keys  []string
	g     [][]int
	read  func(sh int, p *redisstore.Sent)
	state []atomic.Int32
	out   []*redisstore.Sent
	start time.Time
	wg    sync.WaitGroup // the hedger's goroutines for this batch
}

// hedger finishes the shards of batches that have taken longer than
// hedgeAfter on goroutines of their own. One timer per Store, armed only
// while batches are in flight, rather than one per batch: arming a timer
// wakes the runtime's poller, which cost about 3 % of a warm batch's
// client CPU.
type hedger struct {
	mu     sync.Mutex
	active []*batch
	timer  *time.Timer
	armed  bool
}

func (h *hedger) add(b *batch) {
	h.mu.Lock()
	h.active = append(h.active, b)
	if !h.armed {
		h.armed = true
		if h.timer == nil {
			h.timer = time.AfterFunc(hedgeAfter, h.fire)
		} else {
			h.timer.Reset(hedgeAfter)
		}
	}
	h.mu.Unlock()
}

// remove unregisters b; after it, the hedger starts nothing more for b.
func (h *hedger) remove(b *batch) {
	h.mu.Lock()
	for i, a := range h.active {
		if a == b {
			last := len(h.active) - 1
			h.active[i] = h.active[last]
			h.active[last] = nil
			h.active = h.active[:last]
			break
		}
	}
	h.mu.Unlock()
}

// fire hedges every batch older than hedgeAfter and re-arms the timer
// while batches are in flight: for the younger ones, and again for the
// hedged ones, whose caller may have been sending a shard when this one
// fired (a shard in the middle of being sent is left to the caller).
func (h *hedger) fire() {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	next := time.Duration(-1)
	for _, b := range h.active {
		wait := hedgeAfter
		if age := now.Sub(b.start); age < hedgeAfter {
			wait = hedgeAfter - age
		} else {
			b.hedge()
		}
		if next < 0 || wait < next {
			next = wait
		}
	}
	if next < 0 {
		h.armed = false
		return
	}
	h.timer.Reset(next)
}

// hedge starts a goroutine for each shard of b the caller has not reached
// yet: to send and read it, or to read it. Called with the hedger's lock
// held, so that b.wg.Add happens before the caller's remove returns.
func (b *batch) hedge() {
	for sh, idx := range b.g {
		switch {
		case len(idx) == 0:
		case b.state[sh].CompareAndSwap(idle, taken):
			b.wg.Go(func() {
				b.out[sh] = b.s.shards[sh].SendGetAt(b.ctx, b.keys, idx)
				b.read(sh, b.out[sh])
			})
		case b.state[sh].CompareAndSwap(sent, taken):
			b.wg.Go(func() { b.read(sh, b.out[sh]) })
		}
	}
}

// sendRead sends every shard with keys in g its GETs (redisstore's
// SendGetAt), one shard after another on the caller's goroutine without
// waiting for replies, so the servers work on them at the same time; then
// it reads each shard's replies with read, one shard after another (they
// have usually arrived by then). If that takes longer than hedgeAfter (a
// stopped server: a new connection's handshake or a reply that does not
// come), every shard the caller has not reached yet, to send or to read,
// is finished on a goroutine of its own (the Store's hedger), so a
// stalled shard fails only its own keys. It returns every shard's Sent
// once all are read.
func (s *Store) sendRead(ctx context.Context, keys []string, g [][]int, read func(sh int, p *redisstore.Sent)) []*redisstore.Sent {
	b := &batch{s: s, ctx: ctx, keys: keys, g: g, read: read,
		state: make([]atomic.Int32, len(g)), out: make([]*redisstore.Sent, len(g)), start: time.Now()}
	s.hedge.add(b)
	for sh, idx := range g {
		if len(idx) > 0 && b.state[sh].CompareAndSwap(idle, sending) {
			b.out[sh] = s.shards[sh].SendGetAt(ctx, keys, idx)
			b.state[sh].Store(sent)
		}
	}
	for sh := range g {
		if b.state[sh].CompareAndSwap(sent, taken) {
			read(sh, b.out[sh])
		}
	}
	s.hedge.remove(b)
	b.wg.Wait()
	return b.out
}

// leaseSent is LeaseGet over sends: every shard's GETs are sent and read
// as for GetMany; then the shards that found keys empty take those keys'
// leases, all at once.
func (s *Store) leaseSent(ctx context.Context, keys []string, g [][]int, out []store.LeaseResult, opts store.LeaseOptions) error {
	sent := s.sendRead(ctx, keys, g, func(_ int, p *redisstore.Sent) { p.ReadLeases(out) })
	errs := make([]error, len(g))
	var miss [][]int
	for sh, p := range sent {
		switch {
		case p == nil:
		case p.Misses():
			if miss == nil {
				miss = make([][]int, len(g))
			}
			miss[sh] = g[sh]
		default:
			errs[sh] = p.FinishLeases(out, opts)
		}
	}
	if miss != nil {
		s.parallel(miss, errs, func(sh int, _ []int) error { return sent[sh].FinishLeases(out, opts) })
	}
	return s.batchErr("lease", g, func(i int) string { return keys[i] }, errs)
}
