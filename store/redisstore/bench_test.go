package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
	"github.com/kuracache/kura/store/storetest"
)

// BenchmarkStore runs the shared store benchmarks on one redis-server.
func BenchmarkStore(b *testing.B) {
	r := servertest.Redis(b, servers.RedisConfig{})
	storetest.RunBenchmarks(b, func(b *testing.B) store.Store { return open(b, r.URL(), redisstore.Options{}) })
}

// topologies starts one standalone server and one 3-master cluster, and
// returns a store on each.
func topologies(b *testing.B) []struct {
	name string
	s    *redisstore.Store
} {
	r := servertest.Redis(b, servers.RedisConfig{})
	c := servertest.RedisCluster(b)
	return []struct {
		name string
		s    *redisstore.Store
	}{
		{"standalone", open(b, r.URL(), redisstore.Options{})},
		{"cluster", open(b, c.URL(), redisstore.Options{})},
	}
}

// keySets are the batches benchmarked: 100 keys spread over as many slots,
// and 100 keys under 4 hash tags (4 slots), the friendliest case for
// per-slot commands.
func keySets() map[string][]string {
	spread := make([]string, 100)
	tagged := make([]string, 100)
	for i := range spread {
		spread[i] = "bench:" + strconv.Itoa(i)
		tagged[i] = fmt.Sprintf("{t%d}:bench:%d", i%4, i)
	}
	return map[string][]string{"spread": spread, "tagged": tagged}
}

