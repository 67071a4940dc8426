package redisring_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisring"
)

// TestStalledShardFailsOnlyItsKeys stops (SIGSTOP) the first shard of a
// connected ring, the one a batch read reaches first, and reads a batch
// over all shards with GetMany and LeaseGet under a deadline: the other
// shards' keys are answered, only the stopped shard's keys fail, naming
// it. Reading the shards one after another without the hedge would spend
// the whole deadline on the stopped shard and fail every key.
func TestStalledShardFailsOnlyItsKeys(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			r, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
			s := open(t, redisring.Options{Servers: addrs})
			redisring.SetParallelReads(s, parallel)
			ctx := context.Background()
			keys := make([]string, 60)
			var items []store.Item
			for i := range keys {
				keys[i] = fmt.Sprintf("hedge:%d", i)
				items = append(items, store.Item{Key: keys[i], Value: []byte(keys[i])})
			}
			if err := s.SetMany(ctx, items); err != nil {
				t.Fatal(err)
			}
			stalled := addrs[0]
			onStalled := 0
			for _, k := range keys {
				if s.NodeOf(k) == stalled {
					onStalled++
				}
			}
			if onStalled == 0 || onStalled == len(keys) {
				t.Fatalf("%d of %d keys on the first shard: the test needs some on each side", onStalled, len(keys))
			}
			if err := r[0].Proc.Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r[0].Proc.Resume() })
			check := func(op string, values func(i int) []byte, err error) {
				t.Helper()
				var be *store.BatchError
				if !errors.As(err, &be) {
					t.Fatalf("%s with the first shard stopped: %v, want a *store.BatchError", op, err)
				}
				failed := be.Failed()
				for i, k := range keys {
					_, bad := failed[k]
					switch {
					case s.NodeOf(k) == stalled && !bad:
						t.Fatalf("%s: %s of the stopped shard did not fail", op, k)
					case s.NodeOf(k) != stalled && (bad || string(values(i)) != k):
						t.Fatalf("%s: %s of a live shard = %q, failed %v; want its value", op, k, values(i), failed[k])
					}
				}
				for _, ke := range be.Errors {
					if ne := store.AsNodeError(ke.Err); ne == nil || ne.Addr != stalled {
						t.Fatalf("%s: the error of %s does not name the stopped shard %s: %v", op, ke.Key, stalled, ke.Err)
					}
				}
			}
			dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			vals, err := s.GetMany(dctx, keys)
			cancel()
			check("GetMany", func(i int) []byte { return vals[i] }, err)
			dctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
			res, err := s.LeaseGet(dctx, keys, store.LeaseOptions{TTL: time.Second, Placeholder: []byte("\x00ph")})
			cancel()
			check("LeaseGet", func(i int) []byte { return res[i].Value }, err)
		})
	}
}
