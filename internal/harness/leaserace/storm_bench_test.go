package leaserace_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
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

// stormReport is a worker's count of reads and errors, and the waits:
// how long each read that returned a value loaded after it began, by
// another caller, took (a read that had to wait for someone's load).
type stormReport struct {
	Reads, Errors int64
	Waits         []int64 // microseconds
	// Kura is the kura Cache's statistics (kura peers only).
	Kura *workerStats `json:",omitempty"`
}

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
	// The value a load returns is the time it ended (unix nanoseconds,
	// one clock for every process): a read that returns a value newer
	// than its own start, which it did not load, waited for that load.
	load := func(ctx context.Context) (int64, error) {
		_, err := dbIncr(ctx, db, a.key("loads"))
		time.Sleep(5 * time.Millisecond)
		loaded(ctx)
		return time.Now().UnixNano(), err
	}
	var read func(ctx context.Context) (int64, error)
	var kstats func() *workerStats
	switch a.Peer {
	case "kura":
		cache, s, err := openCache(ctx, a.args)
		if err != nil {
			return err
		}
		defer s.Close()
		kstats = func() *workerStats { st := statsOf(cache, 0, 0, 0); return &st }
		read = func(ctx context.Context) (int64, error) {
			return cache.Fetch(ctx, key, time.Minute, func(ctx context.Context, _ string) (int64, error) { return load(ctx) })
		}
	case "go-redis-cache":
		rdb := goredis.NewClient(&goredis.Options{Addr: redisAddr(a.Addrs[0]), PoolSize: 64})
		defer rdb.Close()
		gc := gocache.New(&gocache.Options{Redis: rdb})
		read = func(ctx context.Context) (int64, error) {
			var v int64
			err := gc.Once(&gocache.Item{Ctx: ctx, Key: key, Value: &v, TTL: time.Minute,
				Do: func(it *gocache.Item) (any, error) { return load(it.Context()) }})
			return v, err
		}
	case "rueidisaside":
		ac, err := rueidisaside.NewClient(rueidisaside.ClientOption{ClientOption: rueidis.ClientOption{InitAddress: []string{redisAddr(a.Addrs[0])}}})
		if err != nil {
			return err
		}
		defer ac.Close()
		read = func(ctx context.Context) (int64, error) {
			s, err := ac.Get(ctx, time.Minute, key, func(ctx context.Context, _ string) (string, error) {
				n, err := load(ctx)
				return strconv.FormatInt(n, 10), err
			})
			if err != nil {
				return 0, err
			}
			return strconv.ParseInt(s, 10, 64)
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
	var mu sync.Mutex
	var waits []int64
	for i := 0; i < a.Readers; i++ {
		wg.Go(func() {
			var mine []int64
			for time.Now().Before(end) && ctx.Err() == nil {
				var own atomic.Bool
				rctx, cancel := context.WithTimeout(context.WithValue(ctx, loadedKey{}, &own), 10*time.Second)
				start := time.Now()
				v, err := read(rctx)
				if err != nil {
					errs.Add(1)
				} else if !own.Load() && v > start.UnixNano() {
					mine = append(mine, time.Since(start).Microseconds())
				}
				cancel()
				reads.Add(1)
			}
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	rep := stormReport{Reads: reads.Load(), Errors: errs.Load(), Waits: waits}
	if kstats != nil {
		rep.Kura = kstats()
	}
	return c.Report(rep)
}

// loadedKey marks, in a read's context, that the read's own loader ran.
type loadedKey struct{}

// loaded notes in ctx that this read loaded (peers hand the loader a
// context derived from the caller's; kura's shared load keeps its values).
func loaded(ctx context.Context) {
	if p, ok := ctx.Value(loadedKey{}).(*atomic.Bool); ok {
		p.Store(true)
	}
}

// BenchmarkInvalidationStorm: one hot key invalidated 100 times a second
// while 64 readers in 4 processes read it through a read-through cache
// with a 5 ms loader (kura also with its L1 over Redis tracking, as
// rueidisaside serves hits from its client-side cache). The figures are loader calls per invalidation (the
// load the database sees), the waits of the reads that had to wait for
// someone's load (p50, p99), and the cache server's CPU time per
// invalidation (INFO cpu, user + sys), and on Redis the share of
// invalidations that removed something (a value or a lease; one that
// finds the key empty costs no load) and the loads per such invalidation,
// for kura with and without leases,
// go-redis/cache Once and rueidisaside on one Redis, and kura with and
// without leases on memcached, side by side in one run. Each
// sub-benchmark runs for 5 s (20 s under KURA_SOAK=1) whatever b.N; run
// it with -benchtime 1x.
//
// KURA_STORM_ROUNDS=n runs every case n times, interleaved (round 1 of
// every case, then round 2, ...). KURA_STORM_BEFORE=path adds the case
// "redis/kura-before": the same worker from another build of this test
// binary (go test -c of an older commit, with this file), to compare a
// change with the commit before it in the same run.
func BenchmarkInvalidationStorm(b *testing.B) {
	db := servertest.Redis(b, servers.RedisConfig{})
	r := servertest.Redis(b, servers.RedisConfig{})
	mc := servertest.Memcached(b, servers.MemcachedConfig{})
	dur := 5 * time.Second
	if soak() {
		dur = 20 * time.Second
	}
	type stormCase struct {
		name, backend, peer, exe string
		leases, l1               bool
	}
	cases := []stormCase{
		{name: "redis/kura-leases", backend: "redis", peer: "kura", leases: true},
		{name: "redis/kura-leases-l1", backend: "redis", peer: "kura", leases: true, l1: true},
		{name: "redis/kura-no-leases", backend: "redis", peer: "kura"},
		{name: "redis/go-redis-cache-once", backend: "redis", peer: "go-redis-cache"},
		{name: "redis/rueidisaside", backend: "redis", peer: "rueidisaside"},
		{name: "memcached/kura-leases", backend: "memcached", peer: "kura", leases: true},
		{name: "memcached/kura-no-leases", backend: "memcached", peer: "kura"},
	}
	if exe := os.Getenv("KURA_STORM_BEFORE"); exe != "" {
		cases = append(cases[:2:2], append([]stormCase{{name: "redis/kura-before", backend: "redis", peer: "kura", leases: true, exe: exe}}, cases[2:]...)...)
	}
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("KURA_STORM_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for round := 1; round <= rounds; round++ {
		for _, tc := range cases {
			name := tc.name
			if rounds > 1 {
				name = fmt.Sprintf("round%d/%s", round, tc.name)
			}
			b.Run(name, func(b *testing.B) {
				a := stormArgs{args: args{Backend: tc.backend, DB: db.Addr, Run: runID("storm"), Leases: tc.leases, L1: tc.l1, Readers: 16},
					Peer: tc.peer, Duration: dur}
				if tc.backend == "redis" {
					a.Addrs = []string{r.URL()}
				} else {
					a.Addrs = []string{mc.Addr}
				}
				for i := 0; i < b.N; i++ {
					runStorm(b, a, tc.exe, db, r)
				}
			})
		}
	}
}

// runStorm runs one storm of a.Duration and reports its figures.
func runStorm(b *testing.B, a stormArgs, exe string, db, r *servers.Redis) {
	ctx := context.Background()
	dur := a.Duration
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
	if err := dbSet(ctx, dbc, a.key("loads"), 0); err != nil {
		b.Fatal(err)
	}
	g := proctest.Start(b, "storm", 4, a, proctest.Options{Timeout: dur + time.Minute, Executable: exe})
	if err := g.Go(); err != nil {
		b.Fatal(err)
	}
	removed := countRemovals(ctx, b, a, r)
	cpu0 := serverCPU(ctx, b, a, r)
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	invalidations := 0
	for time.Since(start) < dur {
		<-tick.C
		var err error
		if a.Peer == "kura" {
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
	cpu := serverCPU(ctx, b, a, r) - cpu0
	time.Sleep(50 * time.Millisecond) // the last invalidations' events
	emptied := removed()
	var reads, errs int64
	var waits []int64
	for _, rep := range reps {
		reads += rep.Reads
		errs += rep.Errors
		waits = append(waits, rep.Waits...)
		if rep.Kura != nil && testing.Verbose() {
			b.Logf("kura process: %+v", *rep.Kura)
		}
	}
	loads, err := dbGet(ctx, dbc, a.key("loads"))
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(waits)
	pct := func(q float64) float64 {
		if len(waits) == 0 {
			return 0
		}
		return float64(waits[min(len(waits)-1, int(q*float64(len(waits))))]) / 1000
	}
	b.ReportMetric(float64(loads)/elapsed.Seconds(), "loads/s")
	b.ReportMetric(float64(invalidations)/elapsed.Seconds(), "invalidations/s")
	b.ReportMetric(float64(loads)/float64(invalidations), "loads/invalidation")
	b.ReportMetric(float64(reads)/elapsed.Seconds(), "reads/s")
	b.ReportMetric(float64(len(waits))/elapsed.Seconds(), "waits/s")
	b.ReportMetric(pct(0.50), "wait-p50-ms")
	b.ReportMetric(pct(0.99), "wait-p99-ms")
	if a.Backend == "redis" {
		b.ReportMetric(cpu.Seconds()*1e6/float64(invalidations), "server-cpu-us/invalidation")
		b.ReportMetric(float64(emptied)/float64(invalidations), "removing/invalidation")
		b.ReportMetric(float64(loads)/float64(max(emptied, 1)), "loads/removing-invalidation")
	}
	b.ReportMetric(float64(errs), "errors")
}

// countRemovals counts, on Redis, the deletions of the hot key that
// removed something (a value or a lease placeholder): Redis sends a
// keyspace event "del" only for a key that existed. An invalidation that
// finds the key empty (nobody reloaded it since the one before) costs no
// load; this tells those apart from loads saved otherwise. The returned
// func stops counting and returns the count.
func countRemovals(ctx context.Context, b *testing.B, a stormArgs, r *servers.Redis) func() int64 {
	if a.Backend != "redis" {
		return func() int64 { return 0 }
	}
	// "g" alone: DEL's events, not SET's (the fills), so the count costs
	// the server nothing per read or fill.
	if _, err := r.Do(ctx, "CONFIG", "SET", "notify-keyspace-events", "Kg"); err != nil {
		b.Fatal(err)
	}
	sub, err := openDB(redisAddr(r.URL()))
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	subbed := make(chan struct{})
	var once sync.Once
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sub.Receive(rueidis.WithOnSubscriptionHook(sctx, func(rueidis.PubSubSubscription) { once.Do(func() { close(subbed) }) }),
			sub.B().Subscribe().Channel("__keyspace@0__:"+a.key("hot")).Build(), func(m rueidis.PubSubMessage) {
				if m.Message == "del" {
					n.Add(1)
				}
			})
	}()
	select {
	case <-subbed:
	case <-time.After(10 * time.Second):
		b.Fatal("no keyspace subscription within 10 s")
	}
	return func() int64 {
		cancel()
		<-done
		sub.Close()
		return n.Load()
	}
}

// serverCPU is the cache server's CPU time so far: -1 on memcached (not
// measured).
func serverCPU(ctx context.Context, b *testing.B, a stormArgs, r *servers.Redis) time.Duration {
	if a.Backend != "redis" {
		return -1
	}
	d, err := r.CPU(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
