package redisstore

import (
	"context"
	"sync"
)

// Concurrent waiting invalidations share one WAIT. Each waiting
// Invalidate costs a dedicated connection and a round trip to the
// replica and back (about 20x a plain Invalidate, BENCHMARKS.md); under
// many concurrent invalidations the standalone/Sentinel Store sends the
// keys of every Invalidate that arrives while another batch is being
// waited for in one DEL, followed by one WAIT that covers them all (WAIT
// waits for every write sent before it on its connection). An Invalidate
// returns when its batch's WAIT has answered, with the batch's error.

// waitBatch is the keys of the invalidations that share one DEL and WAIT.
type waitBatch struct {
	keys []string
	done chan struct{}
	err  error
}

// waitCombiner forms the batches: cur is open to new keys until its
// leader (the invalidation that opened it) takes the single slot.
type waitCombiner struct {
	mu   sync.Mutex
	cur  *waitBatch
	slot chan struct{} // one batch on the wire at a time
}

func newWaitCombiner() *waitCombiner {
	return &waitCombiner{slot: make(chan struct{}, 1)}
}

// waitCombined deletes keys and waits for want replicas, sharing the DEL
// and WAIT with the invalidations running at the same time.
func (s *Store) waitCombined(ctx context.Context, cn *conn, keys []string, want int) error {
	w := s.combiner
	w.mu.Lock()
	b := w.cur
	leader := b == nil
	if leader {
		b = &waitBatch{done: make(chan struct{})}
		w.cur = b
	}
	b.keys = append(b.keys, keys...)
	w.mu.Unlock()
	if !leader {
		select {
		case <-b.done:
			return b.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case w.slot <- struct{}{}:
	case <-ctx.Done():
		// Someone must still run the batch: the others in it wait.
		s.mu.Lock()
		if s.closed.Load() {
			w.mu.Lock()
			if w.cur == b {
				w.cur = nil
			}
			w.mu.Unlock()
			b.err = s.wrapErr(s.addrOf(keys[0]), ctx.Err())
			close(b.done)
		} else {
			s.bg.Add(1)
			go func() {
				defer s.bg.Done()
				s.runBatch(context.WithoutCancel(ctx), cn, b, want)
			}()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
	s.runBatchHeld(ctx, cn, b, want)
	return b.err
}

// runBatch takes the slot and runs b.
func (s *Store) runBatch(ctx context.Context, cn *conn, b *waitBatch, want int) {
	s.combiner.slot <- struct{}{}
	s.runBatchHeld(ctx, cn, b, want)
}

// runBatchHeld closes b to new keys and runs it; the caller holds the
// slot, which it frees.
func (s *Store) runBatchHeld(ctx context.Context, cn *conn, b *waitBatch, want int) {
	w := s.combiner
	w.mu.Lock()
	if w.cur == b {
		w.cur = nil
	}
	w.mu.Unlock()
	// The batch is the others' too: the leader's cancellation must not
	// fail them (the WAIT is bounded by its own timeout).
	b.err = s.waitGroup(context.WithoutCancel(ctx), cn, dedupe(b.keys), want)
	<-w.slot
	close(b.done)
}

// dedupe drops repeated keys, keeping the first.
func dedupe(keys []string) []string {
	if len(keys) < 2 {
		return keys
	}
	seen := make(map[string]struct{}, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}
