package redisstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// calls returns the server's own count of calls per command, summed over
// nodes: the round-trip tests trust the server, not the client.
func calls(t *testing.T, nodes []*servers.Redis, cmds ...string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, n := range nodes {
		s, err := n.Do(context.Background(), "INFO", "commandstats")
		if err != nil {
			t.Fatalf("INFO commandstats on %s: %v", n.Addr, err)
		}
		info := servers.ParseInfo(s)
		for _, c := range cmds {
			out[c] += servers.CommandCalls(info, c)
		}
	}
	return out
}

func delta(after, before map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		d[k] = v - before[k]
	}
	return d
}

// slotCount asks the server how many distinct hash slots keys fall in.
func slotCount(t *testing.T, n *servers.Redis, keys []string) int {
	t.Helper()
	seen := map[string]bool{}
	for _, k := range keys {
		s, err := n.Do(context.Background(), "CLUSTER", "KEYSLOT", k)
		if err != nil {
			t.Fatal(err)
		}
		seen[s] = true
	}
	return len(seen)
}

func items(keys []string) []store.Item {
	it := make([]store.Item, len(keys))
	for i, k := range keys {
		it[i] = store.Item{Key: k, Value: []byte("v-" + k)}
	}
	return it
}

func TestRoundTripsStandalone(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	s := open(t, r.URL(), redisstore.Options{})
	ctx := context.Background()
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("rt:%d", i)
	}
	nodes := []*servers.Redis{r}
	cmds := []string{"mget", "get", "set", "del", "mset", "exec"}
	before := calls(t, nodes, cmds...)
	if err := s.SetMany(ctx, items(keys[:50])); err != nil {
		t.Fatal(err)
	}
	if d := delta(calls(t, nodes, cmds...), before); d["set"] != 50 || d["mset"] != 0 || d["exec"] != 0 {
		t.Fatalf("SetMany(50 items) cost %d SET, %d MSET, %d EXEC; want 50, 0, 0", d["set"], d["mset"], d["exec"])
	}

	before = calls(t, nodes, cmds...)
	vals, err := s.GetMany(ctx, keys) // 50 hits, 50 misses
	if err != nil {
		t.Fatal(err)
	}
	d := delta(calls(t, nodes, cmds...), before)
	if d["mget"] != 1 || d["get"] != 0 {
		t.Fatalf("GetMany(100 keys) cost %d MGET and %d GET on the server, want 1 and 0", d["mget"], d["get"])
	}
	if string(vals[49]) != "v-rt:49" || vals[50] != nil {
		t.Fatalf("GetMany values wrong: %q %q", vals[49], vals[50])
	}

	before = calls(t, nodes, cmds...)
	if err := s.DeleteMany(ctx, keys); err != nil {
		t.Fatal(err)
	}
	if d := delta(calls(t, nodes, cmds...), before); d["del"] != 1 {
		t.Fatalf("DeleteMany(100 keys) cost %d DEL, want 1", d["del"])
	}
}

func TestRoundTripsCluster(t *testing.T) {
	c := servertest.RedisCluster(t)
	s := open(t, c.URL(), redisstore.Options{})
	ctx := context.Background()
	cmds := []string{"mget", "get", "set", "del"}

	cases := map[string][]string{}
	var plain, tagged []string
	for i := 0; i < 100; i++ {
		plain = append(plain, fmt.Sprintf("rt:%d", i))
		// Four hash tags: four slots, so four MGETs for 100 keys.
		tagged = append(tagged, fmt.Sprintf("{user:%d}:field:%d", i%4, i))
	}
	cases["plain"], cases["hashtag"] = plain, tagged

	for name, keys := range cases {
		t.Run(name, func(t *testing.T) {
			want := slotCount(t, c.Nodes[0], keys)
			if name == "hashtag" && want != 4 {
				t.Fatalf("hash-tagged keys fall in %d slots, want 4", want)
			}
			before := calls(t, c.Nodes, cmds...)
			if err := s.SetMany(ctx, items(keys[:60])); err != nil {
				t.Fatal(err)
			}
			if d := delta(calls(t, c.Nodes, cmds...), before); d["set"] != 60 {
				t.Fatalf("SetMany(60 items) cost %d SET on the servers, want 60", d["set"])
			}

			before = calls(t, c.Nodes, cmds...)
			vals, err := s.GetMany(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			d := delta(calls(t, c.Nodes, cmds...), before)
			if d["mget"] != int64(want) || d["get"] != 0 {
				t.Fatalf("GetMany(100 keys in %d slots) cost %d MGET and %d GET over the masters, want %d and 0",
					want, d["mget"], d["get"], want)
			}
			t.Logf("100 keys, %d slots: %d MGETs", want, d["mget"])
			for i, k := range keys {
				if (i < 60) != (vals[i] != nil) || (i < 60 && string(vals[i]) != "v-"+k) {
					t.Fatalf("values[%d] (%q) = %q", i, k, vals[i])
				}
			}

			before = calls(t, c.Nodes, cmds...)
			if err := s.DeleteMany(ctx, keys); err != nil {
				t.Fatal(err)
			}
			if d := delta(calls(t, c.Nodes, cmds...), before); d["del"] != int64(want) {
				t.Fatalf("DeleteMany(100 keys in %d slots) cost %d DEL, want %d", want, d["del"], want)
			}
		})
	}
}

// TestSlot checks the store's hash-slot function against the server's own
// CLUSTER KEYSLOT, hash tags and their edge cases included.
func TestSlot(t *testing.T) {
	c := servertest.RedisCluster(t)
	keys := []string{"", "a", "foo", "user:1000", "{user1000}.following", "{user1000}.followers",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}", "{}", "a{b", "a}b{c}", "キー", "\x00\xff"}
	for i := 0; i < 200; i++ {
		keys = append(keys, fmt.Sprintf("k:%d", i))
	}
	got := redisstore.SlotsForTest(keys)
	for i, k := range keys {
		s, err := c.Nodes[0].Do(context.Background(), "CLUSTER", "KEYSLOT", k)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got[i]) != s {
			t.Errorf("slot(%q) = %d, server says %s", k, got[i], s)
		}
	}
}
