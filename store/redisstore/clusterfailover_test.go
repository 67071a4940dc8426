package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/history"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/slot"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// TestClusterFailoverUnderLoad promotes the replica of the master that
// serves the load's first hash slot, on a 3-master Cluster with a
// replica each, under 64 callers (Fetch and FetchMany with leases and the
// L1 over tracking) and a writer invalidating: once by CLUSTER FAILOVER
// (a managed service's maintenance: the old master stays, as a replica),
// once by SIGKILLing the master (promoted after cluster-node-timeout,
// 1 s here). No caller sees an error (the loader serves them while the
// slot has no master), the history holds the per-read guarantee of
// leases with the L1 (internal/history) and no read is older than the
// last Invalidate that returned before it began: the Invalidate wait
// (one replica, the default on a Cluster with replicas) keeps a deletion
// the old master acknowledged from being lost with it, and a lease taken
// on the old master never lands a stale fill on the new one.
func TestClusterFailoverUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	for _, tc := range []struct {
		name string
		kill bool
	}{{"CLUSTER FAILOVER", false}, {"master killed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cl := servertest.RedisClusterWith(t, servers.ClusterConfig{NodeTimeout: time.Second})
			s := openCluster(t, cl, redisstore.Options{Tracking: redisstore.Tracking{Enabled: true}})
			l := newFailoverLoad(200, reshardGroups)
			c, err := kura.New[history.Value](newRecStore(t, s, &l.rec), kura.Options{L1: kura.L1Options{MaxBytes: 8 << 20}, Leases: kura.LeasesRequired})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			sl := int(slot.Of(l.keys[0]))
			var promoted *servers.Redis
			_, flushes := s.TrackingReports()
			r := l.run(t, c, true, time.Second, time.Second, func() {
				m, err := cl.MasterOf(ctx, sl)
				if err != nil {
					t.Error(err)
					return
				}
				rep := cl.Replicas[slicesIndex(cl.Nodes, m)][0]
				if tc.kill {
					m.Kill()
				} else if _, err := rep.Do(ctx, "CLUSTER", "FAILOVER"); err != nil {
					t.Error(err)
					return
				}
				wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				defer cancel()
				if promoted, err = cl.WaitMaster(wctx, sl, m); err != nil {
					t.Error(err)
					return
				}
				// The Store has followed once a write through it lands
				// on the promoted replica.
				for wctx.Err() == nil {
					err := s.Set(wctx, l.keys[0]+":probe", []byte("x"), time.Minute)
					if v, _ := promoted.Do(wctx, "GET", l.keys[0]+":probe"); err == nil && v == "x" {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				t.Error("the Store did not follow the promotion")
			})
			t.Logf("Cluster %s under 64 callers: %v; writer errors while the slot had no master: %d", tc.name, r, r.WriterErrors)
			if r.Errors != 0 || r.Stale != 0 {
				t.Fatalf("errors %d, stale reads %d; want 0", r.Errors, r.Stale)
			}
			if promoted == nil || promoted != cl.Replicas[slicesIndex(cl.Nodes, promotedFrom(cl, promoted))][0] {
				t.Fatalf("the replica was not promoted (new master %v)", promoted)
			}
			if _, f := s.TrackingReports(); tc.kill && f == flushes {
				t.Fatal("the master was killed and the L1 was not flushed")
			}
			if st := s.ConnStats(); tc.kill && st.OrphanedLeases == 0 {
				t.Logf("no orphaned lease to release this run (ConnStats %+v)", st)
			}
			if r.FirstHit == 0 {
				t.Fatal("no call was served from the cache after the promotion")
			}
		})
	}
}

// slicesIndex returns the index of n in nodes, -1 if absent.
func slicesIndex(nodes []*servers.Redis, n *servers.Redis) int {
	for i, x := range nodes {
		if x == n {
			return i
		}
	}
	return -1
}

// promotedFrom returns the master that replica r was started with.
func promotedFrom(cl *servers.RedisCluster, r *servers.Redis) *servers.Redis {
	for i, rs := range cl.Replicas {
		for _, x := range rs {
			if x == r {
				return cl.Nodes[i]
			}
		}
	}
	return nil
}

// TestOrphanedLeaseReleased: a Fill that gets no answer (the link to the
// server stalls until the caller's deadline) leaves its lease's
// placeholder on the server; once the server answers again the Store
// releases it in the background, so readers do not wait for a fill that
// will never come until the lease expires. A Release after a Fill that
// did land changes nothing (the value stays).
func TestOrphanedLeaseReleased(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	r := servertest.Redis(t, servers.RedisConfig{})
	proxy := servertest.Proxy(t, r.Addr, faults.ProxyOptions{})
	s := open(t, "redis://"+proxy.Addr(), redisstore.Options{})
	ctx := context.Background()
	opts := store.LeaseOptions{TTL: time.Minute, Placeholder: []byte("\x00lease-orphan")}
	res, err := s.LeaseGet(ctx, []string{"orphan", "filled"}, opts)
	if err != nil || !res[0].Won || !res[1].Won {
		t.Fatalf("LeaseGet = %+v, %v", res, err)
	}
	if err := s.Fill(ctx, []store.Fill{{Lease: res[1].Lease, Value: []byte("v"), TTL: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	proxy.Stall()
	fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = s.Fill(fctx, []store.Fill{{Lease: res[0].Lease, Value: []byte("v"), TTL: time.Minute}, {Lease: res[1].Lease, Value: []byte("v2"), TTL: time.Minute}})
	cancel()
	if err == nil {
		t.Fatal("Fill through a stalled link succeeded")
	}
	if v, _ := r.Do(ctx, "GET", "orphan"); v != "\x00lease-orphan" {
		t.Fatalf("the stalled Fill reached the server: %q", v)
	}
	// The held bytes die with the connections (a killed server's
	// socket): the Fill never lands.
	proxy.ResetConns()
	proxy.Unstall()
	servertest.Eventually(t, "the orphaned placeholder is released", func() error {
		if n, err := r.Do(ctx, "EXISTS", "orphan"); err != nil || n != "0" {
			return fmt.Errorf("EXISTS orphan = %q, %v", n, err)
		}
		return nil
	})
	if v, err := r.Do(ctx, "GET", "filled"); err != nil || v != "v" && v != "v2" {
		t.Fatalf("the background release removed a filled value: %q, %v", v, err)
	}
	if st := s.ConnStats(); st.OrphanedLeases == 0 {
		t.Fatalf("ConnStats.OrphanedLeases = 0 after a release (%+v)", st)
	}
}
