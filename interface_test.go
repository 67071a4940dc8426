package kura_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
)

// shape is a non-empty interface a Cache may hold; nil is a valid value.
type shape interface{ Area() float64 }

// TestInterfaceValueNilEveryPath: a Cache whose V is an interface, with
// loaders that return nil values and no error, never panics on any
// read-through path (Fetch, FetchMany, Keyed.Fetch, Keyed.FetchMany,
// Index.Fetch, UniqueIndex.Fetch, Get/GetMany/Set), with msgpack and JSON,
// on memstore and a real redis-server: a miss loads and caches nil, a
// hit returns nil.
func TestInterfaceValueNilEveryPath(t *testing.T) {
	stores := map[string]func(t *testing.T) store.Store{
		"memstore": func(t *testing.T) store.Store {
			ms, _ := memstore.New(memstore.Options{})
			t.Cleanup(func() { ms.Close() })
			return ms
		},
	}
	if !testing.Short() {
		srv := servertest.Redis(t, servers.RedisConfig{})
		stores["redis"] = redisBackend(srv.URL)
	}
	jsonCodec, err := codec.New(codec.Options{Serializer: codec.JSON()})
	if err != nil {
		t.Fatal(err)
	}
	for name, open := range stores {
		for cname, cd := range map[string]*codec.Codec{"msgpack": nil, "json": jsonCodec} {
			t.Run(name+"/"+cname, func(t *testing.T) {
				s := open(t)
				opts := kura.Options{Codec: cd}
				testNilInterface[any](t, s, opts, "any:"+cname)
				testNilInterface[shape](t, s, opts, "shape:"+cname)
				testNilInterface[fmt.Stringer](t, s, opts, "stringer:"+cname)
			})
		}
	}
}

func testNilInterface[V any](t *testing.T, s store.Store, opts kura.Options, prefix string) {
	t.Helper()
	ctx := context.Background()
	c, err := kura.New[V](s, opts)
	if err != nil {
		t.Fatal(err)
	}
	isNil := func(v V) bool { return any(v) == nil }
	var nilV V
	for round := range 2 { // a miss, then a hit
		v, err := c.Fetch(ctx, prefix+":fetch", time.Minute, func(context.Context, string) (V, error) { return nilV, nil })
		if err != nil || !isNil(v) {
			t.Fatalf("%s round %d: Fetch = %v, %v", prefix, round, v, err)
		}
		m, err := c.FetchMany(ctx, []string{prefix + ":m1", prefix + ":m2"}, time.Minute, func(context.Context, []string) (map[string]V, error) {
			return map[string]V{prefix + ":m1": nilV}, nil
		})
		if err != nil || len(m) != 1 || !isNil(m[prefix+":m1"]) {
			t.Fatalf("%s round %d: FetchMany = %v, %v", prefix, round, m, err)
		}
		k, err := kura.NewKeyed[int64, V](c, kura.KeyedOptions[int64]{Prefix: prefix + ":rec:"})
		if err != nil {
			t.Fatal(err)
		}
		kv, err := k.Fetch(ctx, 7, func(context.Context, int64) (V, error) { return nilV, nil })
		if err != nil || !isNil(kv) {
			t.Fatalf("%s round %d: Keyed.Fetch = %v, %v", prefix, round, kv, err)
		}
		km, err := k.FetchMany(ctx, []int64{1, 2, 3}, func(_ context.Context, ids []int64) (map[int64]V, error) {
			out := map[int64]V{}
			for _, id := range ids {
				if id != 3 {
					out[id] = nilV
				}
			}
			return out, nil
		})
		if err != nil || len(km) != 2 || !isNil(km[1]) || !isNil(km[2]) {
			t.Fatalf("%s round %d: Keyed.FetchMany = %v, %v", prefix, round, km, err)
		}
		idx, err := kura.NewIndex(k, kura.IndexOptions[string, int64, V]{
			Prefix:  prefix + ":idx:",
			LoadIDs: func(context.Context, string) ([]int64, error) { return []int64{1, 2}, nil },
			LoadRecords: func(_ context.Context, ids []int64) (map[int64]V, error) {
				out := map[int64]V{}
				for _, id := range ids {
					out[id] = nilV
				}
				return out, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := idx.Fetch(ctx, "u")
		if err != nil || len(recs) != 2 || !isNil(recs[0]) || !isNil(recs[1]) {
			t.Fatalf("%s round %d: Index.Fetch = %v, %v", prefix, round, recs, err)
		}
		uidx, err := kura.NewUniqueIndex(k, kura.UniqueIndexOptions[string, int64, V]{
			Prefix:     prefix + ":uidx:",
			LoadID:     func(context.Context, string) (int64, error) { return 9, nil },
			LoadRecord: func(context.Context, int64) (V, error) { return nilV, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		if u, err := uidx.Fetch(ctx, "e@x"); err != nil || !isNil(u) {
			t.Fatalf("%s round %d: UniqueIndex.Fetch = %v, %v", prefix, round, u, err)
		}
	}
	if err := c.Set(ctx, prefix+":set", nilV, time.Minute); err != nil {
		t.Fatalf("%s: Set(nil) = %v", prefix, err)
	}
	if v, err := c.Get(ctx, prefix+":set"); err != nil || !isNil(v) {
		t.Fatalf("%s: Get after Set(nil) = %v, %v", prefix, v, err)
	}
	if err := c.SetMany(ctx, map[string]V{prefix + ":sm": nilV}, time.Minute); err != nil {
		t.Fatalf("%s: SetMany(nil) = %v", prefix, err)
	}
	if m, err := c.GetMany(ctx, []string{prefix + ":sm", prefix + ":set"}); err != nil || len(m) != 2 {
		t.Fatalf("%s: GetMany = %v, %v", prefix, m, err)
	}
	if st := c.Stats(); st.DecodeErrors != 0 {
		t.Fatalf("%s: nil values did not read back: %+v", prefix, st)
	}
}
