package memcache_test

import (
	"context"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
)

// TestPlainReadHandsRecacheTokenBack: after an Invalidate that leaves the
// value stale (stale-while-revalidate), memcached hands the recache token
// (W) to the first mg of the item, plain or not. A plain Get or GetMany
// cannot reload the key, so it must give the token back: the next lease
// read wins it and reloads. Before the fix the plain read kept it, every
// lease reader was told another caller held it, and nobody reloaded the
// key until the stale value expired.
func TestPlainReadHandsRecacheTokenBack(t *testing.T) {
	ms := pool(t, servers.MemcachedConfig{})
	s, err := memcache.New(context.Background(), memcache.Options{Servers: addrs(ms)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	opts := store.LeaseOptions{TTL: 10 * time.Second}
	reads := map[string]func(key string) ([]byte, error){
		"Get": func(key string) ([]byte, error) { return s.Get(ctx, key) },
		"GetMany": func(key string) ([]byte, error) {
			vals, err := s.GetMany(ctx, []string{"other-" + key, key})
			if err != nil {
				return nil, err
			}
			return vals[1], nil
		},
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			key := "handback-" + name
			if err := s.Set(ctx, key, []byte("old"), time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := s.Invalidate(ctx, []string{key}, time.Minute); err != nil {
				t.Fatal(err)
			}
			v, err := read(key)
			if err != nil || string(v) != "old" {
				t.Fatalf("plain read of the stale item = %q, %v; want the stale value", v, err)
			}
			res, err := s.LeaseGet(ctx, []string{key}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !res[0].Won || res[0].Held {
				t.Fatalf("lease read after a plain read of a stale item: won %v, held %v; want the recache token", res[0].Won, res[0].Held)
			}
			// The token is one: a second lease reader is told it is held.
			again, err := s.LeaseGet(ctx, []string{key}, opts)
			if err != nil || again[0].Won || !again[0].Held {
				t.Fatalf("second lease read: %+v, %v; want held", again, err)
			}
			// The winner's fill is taken.
			if err := s.Fill(ctx, []store.Fill{{Lease: res[0].Lease, Value: []byte("new"), TTL: time.Minute}}); err != nil {
				t.Fatalf("fill under the handed-back token: %v", err)
			}
			if v, err := s.Get(ctx, key); err != nil || string(v) != "new" {
				t.Fatalf("after the fill: %q, %v", v, err)
			}
		})
	}
}
