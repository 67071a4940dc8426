package staleness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/kuracache/kura/store"
)

// errEnough ends a walk that has seen enough keys.
var errEnough = errors.New("staleness: enough keys")

// StoreKeys is an Options.Keys that samples the keys st holds under
// prefix: it walks each node's keys (Redis SCAN, memcached's lru_crawler
// metadump), stops after 20×n keys in all (shared out over the nodes), and returns n of those seen,
// chosen uniformly (reservoir sampling). The walk's order is the
// server's, so on a cache much larger than 20×n a round samples the part
// its walk reaches first; on Redis that part is spread over the keyspace
// by the hash table. st must list its keys (store.KeyWalker).
func StoreKeys(st store.Store, prefix string) func(ctx context.Context, n int) ([]string, error) {
	return func(ctx context.Context, n int) ([]string, error) {
		w, ok := store.Find[store.KeyWalker](st)
		if !ok {
			return nil, errors.New("the store cannot list its keys (use a Redis or memcached store, or give Options.Keys)")
		}
		_, nodes, err := w.WalkNodes(ctx)
		if err != nil {
			return nil, err
		}
		defer func() {
			for _, nd := range nodes {
				_ = nd.Close()
			}
		}()
		perNode := max(n, 20*n/max(1, len(nodes))) // every node gets its share of the walk
		var (
			seen   int
			sample = make([]string, 0, n)
		)
		for _, nd := range nodes {
			onNode := 0
			err := nd.Walk(ctx, store.WalkOptions{Prefix: prefix, KeysOnly: true}, func(k store.KeyInfo) error {
				seen++
				if len(sample) < n {
					sample = append(sample, k.Key)
				} else if j := rand.IntN(seen); j < n {
					sample[j] = k.Key
				}
				if onNode++; onNode >= perNode {
					return errEnough
				}
				return nil
			})
			if err != nil && !errors.Is(err, errEnough) {
				return nil, fmt.Errorf("walking %s: %w", nd.Addr(), err)
			}
		}
		return sample, nil
	}
}
