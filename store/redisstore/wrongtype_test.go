package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// TestLeaseGetWrongTypeKeyFails: a key that holds a hash (another
// application's, or a name clash) is a per-key failure of a lease batch,
// as it is of a single-key lease read, not a lease held by someone else.
// MGET answers nil for it, and SET NX then finds the key: taken as
// "held", every reader of that key waited out LeaseWait for a fill that
// never comes. A key another caller filled between the MGET and the SET NX
// comes back as its value.
func TestLeaseGetWrongTypeKeyFails(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	r := servertest.Redis(t, servers.RedisConfig{})
	s := open(t, r.URL(), redisstore.Options{})
	ctx := context.Background()
	if _, err := r.Do(ctx, "HSET", "h", "f", "v"); err != nil {
		t.Fatal(err)
	}
	opts := store.LeaseOptions{TTL: time.Minute, Placeholder: []byte("\x00lease-wt")}
	for _, keys := range [][]string{{"h"}, {"a", "h", "b"}} {
		res, err := s.LeaseGet(ctx, keys, opts)
		var be *store.BatchError
		if !errors.As(err, &be) || len(res) != len(keys) {
			t.Fatalf("LeaseGet(%q) = %+v, %v; want a *store.BatchError for h", keys, res, err)
		}
		failed := be.Failed()
		if len(failed) != 1 || failed["h"] == nil {
			t.Fatalf("LeaseGet(%q) failed %v; want h alone", keys, failed)
		}
		for i, k := range keys {
			if k == "h" {
				if res[i].Held || res[i].Won || res[i].Value != nil {
					t.Fatalf("LeaseGet(%q): h = %+v; want a failure, not a lease", keys, res[i])
				}
				continue
			}
			if !res[i].Won {
				t.Fatalf("LeaseGet(%q): %s = %+v; want its lease", keys, k, res[i])
			}
			if err := s.Release(ctx, []store.Lease{res[i].Lease}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if typ, _ := r.Do(ctx, "TYPE", "h"); typ != "hash" {
		t.Fatalf("the hash was replaced: TYPE h = %q", typ)
	}
}

// TestLeaseGetWrongTypeUnderConcurrentWriters: the wrong-type recheck
// (MGET nil, SET NX refused, then GET) under writers that change the keys
// between those commands: one key flips between a hash and a string,
// one is taken, filled and released by other lease readers, and one is a
// hash throughout. Whatever the interleaving, the hash that never changes
// is a per-key failure of every batch (never a lease, held or won, nor a
// value), no result is two things at once, and a lease won is this
// caller's own placeholder on the server until it releases it.
func TestLeaseGetWrongTypeUnderConcurrentWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	r := servertest.Redis(t, servers.RedisConfig{})
	s := open(t, r.URL(), redisstore.Options{})
	ctx := context.Background()
	if _, err := r.Do(ctx, "HSET", "stable", "f", "v"); err != nil {
		t.Fatal(err)
	}
	raw := open(t, r.URL(), redisstore.Options{}) // the writers' own client
	stop := make(chan struct{})
	var writers sync.WaitGroup
	writers.Add(1)
	go func() { // "flip": a hash, then a string, then gone, again and again
		defer writers.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			switch i % 3 {
			case 0:
				_, _ = r.Do(ctx, "HSET", "flip", "f", "v")
			case 1:
				_, _ = r.Do(ctx, "DEL", "flip")
				_ = raw.Set(ctx, "flip", []byte("value"), time.Minute)
			default:
				_ = raw.Delete(ctx, "flip")
			}
		}
	}()
	const readers, rounds = 8, 300
	keys := []string{"stable", "flip", "shared", "own"}
	var wg sync.WaitGroup
	for g := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ph := []byte(fmt.Sprintf("\x00lease-%d", g))
			own := fmt.Sprintf("own-%d", g) // only this reader's: always won
			batch := []string{keys[0], keys[1], keys[2], own}
			for range rounds {
				res, err := s.LeaseGet(ctx, batch, store.LeaseOptions{TTL: time.Minute, Placeholder: ph})
				var be *store.BatchError
				if err != nil && !errors.As(err, &be) {
					t.Errorf("LeaseGet: %v", err)
					return
				}
				if len(res) != len(batch) {
					t.Errorf("LeaseGet returned %d results for %d keys", len(res), len(batch))
					return
				}
				var failed map[string]error
				if be != nil {
					failed = be.Failed()
				}
				if failed["stable"] == nil || res[0].Held || res[0].Won || res[0].Value != nil {
					t.Errorf("the hash that never changes came back %+v (failed: %v), want a per-key failure", res[0], failed["stable"])
					return
				}
				if failed[own] != nil || !res[3].Won {
					t.Errorf("this reader's own key came back %+v, %v; want its lease", res[3], failed[own])
					return
				}
				var won []store.Lease
				for i, x := range res {
					if n := btoi(x.Held) + btoi(x.Won) + btoi(x.Value != nil) + btoi(failed[batch[i]] != nil); n > 1 {
						t.Errorf("%s came back as %d things at once: %+v, failed %v", batch[i], n, x, failed[batch[i]])
					}
					if x.Won {
						won = append(won, x.Lease)
					}
				}
				if v, err := r.Do(ctx, "GET", own); err != nil || v != string(ph) {
					t.Errorf("after winning %s, the server holds %q, %v; want this reader's placeholder", own, v, err)
				}
				if err := s.Release(ctx, won); err != nil {
					var be *store.BatchError
					if !errors.As(err, &be) { // a flipped key's lease may be gone (WRONGTYPE)
						t.Errorf("Release: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	writers.Wait()
	if typ, _ := r.Do(ctx, "TYPE", "stable"); typ != "hash" {
		t.Fatalf("the stable hash was replaced: TYPE = %q", typ)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
