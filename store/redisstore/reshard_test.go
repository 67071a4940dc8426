package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/history"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/internal/slot"
	"github.com/kuracache/kura/store/redisstore"
)

// openCluster opens a Store on cl's masters (replicas are found through
// CLUSTER SLOTS) with o's other fields.
func openCluster(t *testing.T, cl *servers.RedisCluster, o redisstore.Options) *redisstore.Store {
	t.Helper()
	o.Addrs, o.FailFast = cl.Addrs(), true
	s, err := redisstore.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// reshardGroups is the number of hash slots the load's keys fall in: 25
// keys each, so a batch (FetchMany's MGET, an Invalidate's DEL) holds
// several keys of a slot being migrated.
const reshardGroups = 8

// TestClusterReshardUnderLoad moves the load's 8 hash slots between the
// masters of a 3-master Cluster (IMPORTING/MIGRATING, MIGRATE 5 keys at a
// time with a pause, SETSLOT NODE), twice over (up to six times until a
// batch meets TRYAGAIN), while 64 callers Fetch
// and FetchMany through a Cache with leases and the L1 over tracking and
// a writer invalidates (one key, or two of one slot in one DEL). While a
// slot is split between two masters, multi-key commands meet TRYAGAIN and
// single-key ones ASK: no caller sees an error, the history holds the
// per-read guarantee of leases with the L1 (internal/history), and no
// read is older than the last Invalidate that returned before it began.
func TestClusterReshardUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	cl := servertest.RedisCluster(t)
	s := openCluster(t, cl, redisstore.Options{Tracking: redisstore.Tracking{Enabled: true}})
	l := newFailoverLoad(200, reshardGroups)
	c, err := kura.New[history.Value](newRecStore(t, s, &l.rec), kura.Options{L1: kura.L1Options{MaxBytes: 8 << 20}, Leases: kura.LeasesRequired})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var moved, slots int
	reportsBefore, _ := s.TrackingReports()
	r := l.run(t, c, true, time.Second, 500*time.Millisecond, func() {
		// Two rounds, and more (up to six) while no batch has met
		// TRYAGAIN yet: whether a batch lands inside a slot's migration
		// window is timing, and a loaded machine can miss it twice.
		for round := 0; round < 2 || (round < 6 && s.ConnStats().SlotSplits == 0); round++ {
			for g := range reshardGroups {
				sl := int(slot.Of(l.keys[g]))
				src, err := cl.MasterOf(ctx, sl)
				if err != nil {
					t.Error(err)
					return
				}
				dst := cl.Nodes[(g+round+1)%len(cl.Nodes)]
				if dst == src {
					dst = cl.Nodes[(g+round+2)%len(cl.Nodes)]
				}
				n, err := cl.MoveSlot(ctx, sl, src, dst, 5, 20*time.Millisecond)
				if err != nil {
					t.Errorf("moving slot %d: %v", sl, err)
					return
				}
				moved += n
				slots++
			}
		}
	})
	t.Logf("Cluster reshard (%d slot moves, %d keys migrated) under 64 callers: %v; store errors the Cache hid: %d, batches split on TRYAGAIN %d", slots, moved, r, c.Stats().StoreErrors, s.ConnStats().SlotSplits)
	if r.Errors != 0 || r.Stale != 0 {
		t.Fatalf("errors %d, stale reads %d; want 0", r.Errors, r.Stale)
	}
	if moved == 0 {
		t.Fatal("no key was migrated: the test moved empty slots")
	}
	if keys, _ := s.TrackingReports(); keys == reportsBefore {
		t.Fatal("no tracking report while keys were migrated away from the masters the L1 read them from")
	}
	if st := s.ConnStats(); st.SlotSplits == 0 {
		t.Fatal("no batch met TRYAGAIN: the test did not split a batch's keys between two masters")
	}
	if r.FirstHit == 0 {
		t.Fatal("no call was served from the cache after the reshard")
	}
}

// TestClusterReshardL1: a key the L1 holds (read through tracking from
// its master) is dropped when its slot moves to another master (the
// migration deletes it on the old one, which reports it), and once read
// again from the new master, a change made there by another client is
// reported too: the L1 never serves a value of a moved slot after the
// change.
func TestClusterReshardL1(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	cl := servertest.RedisCluster(t)
	s := openCluster(t, cl, redisstore.Options{Tracking: redisstore.Tracking{Enabled: true}})
	other := openCluster(t, cl, redisstore.Options{})
	c, err := kura.New[history.Value](s, kura.Options{L1: kura.L1Options{MaxBytes: 1 << 20}, Leases: kura.LeasesRequired})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const key = "user:{moved}:1"
	ver := int64(1)
	loader := func(context.Context, string) (history.Value, error) { return history.Value{Key: key, Ver: ver}, nil }
	fetch := func() history.Value {
		t.Helper()
		v, err := c.Fetch(ctx, key, time.Hour, loader)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// wait until the L1 serves key (its tracked read has been answered).
	l1Hit := func() bool {
		h := c.Stats().L1.Hits
		fetch()
		return c.Stats().L1.Hits > h
	}
	servertest.Eventually(t, "the L1 serves the key", func() error {
		if !l1Hit() {
			return errors.New("not from the L1")
		}
		return nil
	})
	sl := int(slot.Of(key))
	src, err := cl.MasterOf(ctx, sl)
	if err != nil {
		t.Fatal(err)
	}
	dst := cl.Nodes[0]
	if dst == src {
		dst = cl.Nodes[1]
	}
	reports, _ := s.TrackingReports()
	if n, err := cl.MoveSlot(ctx, sl, src, dst, 10, 0); err != nil || n != 1 {
		t.Fatalf("MoveSlot = %d, %v", n, err)
	}
	servertest.Eventually(t, "the old master reports the migrated key", func() error {
		if k, _ := s.TrackingReports(); k == reports {
			return errors.New("no report yet")
		}
		return nil
	})
	if l1Hit() {
		t.Fatal("the L1 served a key of a moved slot after the old master reported it")
	}
	servertest.Eventually(t, "the L1 serves the key again, read from the new master", func() error {
		if !l1Hit() {
			return errors.New("not from the L1")
		}
		return nil
	})
	ver = 2
	if err := other.Delete(ctx, key); err != nil { // another process, on the new master
		t.Fatal(err)
	}
	servertest.Eventually(t, "the new master's report reaches the L1", func() error {
		if v := fetch(); v.Ver != 2 {
			return fmt.Errorf("read v%d after another client deleted the key on its new master", v.Ver)
		}
		return nil
	})
}
