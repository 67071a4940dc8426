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
	"github.com/kuracache/kura/store/redisring"
	"github.com/kuracache/kura/store/redisstore"
)

// TestL1TrackingPerShard: a Cache with an L1 over a ring whose shards
// track (CLIENT TRACKING per shard) keeps values in the L1, drops each one
// when the shard that owns it reports a change made by another client,
// whichever shard that is, and flushes the L1 when one shard's tracking
// connection is lost (a change that connection could never report is then
// read, not hidden by the L1).
func TestL1TrackingPerShard(t *testing.T) {
	ctx := context.Background()
	rs, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
	sa := open(t, redisring.Options{Servers: addrs, Redis: redisstore.Options{Tracking: redisstore.Tracking{Enabled: true}}})
	if !sa.Tracking() {
		t.Fatal("Tracking() = false with Redis.Tracking on")
	}
	a, err := kura.New[string](sa, kura.Options{L1: kura.L1Options{MaxBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := kura.New[string](open(t, redisring.Options{Servers: addrs}), kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 30)
	perShard := map[string][]string{}
	for i := range keys {
		keys[i] = fmt.Sprintf("l1:%d", i)
		perShard[sa.NodeOf(keys[i])] = append(perShard[sa.NodeOf(keys[i])], keys[i])
		if err := b.Set(ctx, keys[i], "v1", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if len(perShard) != 3 {
		t.Fatalf("keys on %d shards, want 3", len(perShard))
	}
	readAll := func(want string) {
		t.Helper()
		for _, k := range keys {
			if v, err := a.Get(ctx, k); err != nil || v != want {
				t.Fatalf("A.Get(%s) = %q, %v; want %q", k, v, err, want)
			}
		}
	}
	readAll("v1") // from the shards, into the L1
	h0 := a.Stats().L1.Hits
	readAll("v1")
	if hits := a.Stats().L1.Hits - h0; hits != uint64(len(keys)) {
		t.Fatalf("second read: %d L1 hits, want %d", hits, len(keys))
	}
	// B changes every key: each shard reports its own keys to A.
	for _, k := range keys {
		if err := b.Set(ctx, k, "v2", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	servertest.Eventually(t, "every shard's reports to reach A's L1", func() error {
		for _, k := range keys {
			if v, err := a.Get(ctx, k); err != nil || v != "v2" {
				return fmt.Errorf("A.Get(%s) = %q, %v", k, v, err)
			}
		}
		return nil
	})
	for i := 0; i < sa.Shards(); i++ {
		if n, _ := sa.Shard(i).TrackingReports(); n == 0 {
			t.Errorf("shard %s reported no invalidation", addrs[i])
		}
	}
	// The tracking connection of shard 2 is killed; a change on that shard
	// right after can never be reported, so the L1 must have been flushed.
	readAll("v2")
	f0 := a.Stats().L1.Flushes
	_, sf0 := sa.Shard(2).TrackingReports()
	if _, err := rs[2].Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); err != nil {
		t.Fatal(err)
	}
	victim := perShard[addrs[2]][0]
	if _, err := rs[2].Do(ctx, "SET", victim, "not a kura value"); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the L1 flush", func() error {
		if _, f := sa.Shard(2).TrackingReports(); f == sf0 {
			return errors.New("shard 2 reported no loss")
		}
		return nil
	})
	if st := a.Stats().L1; st.Flushes == f0 {
		t.Fatalf("L1 not flushed after shard 2's tracking connection was lost: %+v", st)
	}
	servertest.Eventually(t, "the changed key to be read", func() error {
		_, err := a.Get(ctx, victim)
		if !errors.Is(err, kura.ErrMalformed) {
			return fmt.Errorf("A.Get(%s) = %v, want the new (foreign) bytes: ErrMalformed", victim, err)
		}
		return nil
	})
	// The other shards' keys come back into the L1 as they are read.
	servertest.Eventually(t, "reads after the flush", func() error {
		for _, k := range keys {
			if k == victim {
				continue
			}
			if v, err := a.Get(ctx, k); err != nil || v != "v2" {
				return fmt.Errorf("A.Get(%s) = %q, %v", k, v, err)
			}
		}
		return nil
	})
}
