package redisring_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisring"
)

// TestCloseDuringBatchesOnAStalledShard: 64 callers batch over three
// shards, one stopped with SIGSTOP, and eight goroutines Close the ring
// while the batches are in flight. Every Close returns while the shard is
// still stopped, every caller returns, and once the shard is resumed no
// goroutine is left: not the ring's workers, not the per-shard calls
// that found every worker busy, not rueidis's.
func TestCloseDuringBatchesOnAStalledShard(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
	ignore := goleak.IgnoreCurrent() // the servers' own watchers
	s, err := redisring.New(context.Background(), redisring.Options{Servers: addrs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := make([]string, 30)
	var items []store.Item
	for i := range keys {
		keys[i] = fmt.Sprintf("close:%d", i)
		items = append(items, store.Item{Key: keys[i], Value: []byte("v")})
	}
	if err := s.SetMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	if err := r[1].Proc.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = r[1].Proc.Resume()
		}
	}()
	stop := make(chan struct{})
	var callers sync.WaitGroup
	for range 64 {
		callers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				_, _ = s.GetMany(dctx, keys)
				_, _ = s.LeaseGet(dctx, keys, store.LeaseOptions{TTL: time.Second, Placeholder: []byte("\x00ph")})
				cancel()
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	closed := make(chan struct{})
	var closers sync.WaitGroup
	for range 8 {
		closers.Go(func() { _ = s.Close() })
	}
	go func() { closers.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return within 30 s while a shard was stopped")
	}
	close(stop)
	done := make(chan struct{})
	go func() { callers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("callers still blocked 30 s after Close")
	}
	if _, err := s.GetMany(ctx, keys); err == nil {
		t.Fatal("GetMany after Close succeeded")
	}
	if err := r[1].Proc.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	goleak.VerifyNone(t, ignore)
}
