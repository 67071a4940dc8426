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
// connected ring and reads a batch over all shards with GetMany and
// LeaseGet under a deadline: the other shards' keys are answered, only the
// stopped shard's keys fail, naming it; once it resumes, every key reads
// again. Reading the shards one after another would spend the whole
// deadline on the stopped shard and fail every key.
func TestStalledShardFailsOnlyItsKeys(t *testing.T) {
	for _, first := range []int{0, 2} {
		t.Run(fmt.Sprintf("shard%d", first), func(t *testing.T) {
			r, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
			s := open(t, redisring.Options{Servers: addrs})
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
			stalled := addrs[first]
			onStalled := 0
			for _, k := range keys {
				if s.NodeOf(k) == stalled {
					onStalled++
				}
			}
			if onStalled == 0 || onStalled == len(keys) {
				t.Fatalf("%d of %d keys on the stopped shard: the test needs some on each side", onStalled, len(keys))
			}
			if err := r[first].Proc.Pause(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r[first].Proc.Resume() })
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
			if err := r[first].Proc.Resume(); err != nil {
				t.Fatal(err)
			}
			dctx, cancel = context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			vals, err = s.GetMany(dctx, keys)
			if err != nil {
				t.Fatalf("GetMany after the shard resumed: %v", err)
			}
			for i, k := range keys {
				if string(vals[i]) != k {
					t.Fatalf("after the shard resumed, %s = %q", k, vals[i])
				}
			}
		})
	}
}

// TestLeaseGetInvalidKeyAmongShards reads a batch over every shard with an
// empty key in it: each shard writes its own keys' results into the
// batch's result, the empty key fails alone with store.ErrInvalidKey, a
// present key is a hit and a missing one a won lease.
func TestLeaseGetInvalidKeyAmongShards(t *testing.T) {
	s := open(t, redisring.Options{Servers: shards(t, 3)})
	ctx := context.Background()
	keys := []string{""}
	for i := 0; i < 30; i++ {
		keys = append(keys, fmt.Sprintf("mixed:%d", i))
	}
	for _, k := range keys[1:16] {
		if err := s.Set(ctx, k, []byte("v:"+k), 0); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.LeaseGet(ctx, keys, store.LeaseOptions{TTL: time.Second, Placeholder: []byte("\x00ph")})
	var be *store.BatchError
	if !errors.As(err, &be) || len(be.Errors) != 1 || be.Errors[0].Key != "" || !errors.Is(be.Errors[0].Err, store.ErrInvalidKey) {
		t.Fatalf("LeaseGet with an empty key = %v, want one store.ErrInvalidKey for it", err)
	}
	if len(res) != len(keys) {
		t.Fatalf("%d results for %d keys", len(res), len(keys))
	}
	for i, k := range keys[1:] {
		r := res[i+1]
		switch {
		case i < 15 && (string(r.Value) != "v:"+k || r.Won || r.Lease.Key != k):
			t.Fatalf("%s = %+v, want its value", k, r)
		case i >= 15 && (r.Value != nil || !r.Won || r.Lease.Key != k):
			t.Fatalf("%s = %+v, want a won lease", k, r)
		}
	}
}
