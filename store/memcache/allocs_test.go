package memcache_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
)

// TestGetManyAllocs: a GetMany of warm keys allocates one object per key
// (the value, which the caller keeps) plus a constant per batch. The
// reads ask every mg for the item's CAS (a plain read that takes a stale
// item's recache token must hand it back with md I C<cas>); parsing that
// flag, or the opaque token, must not cost an allocation per key.
func TestGetManyAllocs(t *testing.T) {
	ms := pool(t, servers.MemcachedConfig{})
	s := open(t, memcache.Options{Servers: addrs(ms)})
	ctx := context.Background()
	const n = 600
	items := make([]store.Item, n)
	keys := make([]string, n)
	for i := range items {
		keys[i] = fmt.Sprintf("allocs/%d", i)
		items[i] = store.Item{Key: keys[i], Value: fmt.Appendf(nil, "value %d", i)}
	}
	if err := s.SetMany(ctx, items); err != nil {
		t.Fatal(err)
	}
	get := func() {
		vals, err := s.GetMany(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if string(v) != string(items[i].Value) {
				t.Fatalf("%s = %q, want %q", keys[i], v, items[i].Value)
			}
		}
	}
	get() // connections dialled
	got := testing.AllocsPerRun(20, get)
	// Per batch: the values slice, per server a group, its request and
	// index slices, the send plan, a goroutine... about 30 in all; per key
	// exactly one. Two per key would be 1,200.
	t.Logf("GetMany of %d keys: %v allocations", n, got)
	if limit := float64(n + 100); got > limit {
		t.Errorf("GetMany of %d keys: %v allocations, want at most %v (one per key plus the batch)", n, got, limit)
	}
}
