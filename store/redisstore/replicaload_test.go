package redisstore_test

import (
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/history"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// TestReplicaReadsUnderLoad: 64 callers Fetch and FetchMany through a
// Cache with leases whose Store reads from replicas (Sentinel's replica;
// each Cluster master's replica), while a writer in another process (its
// own Store and Cache: the readers' primary window does not cover its
// keys) bumps versions and invalidates. With the writer's Invalidate
// waiting for the replica (the default), no read is older than the last
// Invalidate that returned before it began, and the history holds the
// per-read guarantee of leases: what docs/health.md promises a reader of
// replicas. Without the wait, the stale reads are the replica's lag,
// measured and logged (the documented window), not failed.
func TestReplicaReadsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	sentinel := func(t *testing.T) func(*testing.T, redisstore.Options) *redisstore.Store {
		set := servertest.SentinelSet(t, servers.SentinelConfig{})
		return func(t *testing.T, o redisstore.Options) *redisstore.Store {
			so := sentinelOpts(set)
			so.ReadFromReplicas, so.InvalidateWait = o.ReadFromReplicas, o.InvalidateWait
			return openSentinel(t, so)
		}
	}
	cluster := func(t *testing.T) func(*testing.T, redisstore.Options) *redisstore.Store {
		cl := servertest.RedisClusterWith(t, servers.ClusterConfig{})
		return func(t *testing.T, o redisstore.Options) *redisstore.Store { return openCluster(t, cl, o) }
	}
	for _, topo := range []struct {
		name  string
		start func(t *testing.T) func(*testing.T, redisstore.Options) *redisstore.Store
	}{{"sentinel", sentinel}, {"cluster", cluster}} {
		for _, wait := range []bool{true, false} {
			name := topo.name + "/wait"
			if !wait {
				name = topo.name + "/no wait"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				open := topo.start(t)
				reader := open(t, redisstore.Options{ReadFromReplicas: redisstore.ReplicaReads{Enabled: true}})
				wo := redisstore.Options{}
				if !wait {
					wo.InvalidateWait.Replicas = -1
				}
				l := newFailoverLoad(200, reshardGroups)
				l.window = !wait
				c, err := kura.New[history.Value](reader, kura.Options{Leases: kura.LeasesRequired})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if l.writer, err = kura.New[history.Value](open(t, wo), kura.Options{Leases: kura.LeasesRequired}); err != nil {
					t.Fatal(err)
				}
				defer l.writer.Close()
				r := l.run(t, c, false, 500*time.Millisecond, 0, func() { time.Sleep(2 * time.Second) })
				st := reader.ConnStats()
				t.Logf("replica reads (%s) under 64 callers, a writer invalidating from another process: %v; commands sent to replicas %d", name, r, st.ReplicaReads)
				if st.ReplicaReads == 0 {
					t.Fatal("no read went to a replica")
				}
				if r.Errors != 0 {
					t.Fatalf("%d caller errors", r.Errors)
				}
				if wait && r.Stale != 0 {
					t.Fatalf("%d stale reads with the Invalidate wait; want 0", r.Stale)
				}
			})
		}
	}
}
