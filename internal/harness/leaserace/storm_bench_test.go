package leaserace_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocache "github.com/go-redis/cache/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidisaside"

	"github.com/kuracache/kura/internal/harness/proctest"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// stormArgs are the storm worker's arguments.
type stormArgs struct {
	args
	Peer     string // "kura", "go-redis-cache", "rueidisaside"
	Duration time.Duration
}

type stormReport struct{ Reads, Errors int64 }

// redisAddr is host:port of a redis:// URL.
func redisAddr(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Host
}

// stormWorker reads one hot key with a.Readers goroutines for a.Duration
// through the peer under test; the loader counts its calls in the source
// Redis and takes 5 ms.
func stormWorker(ctx context.Context, c *proctest.Child) error {
	var a stormArgs
	if err := c.Args(&a); err != nil {
		return err
	}
	db, err := openDB(a.DB)
	if err != nil {
		return err
	}
	defer db.Close()
	key := a.key("hot")
	load := func(ctx context.Context) (int64, error) {
		n, err := dbIncr(ctx, db, a.key("loads"))
		time.Sleep(5 * time.Millisecond)
		return n, err
	}
	var read func(ctx context.Context) error
	switch a.Peer {
	case "kura":
		cache, s, err := openCache(ctx, a.args)
		if err != nil {
			return err
		}
		defer s.Close()
		read = func(ctx context.Context) error {
			_, err := cache.Fetch(ctx, key, time.Minute, func(ctx context.Context, _ string) (int64, error) { return load(ctx) })
			return err
		}
	case "go-redis-cache":
		rdb := goredis.NewClient(&goredis.Options{Addr: redisAddr(a.Addrs[0]), PoolSize: 64})
		defer rdb.Close()
		gc := gocache.New(&gocache.Options{Redis: rdb})
		read = func(ctx context.Context) error {
			var v int64
			return gc.Once(&gocache.Item{Ctx: ctx, Key: key, Value: &v, TTL: time.Minute,
				Do: func(it *gocache.Item) (any, error) { return load(it.Context()) }})
		}
	case "rueidisaside":
		ac, err := rueidisaside.NewClient(rueidisaside.ClientOption{ClientOption: rueidis.ClientOption{InitAddress: []string{redisAddr(a.Addrs[0])}}})
		if err != nil {
			return err
		}
		defer ac.Close()
		read = func(ctx context.Context) error {
			_, err := ac.Get(ctx, time.Minute, key, func(ctx context.Context, _ string) (string, error) {
				n, err := load(ctx)
				return strconv.FormatInt(n, 10), err
			})
			return err
		}
	default:
		return fmt.Errorf("unknown peer %q", a.Peer)
	}
	if err := c.Ready(ctx); err != nil {
		return err
	}
	var reads, errs atomic.Int64
	end := time.Now().Add(a.Duration)
	var wg sync.WaitGroup
	for i := 0; i < a.Readers; i++ {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := read(rctx); err != nil {
					errs.Add(1)
				}
				cancel()
				reads.Add(1)
			}
		})
	}
	wg.Wait()
	return c.Report(stormReport{Reads: reads.Load(), Errors: errs.Load()})
}

// BenchmarkInvalidationStorm: one hot key invalidated 100 times a second
// while 64 readers in 4 processes read it through a read-through cache
// with a 5 ms loader. The figure is loader calls per second (the load the
// database sees), for kura with and without leases, go-redis/cache Once
// and rueidisaside on one Redis, and kura with and without leases on
// memcached, side by side in one run. Each sub-benchmark runs for 5 s
// (20 s under KURA_SOAK=1) whatever b.N; run it with -benchtime 1x.
func BenchmarkInvalidationStorm(b *testing.B) {
	db := servertest.Redis(b, servers.RedisConfig{})
	r := servertest.Redis(b, servers.RedisConfig{})
	mc := servertest.Memcached(b, servers.MemcachedConfig{})
	dur := 5 * time.Second
	if soak() {
		dur = 20 * time.Second
	}
	cases := []struct {
		name, backend, peer string
		leases              bool
	}{
		{"redis/kura-leases", "redis", "kura", true},
		{"redis/kura-no-leases", "redis", "kura", false},
		{"redis/go-redis-cache-once", "redis", "go-redis-cache", false},
		{"redis/rueidisaside", "redis", "rueidisaside", false},
		{"memcached/kura-leases", "memcached", "kura", true},
		{"memcached/kura-no-leases", "memcached", "kura", false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			a := stormArgs{args: args{Backend: tc.backend, DB: db.Addr, Run: runID("storm"), Leases: tc.leases, Readers: 16},
				Peer: tc.peer, Duration: dur}
			if tc.backend == "redis" {
				a.Addrs = []string{r.URL()}
			} else {
				a.Addrs = []string{mc.Addr}
			}
			ctx := context.Background()
			cache, s, err := openCache(ctx, a.args)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			dbc, err := openDB(db.Addr)
			if err != nil {
				b.Fatal(err)
			}
			defer dbc.Close()
			rc, err := openDB(redisAddr(r.URL()))
			if err != nil {
				b.Fatal(err)
			}
			defer rc.Close()
			for i := 0; i < b.N; i++ {
				if err := dbSet(ctx, dbc, a.key("loads"), 0); err != nil {
					b.Fatal(err)
				}
				g := proctest.Start(b, "storm", 4, a, proctest.Options{Timeout: dur + time.Minute})
				if err := g.Go(); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				tick := time.NewTicker(10 * time.Millisecond)
				invalidations := 0
				for time.Since(start) < dur {
					<-tick.C
					var err error
					if tc.peer == "kura" {
						err = cache.Invalidate(ctx, a.key("hot"))
					} else { // go-redis/cache Delete and rueidisaside Del are a DEL
						err = rc.Do(ctx, rc.B().Del().Key(a.key("hot")).Build()).Error()
					}
					if err != nil {
						b.Fatal(err)
					}
					invalidations++
				}
				tick.Stop()
				reps, err := proctest.Decode[stormReport](g.WaitOK(b))
				if err != nil {
					b.Fatal(err)
				}
				elapsed := time.Since(start)
				var reads, errs int64
				for _, rep := range reps {
					reads += rep.Reads
					errs += rep.Errors
				}
				loads, err := dbGet(ctx, dbc, a.key("loads"))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(loads)/elapsed.Seconds(), "loads/s")
				b.ReportMetric(float64(invalidations)/elapsed.Seconds(), "invalidations/s")
				b.ReportMetric(float64(reads)/elapsed.Seconds(), "reads/s")
				b.ReportMetric(float64(errs), "errors")
			}
		})
	}
}
