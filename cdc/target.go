package cdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kuracache/kura/store"
)

// Target is one cache fleet cdc invalidates: a store (Redis, a Redis
// Cluster or ring, a memcached pool) shared with the applications that
// read it. Several targets are allowed (a cache per region; Redis and
// memcached); the slowest bounds the confirmed position.
type Target struct {
	// Name names the target in metrics, logs and the status line.
	Name string
	// Store is the target's store. Invalidations go through its
	// lease-aware Invalidate (store.Leaser), which voids the lease of a
	// refill in flight so it cannot store what it loaded before the
	// change; a store without leases gets batched deletes
	// (store.BatchDeleter). A TRUNCATE or a lost history walks its keys
	// by prefix (store.KeyWalker): Redis SCAN, memcached's
	// `lru_crawler metadump`.
	Store store.Store
}

// invalidate removes keys from the target in one round trip per server.
func (t *Target) invalidate(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if l, ok := store.Find[store.Leaser](t.Store); ok {
		return l.Invalidate(ctx, keys, 0)
	}
	return store.DeleteMany(ctx, t.Store, keys)
}

// walkBatch is how many keys a prefix walk invalidates per call.
const walkBatch = 500

// invalidatePrefixes removes every key under each prefix, node by node.
// It returns how many keys it invalidated.
func (t *Target) invalidatePrefixes(ctx context.Context, prefixes []string) (int, error) {
	if len(prefixes) == 0 {
		return 0, nil
	}
	w, ok := store.Find[store.KeyWalker](t.Store)
	if !ok {
		return 0, fmt.Errorf("cdc: target %s cannot list its keys, so a TRUNCATE or a lost history cannot be invalidated (use a Redis or memcached store)", t.Name)
	}
	_, nodes, err := w.WalkNodes(ctx)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, n := range nodes {
			_ = n.Close()
		}
	}()
	n := 0
	for _, p := range prefixes {
		for _, node := range nodes {
			var batch []string
			flush := func() error {
				if len(batch) == 0 {
					return nil
				}
				err := t.invalidate(ctx, batch)
				n += len(batch)
				batch = batch[:0]
				return err
			}
			err := node.Walk(ctx, store.WalkOptions{Prefix: p, KeysOnly: true}, func(k store.KeyInfo) error {
				batch = append(batch, k.Key)
				if len(batch) >= walkBatch {
					return flush()
				}
				return nil
			})
			if err == nil {
				err = flush()
			}
			if err != nil {
				return n, fmt.Errorf("cdc: target %s: invalidating keys under %q on %s: %w", t.Name, p, node.Addr(), err)
			}
		}
	}
	return n, nil
}

// backoff is the pause before the n-th retry of a failed target call.
func backoff(n int) time.Duration {
	d := 20 * time.Millisecond << min(n, 6)
	return min(d, time.Second)
}

// errStopped ends a retry loop when Run's context ended.
var errStopped = errors.New("cdc: stopped")
