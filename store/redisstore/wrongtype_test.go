package redisstore_test

import (
	"context"
	"errors"
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