// BenchmarkGetMany100 reads 100 present 1 KiB values in one GetMany.
func BenchmarkGetMany100(b *testing.B) {
	ctx := context.Background()
	val := make([]byte, 1024)
	for _, tp := range topologies(b) {
		for _, ks := range []string{"spread", "tagged"} {
			keys := keySets()[ks]
			b.Run(tp.name+"/"+ks, func(b *testing.B) {
				its := make([]store.Item, len(keys))
				for i, k := range keys {
					its[i] = store.Item{Key: k, Value: val, TTL: time.Hour}
				}
				if err := tp.s.SetMany(ctx, its); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(keys) * len(val)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := tp.s.GetMany(ctx, keys); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// setStrategy writes a batch of items that all have the same TTL.
type setStrategy func(ctx context.Context, s *redisstore.Store, items []store.Item) error

// bySlot groups items per hash slot, keeping the first-seen order, as the
// store does: one group in all on a standalone server.
func bySlot(s *redisstore.Store, items []store.Item) [][]store.Item {
	if !s.IsCluster() {
		return [][]store.Item{items}
	}
	keys := make([]string, len(items))
	for i := range items {
		keys[i] = items[i].Key
	}
	idx := map[uint16]int{}
	var out [][]store.Item
	for i, sl := range redisstore.SlotsForTest(keys) {
		g, ok := idx[sl]
		if !ok {
			g = len(out)
			idx[sl] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], items[i])
	}
	return out
}

func firstErr(rs []rueidis.RedisResult) error {
	for _, r := range rs {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}

// msetPexpire sends, per slot, MSET then one PEXPIRE per key, all in one
// pipeline. Not atomic: a failure between the two leaves keys without TTL.
func msetPexpire(ctx context.Context, s *redisstore.Store, items []store.Item) error {
	c := s.Client()
	ms := strconv.FormatInt(items[0].TTL.Milliseconds(), 10)
	var cmds rueidis.Commands
	for _, g := range bySlot(s, items) {
		mset := c.B().Mset().KeyValue()
		for _, it := range g {
			mset = mset.KeyValue(it.Key, rueidis.BinaryString(it.Value))
		}
		cmds = append(cmds, mset.Build())
		for _, it := range g {
			cmds = append(cmds, c.B().Pexpire().Key(it.Key).Milliseconds(mustInt(ms)).Build())
		}
	}
	return firstErr(c.DoMulti(ctx, cmds...))
}

func mustInt(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

// multiMsetPexpire is msetPexpire inside MULTI/EXEC per slot. rueidis
// keeps a transaction on one slot, so a cluster sends the slots' DoMultis
// concurrently (auto-pipelining merges them per connection).
func multiMsetPexpire(ctx context.Context, s *redisstore.Store, items []store.Item) error {
	c := s.Client()
	ms := items[0].TTL.Milliseconds()
	tx := func(g []store.Item) rueidis.Commands {
		cmds := rueidis.Commands{c.B().Multi().Build()}
		mset := c.B().Mset().KeyValue()
		for _, it := range g {
			mset = mset.KeyValue(it.Key, rueidis.BinaryString(it.Value))
		}
		cmds = append(cmds, mset.Build())
		for _, it := range g {
			cmds = append(cmds, c.B().Pexpire().Key(it.Key).Milliseconds(ms).Build())
		}
		return append(cmds, c.B().Exec().Build())
	}
	groups := bySlot(s, items)
	if !s.IsCluster() {
		var cmds rueidis.Commands
		for _, g := range groups {
			cmds = append(cmds, tx(g)...)
		}
		return firstErr(c.DoMulti(ctx, cmds...))
	}
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = firstErr(c.DoMulti(ctx, tx(g)...))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

const setPXScript = `for i, k in ipairs(KEYS) do redis.call('SET', k, ARGV[i+1], 'PX', ARGV[1]) end return #KEYS`

// luaPerSlot sends one EVALSHA per slot that SETs every key of the slot
// with PX, all in one pipeline. The script is loaded once beforehand.
func luaPerSlot(sha string) setStrategy {
	return func(ctx context.Context, s *redisstore.Store, items []store.Item) error {
		c := s.Client()
		ms := strconv.FormatInt(items[0].TTL.Milliseconds(), 10)
		var cmds rueidis.Commands
		for _, g := range bySlot(s, items) {
			keys := make([]string, len(g))
			args := make([]string, 0, len(g)+1)
			args = append(args, ms)
			for i, it := range g {
				keys[i] = it.Key
				args = append(args, rueidis.BinaryString(it.Value))
			}
			cmds = append(cmds, c.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		}
		return firstErr(c.DoMulti(ctx, cmds...))
	}
}

func loadScript(b *testing.B, s *redisstore.Store) string {
	var sha string
	for addr, n := range s.Client().Nodes() {
		v, err := n.Do(context.Background(), n.B().ScriptLoad().Script(setPXScript).Build()).ToString()
		if err != nil {
			b.Fatalf("SCRIPT LOAD on %s: %v", addr, err)
		}
		sha = v
	}
	return sha
}

// BenchmarkSetMany100 compares ways to write 100 items of 1 KiB with a
// TTL: the store's pipelined SET PX against the per-slot alternatives.
func BenchmarkSetMany100(b *testing.B) {
	ctx := context.Background()
	val := make([]byte, 1024)
	for i := range val {
		val[i] = byte(i)
	}
	for _, tp := range topologies(b) {
		sha := loadScript(b, tp.s)
		strategies := []struct {
			name string
			fn   setStrategy
		}{
			// The store's own SetMany: one pipelined SET PX per item.
			{"set-px-pipelined", func(ctx context.Context, s *redisstore.Store, items []store.Item) error {
				return s.SetMany(ctx, items)
			}},
			{"mset+pexpire", msetPexpire},
			{"multi-mset+pexpire", multiMsetPexpire},
			{"lua-per-slot", luaPerSlot(sha)},
		}
		for _, ks := range []string{"spread", "tagged"} {
			keys := keySets()[ks]
			its := make([]store.Item, len(keys))
			for i, k := range keys {
				its[i] = store.Item{Key: k, Value: val, TTL: time.Hour}
			}
			for _, st := range strategies {
				b.Run(tp.name+"/"+ks+"/"+st.name, func(b *testing.B) {
					if err := st.fn(ctx, tp.s, its); err != nil {
						b.Fatal(err)
					}
					// Same effect as SetMany: values and TTLs are there.
					got, err := tp.s.GetMany(ctx, keys)
					if err != nil || len(got[99]) != len(val) {
						b.Fatalf("after %s: GetMany = %v", st.name, err)
					}
					if ttl, err := tp.s.Client().Do(ctx, tp.s.Client().B().Pttl().Key(keys[99]).Build()).AsInt64(); err != nil || ttl <= 0 {
						b.Fatalf("after %s: PTTL = %d, %v", st.name, ttl, err)
					}
					b.SetBytes(int64(len(its) * len(val)))
					b.ReportAllocs()
					for b.Loop() {
						if err := st.fn(ctx, tp.s, its); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkDeleteMany100 compares DEL and UNLINK per slot for 100 keys of
// 1 KiB (re-written before each delete, outside the timer).
func BenchmarkDeleteMany100(b *testing.B) {
	ctx := context.Background()
	val := make([]byte, 1024)
	for _, tp := range topologies(b) {
		keys := keySets()["spread"]
		its := make([]store.Item, len(keys))
		for i, k := range keys {
			its[i] = store.Item{Key: k, Value: val}
		}
		c := tp.s.Client()
		unlink := func(ctx context.Context) error {
			var cmds rueidis.Commands
			for _, g := range bySlot(tp.s, its) {
				ks := make([]string, len(g))
				for i := range g {
					ks[i] = g[i].Key
				}
				cmds = append(cmds, c.B().Unlink().Key(ks...).Build())
			}
			return firstErr(c.DoMulti(ctx, cmds...))
		}
		for _, st := range []struct {
			name string
			fn   func(context.Context) error
		}{
			{"del", func(ctx context.Context) error { return tp.s.DeleteMany(ctx, keys) }},
			{"unlink", unlink},
		} {
			b.Run(tp.name+"/"+st.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					if err := tp.s.SetMany(ctx, its); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if err := st.fn(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
