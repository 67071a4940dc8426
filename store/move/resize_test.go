package move_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/move"
)

// resizeSizes are the resize measurement's sizes: the under make
// soak (100,000 keys, 64 callers, 60 s after the switch, 3 runs, 24 Redis
// servers to 6), a smaller one under make test.
func resizeSizes() (keys, callers int, after time.Duration, runs, redisFrom, redisTo int) {
	if os.Getenv("KURA_SOAK") == "1" {
		return 100_000, 64, 60 * time.Second, 3, 24, 6
	}
	return 3_000, 64, time.Second, 1, 6, 2
}

// article is the cached value: the size of a small record.
type article struct {
	ID   int
	Body string
}

// resizeRun is one measured run of one mode.
type resizeRun struct {
	loads, reads uint64
	move         move.Stats
}

// TestResizeLoads measures what the issue asks: every key cached on the
// old ring, then the switch, then 64 callers reading Zipf-distributed
// keys (s = 1.01) for a while, counting loader calls: a naive switch (the
// new ring alone) against a move in its warm-up phase. Both modes run on
// the same servers, interleaved, each run under a key prefix of its own.
// The target is at least 90% fewer loads with the warm-up.
func TestResizeLoads(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers, seconds of load")
	}
	keys, callers, after, runs, from, to := resizeSizes()
	_, rs := servertest.RedisShards(t, from+to, servers.RedisConfig{})
	mc := servertest.Addrs(servertest.MemcachedPool(t, 4, servers.MemcachedConfig{}))
	topos := []fleet{
		newFleet(fmt.Sprintf("redis %d -> %d servers", from, to), "redis", rs[:from], rs[from:]),
		newFleet("memcached 3 -> 4 servers", "memcached", mc[:3], mc),
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| fleet | keys | callers | counted after the switch | runs | loads, naive (median) | loads, warm-up (median) | fewer loads | warm-up hits / copies (median run) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, tp := range topos {
		var naive, warm []resizeRun
		for r := 0; r < runs; r++ {
			for _, mode := range []string{"naive", "warm"} {
				prefix := fmt.Sprintf("rz:%d:%s:%d:", time.Now().UnixNano()%1e9, mode, r)
				run := measureResize(t, tp, mode, prefix, keys, callers, after)
				t.Logf("%s run %d %s: %d loads, %d reads, move %+v", tp.name, r, mode, run.loads, run.reads, run.move)
				if mode == "naive" {
					naive = append(naive, run)
				} else {
					warm = append(warm, run)
				}
			}
		}
		n, w := median(naive), median(warm)
		cut := 1 - float64(w.loads)/float64(max(n.loads, 1))
		fmt.Fprintf(&table, "| %s | %d | %d | %v | %d | %d | %d | %.2f%% | %d / %d |\n", tp.name, keys, callers, after, runs, n.loads, w.loads, 100*cut, w.move.WarmHits, w.move.Copies)
		if n.loads == 0 {
			t.Errorf("%s: the naive switch loaded nothing: the run measured nothing", tp.name)
		}
		if cut < 0.9 {
			t.Errorf("%s: the warm-up cut loads by %.1f%% (%d -> %d), want at least 90%%", tp.name, 100*cut, n.loads, w.loads)
		}
	}
	t.Log(table.String())
	if f := os.Getenv("KURA_RESIZE_TABLE"); f != "" {
		_ = os.WriteFile(f, []byte(table.String()), 0o644)
	}
}

// median returns the run with the median loads.
func median(runs []resizeRun) resizeRun {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(a, b resizeRun) int { return int(int64(a.loads) - int64(b.loads)) })
	return s[len(s)/2]
}

// measureResize caches keys on the old ring, switches (naive: a Cache on
// the new ring; warm: a Cache on a move in PhaseWarm) and counts the
// loader calls of callers reading for after.
func measureResize(t *testing.T, f fleet, mode, prefix string, keys, callers int, after time.Duration) resizeRun {
	t.Helper()
	ctx := context.Background()
	key := func(i int) string { return fmt.Sprintf("%sarticle:%d", prefix, i) }
	val := func(i int) article { return article{ID: i, Body: strings.Repeat("x", 200)} }
	// Every key cached before the switch, on the old ring.
	old := f.open(t, "old")
	before, err := kura.New[article](old, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < keys; lo += 1000 {
		items := map[string]article{}
		for i := lo; i < min(lo+1000, keys); i++ {
			items[key(i)] = val(i)
		}
		if err := before.SetMany(ctx, items, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	_ = before.Close()
	_ = old.Close()
	// The switch.
	var s store.Store
	var mv *move.Store
	if mode == "naive" {
		s = f.open(t, "new")
	} else {
		mv, err = move.New(move.Options{Old: f.open(t, "old"), New: f.open(t, "new"), Phase: move.PhaseWarm})
		if err != nil {
			t.Fatal(err)
		}
		s = mv
	}
	defer s.Close()
	c, err := kura.New[article](s, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var loads, reads atomic.Uint64
	loader := func(_ context.Context, k string) (article, error) {
		loads.Add(1)
		var id int
		_, _ = fmt.Sscanf(k[strings.LastIndexByte(k, ':')+1:], "%d", &id)
		return val(id), nil
	}
	end := time.Now().Add(after)
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), uint64(len(prefix))))
			z := rand.NewZipf(r, 1.01, 1, uint64(keys-1))
			for time.Now().Before(end) {
				if _, err := c.Fetch(ctx, key(int(z.Uint64())), time.Hour, loader); err == nil {
					reads.Add(1)
				}
			}
		})
	}
	wg.Wait()
	run := resizeRun{loads: loads.Load(), reads: reads.Load()}
	if mv != nil {
		run.move = mv.Stats()
	}
	return run
}
