package redisring_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/harness/startdown"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/redisring"
	"github.com/kuracache/kura/store/redisstore"
)

// TestStartWithAShardDown starts a ring of 3 shards while the middle
// shard's redis-server is killed (started again later at the same port),
// stopped (SIGSTOP) or has a name that does not resolve: New returns,
// the other shards serve their keys at once, the down shard's keys are
// loaded from the source without an error reaching the caller, the
// breaker marks that shard (and only it) down, and once the server is
// up its keys are hits again without a restart.
func TestStartWithAShardDown(t *testing.T) {
	for _, scenario := range startdown.Scenarios {
		t.Run(scenario, func(t *testing.T) {
			ctx := context.Background()
			r, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
			down, res, up := startdown.Down(t, scenario, r[1].Proc)
			addrs[1] = down
			s := open(t, redisring.Options{Servers: addrs, Redis: redisstore.Options{Resolver: res, DialTimeout: time.Second}})
			if st := s.ConnStats(); st.Connected || len(st.Nodes) != 3 {
				t.Fatalf("ConnStats with a shard down = %+v, want not connected, 3 nodes", st)
			}
			hs := startdown.Health(t, s, true).(*health.Store)
			c, err := kura.New[string](hs, kura.Options{StoreTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			l := &startdown.Loader{}
			keys := make([]string, 60)
			onDown := 0
			for i := range keys {
				keys[i] = fmt.Sprintf("sd:%d", i)
				if s.NodeOf(keys[i]) == down {
					onDown++
				}
			}
			if onDown == 0 || onDown == len(keys) {
				t.Fatalf("%d of %d keys on the down shard: the test needs some on each side", onDown, len(keys))
			}
			// The live shards serve at once: the second FetchMany loads
			// only the down shard's keys.
			for round := 0; round < 3; round++ {
				before := l.Calls()
				m, err := c.FetchMany(ctx, keys, time.Minute, l.LoadMany)
				if err != nil || len(m) != len(keys) {
					t.Fatalf("round %d: FetchMany with a shard down = %d values, %v; want all, no error", round, len(m), err)
				}
				if loaded := l.Calls() - before; round > 0 && loaded != int64(onDown) {
					t.Fatalf("round %d: %d keys loaded, want the %d of the down shard", round, loaded, onDown)
				}
			}
			if scenario != "stalled" {
				for _, k := range keys {
					if s.NodeOf(k) != down {
						continue
					}
					_, err := s.Get(ctx, k)
					if !errors.Is(err, store.ErrNotConnected) {
						t.Fatalf("Get of a down shard's key = %v, want ErrNotConnected", err)
					}
					if ne := store.AsNodeError(err); ne == nil || ne.Addr != down {
						t.Fatalf("Get's error %v does not name the shard %s", err, down)
					}
					break
				}
			}
			servertest.Eventually(t, "the breaker to mark the down shard", func() error {
				_, _ = c.FetchMany(ctx, keys, time.Minute, l.LoadMany)
				for _, n := range hs.Stats().Nodes {
					if (n.State != health.Up) != (n.Addr == down) {
						return fmt.Errorf("shard %s is %v", n.Addr, n.State)
					}
				}
				return nil
			})
			if err := up(); err != nil {
				t.Fatal(err)
			}
			servertest.Eventually(t, "the shard's keys to be hits again", func() error {
				if _, err := c.FetchMany(ctx, keys, time.Minute, l.LoadMany); err != nil {
					return err
				}
				before := l.Calls()
				if _, err := c.FetchMany(ctx, keys, time.Minute, l.LoadMany); err != nil {
					return err
				}
				if n := l.Calls() - before; n != 0 {
					return fmt.Errorf("%d keys still loaded", n)
				}
				if st := s.ConnStats(); !st.Connected {
					return fmt.Errorf("ConnStats = %+v, want connected", st)
				}
				for _, n := range hs.Stats().Nodes {
					if n.State != health.Up {
						return fmt.Errorf("shard %s is %v", n.Addr, n.State)
					}
				}
				return nil
			})
		})
	}
}
