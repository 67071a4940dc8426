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

// sendRead sends every shard with keys in g its GETs (redisstore's
// SendGetAt), one shard after another on the caller's goroutine without
// waiting for replies, so the servers work on them at the same time; then
// it reads each shard's replies with read, one shard after another (they
// have usually arrived by then). If that takes longer than hedgeAfter (a
// stopped server: a new connection's handshake or a reply that does not
// come), every shard the caller has not reached yet, to send or to read,
// is finished on a goroutine of its own, so a stalled shard fails only its
// own keys. It returns every shard's Sent once all are read.
func (s *Store) sendRead(ctx context.Context, keys []string, g [][]int, read func(sh int, p *redisstore.Sent)) []*redisstore.Sent {
	const (
		idle    = iota // not sent yet
		sending        // the caller is sending it
		sent           // sent, not read yet
		taken          // read (or sent and read) by someone
	)
	state := make([]atomic.Int32, len(g))
	out := make([]*redisstore.Sent, len(g))
	hedged := make(chan struct{})
	t := time.AfterFunc(hedgeAfter, func() {
		defer close(hedged)
		var wg sync.WaitGroup
		for sh, idx := range g {
			switch {
			case len(idx) == 0:
			case state[sh].CompareAndSwap(idle, taken):
				wg.Go(func() {
					out[sh] = s.shards[sh].SendGetAt(ctx, keys, idx)
					read(sh, out[sh])
				})
			case state[sh].CompareAndSwap(sent, taken):
				wg.Go(func() { read(sh, out[sh]) })
			}
		}
		wg.Wait()
	})
	for sh, idx := range g {
		if len(idx) > 0 && state[sh].CompareAndSwap(idle, sending) {
			out[sh] = s.shards[sh].SendGetAt(ctx, keys, idx)
			state[sh].Store(sent)
		}
	}
	for sh := range g {
		if state[sh].CompareAndSwap(sent, taken) {
			read(sh, out[sh])
		}
	}
	if !t.Stop() {
		<-hedged
	}
	return out
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
		parallel(miss, errs, func(sh int, _ []int) error { return sent[sh].FinishLeases(out, opts) })
	}
	return s.batchErr("lease", g, func(i int) string { return keys[i] }, errs)
}
