package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/move"
	"github.com/kuracache/kura/store/redisring"
)

// The resize: a fleet of resizeFrom Redis servers replaced by resizeTo new
// ones (the field report's 24 → 6, scaled to this machine), every article
// cached before the switch.
const resizeFrom, resizeTo = 4, 2

// runResize moves the article cache from resizeFrom private
// redis-servers to resizeTo others twice, a naive switch and a warm-up
// move, and counts the database queries of the same reads after each.
func runResize(ctx context.Context, env *Env, res *Result) error {
	size := env.cfg.Size
	fmt.Fprintf(env.progress, "  resize: starting %d + %d private redis-servers ...\n", resizeFrom, resizeTo)
	addrs := make([]string, 0, resizeFrom+resizeTo)
	for range resizeFrom + resizeTo {
		r, err := servers.StartRedis(ctx, servers.RedisConfig{})
		if err != nil {
			return fmt.Errorf("resize: %w", err)
		}
		defer r.Stop()
		addrs = append(addrs, r.Addr)
	}
	ids := make([]int64, size.Articles)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	open := func(a []string) (store.Store, error) {
		return redisring.New(ctx, redisring.Options{Servers: a})
	}
	t := Table{Title: fmt.Sprintf("Resize from %d Redis servers to %d, every article cached before the switch, then %d reads (Zipf, %d callers)", resizeFrom, resizeTo, size.Reads, size.Concurrency),
		Columns: []string{"switch", "database queries after it", "rows loaded", "served by the old servers", "copied to the new ones"}}
	chart := Chart{Title: "Database queries after the switch", Unit: "queries"}
	var queries [2]int64
	for i, mode := range []string{"naive", "warm-up"} {
		prefix := "resize:" + mode + ":"
		// Before the switch: every article cached on the old fleet.
		old, err := open(addrs[:resizeFrom])
		if err != nil {
			return err
		}
		pre := &dbCounter{}
		arts, err := env.articlesByID(ctx, pre, ids)
		if err == nil {
			err = fillArticles(ctx, old, prefix, arts)
		}
		_ = old.Close()
		if err != nil {
			return fmt.Errorf("resize: caching the articles: %w", err)
		}
		// The switch.
		var s store.Store
		var mv *move.Store
		if mode == "naive" {
			s, err = open(addrs[resizeFrom:])
		} else {
			var o, n store.Store
			if o, err = open(addrs[:resizeFrom]); err == nil {
				if n, err = open(addrs[resizeFrom:]); err != nil {
					_ = o.Close()
				} else {
					mv, err = move.New(move.Options{Old: o, New: n, Phase: move.PhaseWarm})
					s = mv
				}
			}
		}
		if err != nil {
			return fmt.Errorf("resize: %w", err)
		}
		c := &dbCounter{}
		err = readArticles(ctx, env, s, c, prefix, size)
		_ = s.Close()
		if err != nil {
			return fmt.Errorf("resize (%s): %w", mode, err)
		}
		q, rows := c.snapshot()
		queries[i] = q
		var st move.Stats
		if mv != nil {
			st = mv.Stats()
		}
		t.Rows = append(t.Rows, []string{mode, fmt.Sprint(q), fmt.Sprint(rows), fmt.Sprint(st.WarmHits), fmt.Sprint(st.Copies)})
		chart.Bars = append(chart.Bars, Bar{Label: mode, Value: float64(q), Kura: mv != nil})
		res.count("resize."+mode+".db_queries", q)
		res.count("resize."+mode+".warm_hits", int64(st.WarmHits))
	}
	res.Tables = append(res.Tables, t)
	res.Charts = append(res.Charts, chart)
	res.Checks = append(res.Checks, Check{What: "database queries after a resize", Before: queries[0], After: queries[1], Want: "less"})
	res.Headline += fmt.Sprintf("; resize %d → %d servers: %d database queries after a naive switch, %d with the warm-up", resizeFrom, resizeTo, queries[0], queries[1])
	res.note("The resize: a naive switch points the cache at the new servers, where every key is a miss, so the database serves every article again; the warm-up move (store/move, docs/resize.md) reads a miss from the old servers, serves it and copies it over, under a lease on the new owner so that an invalidation is never undone.")
	res.Commands = append(res.Commands, "go test ./store/move -run TestResizeLoads -v   (the measured 24 → 6 and 3 → 4 runs: BENCHMARKS.md)")
	return nil
}

// fillArticles caches arts on s under prefix.
func fillArticles(ctx context.Context, s store.Store, prefix string, arts map[int64]corpus.Article) error {
	c, err := kura.New[corpus.Article](s, kura.Options{Name: "resize-fill", TTL: time.Hour})
	if err != nil {
		return err
	}
	defer c.Close()
	items := make(map[string]corpus.Article, len(arts))
	for id, a := range arts {
		items[prefix+strconv.FormatInt(id, 10)] = a
	}
	return c.SetMany(ctx, items, time.Hour)
}

// readArticles runs size.Reads Fetches of Zipf-chosen articles from
// size.Concurrency goroutines, loading misses from PostgreSQL.
func readArticles(ctx context.Context, env *Env, s store.Store, db *dbCounter, prefix string, size Size) error {
	c, err := kura.New[corpus.Article](s, kura.Options{Name: "resize", TTL: time.Hour})
	if err != nil {
		return err
	}
	defer c.Close()
	loader := func(ctx context.Context, key string) (corpus.Article, error) {
		id, err := strconv.ParseInt(key[len(prefix):], 10, 64)
		if err != nil {
			return corpus.Article{}, err
		}
		got, err := env.articlesByID(ctx, db, []int64{id})
		if err != nil {
			return corpus.Article{}, err
		}
		a, ok := got[id]
		if !ok {
			return corpus.Article{}, fmt.Errorf("article %d: %w", id, kura.ErrNotFound)
		}
		return a, nil
	}
	var wg sync.WaitGroup
	errs := make([]error, size.Concurrency)
	per := max(1, size.Reads/size.Concurrency)
	for g := range size.Concurrency {
		wg.Go(func() {
			z := rand.NewZipf(rand.New(rand.NewPCG(uint64(g), 7)), 1.01, 1, uint64(size.Articles-1))
			for range per {
				key := prefix + strconv.FormatUint(z.Uint64()+1, 10)
				if _, err := c.Fetch(ctx, key, time.Hour, loader); err != nil && !errors.Is(err, kura.ErrNotFound) {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
