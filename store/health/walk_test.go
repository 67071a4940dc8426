package health_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/redisstore"
)

// TestWalkThroughBreaker lists and reads keys through the breaker
// (store.KeyWalker, as kura scan and kura codecs reach a store) on a real
// Redis server and a real pool of two memcached servers: a prefix lists
// only its keys, a full walk describes every key on the node that holds
// it, Read returns the bytes written, and pacing is asked before commands.
func TestWalkThroughBreaker(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	backends := map[string]func(t *testing.T) store.Store{
		"redis": func(t *testing.T) store.Store {
			r := servertest.Redis(t, servers.RedisConfig{})
			s, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{r.Addr}, FailFast: true})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"memcached": func(t *testing.T) store.Store {
			pool := servertest.MemcachedPool(t, 2, servers.MemcachedConfig{})
			s, err := memcache.New(ctx, memcache.Options{Servers: servertest.Addrs(pool), FailFast: true})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			inner := open(t)
			hs, err := health.New(inner, health.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = hs.Close() })
			want := map[string]string{}
			for i := range 30 {
				for _, p := range []string{"p:", "q:"} {
					k := fmt.Sprintf("%s%d", p, i)
					want[k] = "v-" + k
					if err := hs.Set(ctx, k, []byte(want[k]), time.Hour); err != nil {
						t.Fatal(err)
					}
				}
			}
			kw, ok := store.Find[store.KeyWalker](hs)
			if !ok {
				t.Fatal("the breaker hides the key walker")
			}
			kind, nodes, err := kw.WalkNodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, n := range nodes {
					_ = n.Close()
				}
			}()
			if kind != name || len(nodes) == 0 {
				t.Fatalf("kind %q, %d nodes", kind, len(nodes))
			}
			var prefixed, all []string
			paced := 0
			for _, n := range nodes {
				err := n.Walk(ctx, store.WalkOptions{Prefix: "p:", KeysOnly: true, Count: 7}, func(k store.KeyInfo) error {
					if k.Node != n.Addr() {
						t.Errorf("key %s: node %q, walker %q", k.Key, k.Node, n.Addr())
					}
					prefixed = append(prefixed, k.Key)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				var keys []string
				err = n.Walk(ctx, store.WalkOptions{Count: 7, Pace: func(ctx context.Context, c int) error { paced += c; return nil }}, func(k store.KeyInfo) error {
					if k.TTLSeconds <= 0 || k.ValueBytes != int64(len(want[k.Key])) {
						t.Errorf("key %s: ttl %v, %d value bytes, want %d", k.Key, k.TTLSeconds, k.ValueBytes, len(want[k.Key]))
					}
					keys = append(keys, k.Key)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				vals, err := n.Read(ctx, append(keys, "absent"))
				if err != nil {
					t.Fatal(err)
				}
				for i, k := range keys {
					if string(vals[i]) != want[k] {
						t.Errorf("Read %s = %q, want %q", k, vals[i], want[k])
					}
				}
				if vals[len(keys)] != nil {
					t.Errorf("Read of a missing key = %q", vals[len(keys)])
				}
				all = append(all, keys...)
			}
			if len(prefixed) != 30 || len(all) != 60 {
				t.Errorf("listed %d keys with the prefix (want 30), %d in all (want 60)", len(prefixed), len(all))
			}
			for _, k := range prefixed {
				if k[:2] != "p:" {
					t.Errorf("prefix p: listed %s", k)
				}
			}
			slices.Sort(all)
			if len(slices.Compact(all)) != 60 {
				t.Error("a key was listed on two nodes")
			}
			if paced < 60 {
				t.Errorf("Pace asked for %d commands, fewer than the keys described", paced)
			}
			stop := errors.New("stop")
			if err := nodes[0].Walk(ctx, store.WalkOptions{}, func(store.KeyInfo) error { return stop }); !errors.Is(err, stop) {
				t.Errorf("Walk returned %v, not the callback's error", err)
			}
		})
	}
	t.Run("cannot walk", func(t *testing.T) {
		hs, err := health.New(newTwoNodes(t), health.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hs.Close() })
		if _, _, err := hs.WalkNodes(ctx); !errors.Is(err, store.ErrCannotWalk) {
			t.Errorf("WalkNodes over a store without the capability: %v", err)
		}
	})
}
