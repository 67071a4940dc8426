package redisring

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

var (
	_ store.Tracker      = (*Store)(nil)
	_ store.ConnReporter = (*Store)(nil)
)

// Tracking reports whether the shards' servers report changes
// (Options.Redis.Tracking): kura's L1 tier (kura.Options.L1) then keeps
// values and drops each one when the shard that owns it reports a change.
func (s *Store) Tracking() bool { return s.shards[0].Tracking() }

// Tracks reports whether the shard that owns key reports its changes.
func (s *Store) Tracks(key string) bool { return s.of(key).Tracks(key) }

// Subscribe registers fn with every shard's reports: fn gets the keys any
// shard reported changed, and nil ("drop everything") when any shard's
// tracking connection broke or its server was flushed. A whole-L1 flush
// for one shard's loss drops the other shards' keys too; they are read
// again, which is the price of not keeping which shard each L1 entry came
// from. The returned function unregisters fn from every shard.
func (s *Store) Subscribe(fn func(keys []string)) (cancel func()) {
	return s.onEveryShard(func(sh *redisstore.Store) func() { return sh.Subscribe(fn) })
}

// onEveryShard registers with every shard (sub returns the shard's
// cancel) and returns the function that cancels them all.
func (s *Store) onEveryShard(sub func(sh *redisstore.Store) func()) (cancel func()) {
	cancels := make([]func(), len(s.shards))
	for i, sh := range s.shards {
		cancels[i] = sub(sh)
	}
	return func() {
		for _, c := range cancels {
			c()
		}
	}
}

// GetTracked reads key from its shard and asks that shard's server to
// report its next change.
func (s *Store) GetTracked(ctx context.Context, key string) ([]byte, error) {
	return s.of(key).GetTracked(ctx, key)
}

// GetManyTracked is GetMany with tracking: one pipeline of tracked GETs
// per shard, all shards at once; each shard reports the changes of its own
// keys.
func (s *Store) GetManyTracked(ctx context.Context, keys []string) ([][]byte, error) {
	return read(s, "get", keys, func(sh *redisstore.Store, part []string) ([][]byte, error) {
		return sh.GetManyTracked(ctx, part)
	})
}

// ConnStats merges the shards' connection statistics: Connected only when
// every shard has reached its server, the attempts and failures summed,
// one entry per shard address.
func (s *Store) ConnStats() store.ConnStats {
	out := store.ConnStats{Connected: true}
	for _, sh := range s.shards {
		st := sh.ConnStats()
		out.Connected = out.Connected && st.Connected
		out.ConnectAttempts += st.ConnectAttempts
		out.ConnectFailures += st.ConnectFailures
		out.Nodes = append(out.Nodes, st.Nodes...)
	}
	slices.SortFunc(out.Nodes, func(a, b store.NodeConnStats) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}

var _ store.LeaseWaker = (*Store)(nil)

// WatchedLeaseGet is LeaseGet through each shard's lease push client
// (see store.LeaseWaker): each shard reports the next change of the keys
// it owns. watched is true only when every shard read watched.
func (s *Store) WatchedLeaseGet(ctx context.Context, keys []string, opts store.LeaseOptions) ([]store.LeaseResult, bool, error) {
	var unwatched atomic.Bool
	res, err := read(s, "lease", keys, func(sh *redisstore.Store, part []string) ([]store.LeaseResult, error) {
		res, watched, err := sh.WatchedLeaseGet(ctx, part, opts)
		if !watched {
			unwatched.Store(true)
		}
		return res, err
	})
	return res, !unwatched.Load(), err
}

// WatchLeases registers fn with every shard's lease reports; the returned
// function unregisters it from all of them.
func (s *Store) WatchLeases(fn func(keys []string)) (cancel func()) {
	return s.onEveryShard(func(sh *redisstore.Store) func() { return sh.WatchLeases(fn) })
}
