package dictstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/proctest"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/storeurl"
)

func TestMain(m *testing.M) {
	os.Exit(proctest.Main(m, proctest.Workers{"reader": readerWorker, "coldstart": coldStartWorker}))
}

// readerArgs tell a reader process where to read which keys.
type readerArgs struct {
	URL  string
	Keys []string
}

// readerReport is what it found: per key, "" for a decoded value or the
// error, and what its Registry did.
type readerReport struct {
	Errors  []string
	Titles  []string
	Lookups uint64
	Held    int
}

// readerWorker is a process that has never seen any dictionary: its Codec
// knows none, only the Registry that finds them on the servers.
func readerWorker(ctx context.Context, c *proctest.Child) error {
	var a readerArgs
	if err := c.Args(&a); err != nil {
		return err
	}
	s, err := storeurl.Open(ctx, a.URL)
	if err != nil {
		return err
	}
	defer s.Close()
	reg, err := dictstore.New(dictstore.Options{Store: s})
	if err != nil {
		return err
	}
	cd, err := codec.New(codec.Options{DictionarySource: reg})
	if err != nil {
		return err
	}
	cache, err := kura.New[corpus.Article](s, kura.Options{Codec: cd})
	if err != nil {
		return err
	}
	if err := c.Ready(ctx); err != nil {
		return err
	}
	var rep readerReport
	for _, k := range a.Keys {
		v, err := cache.Get(ctx, k)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		rep.Errors = append(rep.Errors, msg)
		rep.Titles = append(rep.Titles, v.Title)
	}
	st := reg.Stats()
	rep.Lookups, rep.Held = st.Lookups, st.Held
	return c.Report(rep)
}

var (
	dictOnce sync.Once
	dicts    [2][]byte
)

// trained returns two dictionaries trained on two article generations.
func trained(t *testing.T) (d1, d2 []byte) {
	t.Helper()
	dictOnce.Do(func() {
		for i, seed := range []int64{99, 98} {
			var samples [][]byte
			for _, a := range corpus.Articles(seed, 24) {
				b, err := codec.MsgPack().Marshal(nil, a)
				if err != nil {
					panic(err)
				}
				samples = append(samples, b)
			}
			d, _, err := codec.TrainContentDictionary(samples, 8<<10)
			if err != nil {
				panic(err)
			}
			dicts[i] = d
		}
	})
	return dicts[0], dicts[1]
}

// backend is a real server topology and a way to see its raw keys.
type backend struct {
	name string
	url  string
	// perServer returns, for each server, the dictionary keys it holds.
	perServer func(t *testing.T, id uint32, reg *dictstore.Registry) [][]string
	// evict removes every dictionary key the way the server would.
	evict func(t *testing.T, reg *dictstore.Registry, id uint32)
}

func TestPublishReadRotateRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	runLifecycle(t, backend{
		name: "redis", url: srv.URL(),
		perServer: func(t *testing.T, id uint32, _ *dictstore.Registry) [][]string {
			return [][]string{redisKeys(t, srv, id)}
		},
		evict: func(t *testing.T, reg *dictstore.Registry, id uint32) {
			if _, err := srv.Do(context.Background(), "DEL", reg.Key(id)); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func TestPublishReadRotateRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	cl := servertest.RedisCluster(t)
	runLifecycle(t, backend{
		name: "redis-cluster", url: cl.URL(),
		perServer: func(t *testing.T, id uint32, _ *dictstore.Registry) [][]string {
			var out [][]string
			for _, n := range cl.Nodes {
				out = append(out, redisKeys(t, n, id))
			}
			return out
		},
		evict: func(t *testing.T, _ *dictstore.Registry, id uint32) {
			for _, n := range cl.Nodes {
				for _, k := range redisKeys(t, n, id) {
					if _, err := n.Do(context.Background(), "DEL", k); err != nil {
						t.Fatal(err)
					}
				}
			}
		},
	})
}

func TestPublishReadRotateMemcachedPool(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	pool := servertest.MemcachedPool(t, 3, servers.MemcachedConfig{})
	var addrs []string
	for _, m := range pool {
		addrs = append(addrs, m.Addr)
	}
	one := func(t *testing.T, addr string) store.Store {
		s, err := storeurl.Open(context.Background(), "memcached://"+addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	runLifecycle(t, backend{
		name: "memcached", url: "memcached://" + strings.Join(addrs, ","),
		perServer: func(t *testing.T, id uint32, reg *dictstore.Registry) [][]string {
			// The pool's node keys, looked for on each server directly.
			keys := nodeKeysOf(t, "memcached://"+strings.Join(addrs, ","), reg.Key(id))
			var out [][]string
			for _, a := range addrs {
				s := one(t, a)
				var found []string
				for _, k := range keys {
					if _, err := s.Get(context.Background(), k); err == nil {
						found = append(found, k)
					}
				}
				out = append(out, found)
			}
			return out
		},
		evict: func(t *testing.T, reg *dictstore.Registry, id uint32) {
			keys := nodeKeysOf(t, "memcached://"+strings.Join(addrs, ","), reg.Key(id))
			for _, a := range addrs {
				s := one(t, a)
				for _, k := range keys {
					if err := s.Delete(context.Background(), k); err != nil {
						t.Fatal(err)
					}
				}
			}
		},
	})
}

func nodeKeysOf(t *testing.T, url, key string) []string {
	t.Helper()
	s, err := storeurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nk, ok := store.Find[dictstore.NodeKeyer](s)
	if !ok {
		t.Fatalf("%s: store has no NodeKeys", url)
	}
	keys, err := nk.NodeKeys(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// redisKeys lists the dictionary keys of id on one redis-server.
func redisKeys(t *testing.T, r *servers.Redis, id uint32) []string {
	t.Helper()
	out, err := r.Do(context.Background(), "KEYS", fmt.Sprintf("*kura:dict:%08x*", id))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range strings.Fields(out) {
		if strings.Contains(l, "kura:dict:") {
			keys = append(keys, l)
		}
	}
	return keys
}

// runLifecycle: a writer publishes a trained dictionary and writes values
// with it; a reader process that never saw it decodes them; the
// dictionary is evicted and re-published; the writer rotates to a second
// dictionary and a fresh reader process decodes both generations.
func runLifecycle(t *testing.T, b backend) {
	ctx := context.Background()
	d1, d2 := trained(t)
	s, err := storeurl.Open(ctx, b.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	reg, err := dictstore.New(dictstore.Options{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	id1, err := reg.Publish(ctx, d1)
	if err != nil {
		t.Fatal(err)
	}
	perServer := b.perServer(t, id1, reg)
	for i, keys := range perServer {
		if len(keys) != 1 {
			t.Fatalf("%s: server %d holds dictionary keys %q, want exactly one", b.name, i, keys)
		}
	}

	wc, err := codec.New(codec.Options{Compressor: codec.Zstd(3)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wc.SetDictionary(d1); err != nil {
		t.Fatal(err)
	}
	writer, err := kura.New[corpus.Article](s, kura.Options{Name: "articles", Codec: wc})
	if err != nil {
		t.Fatal(err)
	}
	arts := corpus.Articles(7, 12)
	gen1 := make([]string, 6)
	for i := range gen1 {
		gen1[i] = fmt.Sprintf("%s:article:%d", b.name, i)
		if err := writer.Set(ctx, gen1[i], arts[i], time.Hour); err != nil {
			t.Fatal(err)
		}
	}

	read := func(keys []string) readerReport {
		t.Helper()
		g := proctest.Start(t, "reader", 1, readerArgs{URL: b.url, Keys: keys}, proctest.Options{})
		if err := g.Go(); err != nil {
			t.Fatal(err)
		}
		reps, err := proctest.Decode[readerReport](g.WaitOK(t))
		if err != nil || len(reps) != 1 {
			t.Fatalf("reader reports: %v (%d)", err, len(reps))
		}
		return reps[0]
	}
	want := func(rep readerReport, keys []string, from []corpus.Article, lookups uint64) {
		t.Helper()
		for i := range keys {
			if rep.Errors[i] != "" {
				t.Fatalf("%s: reader: key %s: %s", b.name, keys[i], rep.Errors[i])
			}
			if rep.Titles[i] != from[i].Title {
				t.Fatalf("%s: reader: key %s decoded another value", b.name, keys[i])
			}
		}
		if rep.Lookups != lookups {
			t.Fatalf("%s: reader looked dictionaries up %d times, want %d (one per dictionary)", b.name, rep.Lookups, lookups)
		}
	}
	want(read(gen1), gen1, arts, 1)

	// Eviction: the keys disappear; a reader that never saw the
	// dictionary misses (never crashes), then Republish puts it back.
	b.evict(t, reg, id1)
	rep := read(gen1[:1])
	if rep.Errors[0] == "" || rep.Lookups != 1 {
		t.Fatalf("%s: with the dictionary evicted, the reader got %q after %d lookups; want a miss after 1", b.name, rep.Errors[0], rep.Lookups)
	}
	n, err := reg.Republish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(perServer) {
		t.Fatalf("%s: Republish wrote %d keys, want %d (one per server)", b.name, n, len(perServer))
	}
	if n, err := reg.Republish(ctx); err != nil || n != 0 {
		t.Fatalf("%s: second Republish wrote %d keys (%v), want 0", b.name, n, err)
	}
	want(read(gen1), gen1, arts, 1)

	// Rotation: a second dictionary, new values with it, old ones live on.
	id2, err := reg.Publish(ctx, d2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wc.SetDictionary(d2); err != nil {
		t.Fatal(err)
	}
	gen2 := make([]string, 6)
	for i := range gen2 {
		gen2[i] = fmt.Sprintf("%s:article:%d", b.name, 6+i)
		if err := writer.Set(ctx, gen2[i], arts[6+i], time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	want(read(append(slices.Clone(gen1), gen2...)), append(slices.Clone(gen1), gen2...), arts, 2)

	st := writer.Stats()
	if st.BytesWrittenByDictionary[id1] == 0 || st.BytesWrittenByDictionary[id2] == 0 {
		t.Fatalf("%s: bytes by dictionary %v, want both %08x and %08x", b.name, st.BytesWrittenByDictionary, id1, id2)
	}
	var sum uint64
	for _, v := range st.BytesWrittenByDictionary {
		sum += v
	}
	if sum != st.BytesWritten {
		t.Fatalf("%s: bytes by dictionary sum to %d, BytesWritten is %d", b.name, sum, st.BytesWritten)
	}
	reg.Retire(id1)
	if got := reg.Published(); !slices.Equal(got, []uint32{id2}) {
		t.Fatalf("published after Retire: %v", got)
	}
}

// flakyStore answers Get and GetMany slowly, or with bytes of another
// content, and counts the calls.
type flakyStore struct {
	store.Store
	mu    sync.Mutex
	calls int
	delay time.Duration
	swap  []byte
}

func (f *flakyStore) Get(ctx context.Context, key string) ([]byte, error) {
	f.mu.Lock()
	f.calls++
	d, swap := f.delay, f.swap
	f.mu.Unlock()
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if swap != nil {
		return swap, nil
	}
	return f.Store.Get(ctx, key)
}

func (f *flakyStore) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestLookupBoundedAndNegative(t *testing.T) {
	ctx := context.Background()
	d1, d2 := trained(t)
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := dictstore.New(dictstore.Options{Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	id1, err := pub.Publish(ctx, d1)
	if err != nil {
		t.Fatal(err)
	}

	// A stalled server: every caller waits at most FetchTimeout (one
	// lookup for all of them), then the id is negative for NegativeTTL.
	slow := &flakyStore{Store: mem, delay: time.Hour}
	reg, err := dictstore.New(dictstore.Options{Store: slow, FetchTimeout: 50 * time.Millisecond, NegativeTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = reg.Dictionary(id1) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // 600x the bound: a stall, not slowness
		t.Fatal("lookups against a stalled server did not return")
	}
	for _, err := range errs {
		if !errors.Is(err, codec.ErrUnknownDictionary) {
			t.Fatalf("stalled lookup: %v", err)
		}
	}
	before := slow.count()
	if _, err := reg.Dictionary(id1); !errors.Is(err, dictstore.ErrNotPublished) {
		t.Fatalf("negative-cached lookup: %v", err)
	}
	if slow.count() != before {
		t.Fatal("a negative-cached id asked the server again")
	}
	if st := reg.Stats(); st.NegativeHits == 0 || st.LookupFailures == 0 {
		t.Fatalf("stats %+v", st)
	}

	// Bytes of another dictionary under the key: never used.
	bad := &flakyStore{Store: mem, swap: d2}
	reg2, err := dictstore.New(dictstore.Options{Store: bad})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg2.Dictionary(id1); !errors.Is(err, codec.ErrDictionaryMismatch) {
		t.Fatalf("swapped dictionary: %v", err)
	}
	if reg2.Stats().Mismatches != 1 {
		t.Fatalf("mismatches %d", reg2.Stats().Mismatches)
	}

	// A healthy lookup is cached in process: one server read.
	good := &flakyStore{Store: mem}
	reg3, err := dictstore.New(dictstore.Options{Store: good, MaxDictionaries: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		d, err := reg3.Dictionary(id1)
		if err != nil || string(d) != string(d1) {
			t.Fatalf("lookup: %v", err)
		}
	}
	if good.count() != 1 {
		t.Fatalf("%d server reads for one dictionary", good.count())
	}
}

func TestOptionsErrors(t *testing.T) {
	if _, err := dictstore.New(dictstore.Options{}); err == nil || !strings.Contains(err.Error(), "Store") {
		t.Fatalf("nil store: %v", err)
	}
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dictstore.New(dictstore.Options{Store: mem, FetchTimeout: -1}); err == nil || !strings.Contains(err.Error(), "FetchTimeout") {
		t.Fatalf("negative timeout: %v", err)
	}
}

// Per-prefix dictionaries: each kind of value is written by its own Cache
// whose Codec has the dictionary trained on that kind; one reader Registry
// serves a reader Cache of each kind.
func TestPerKindDictionaries(t *testing.T) {
	ctx := context.Background()
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := dictstore.New(dictstore.Options{Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	dArticles, _ := trained(t)
	var samples [][]byte
	for u := range int64(40) {
		b, err := codec.MsgPack().Marshal(nil, corpus.Inventory(3, u, 20))
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, b)
	}
	dItems, idItems, err := codec.TrainContentDictionary(samples, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	idArticles, err := pub.Publish(ctx, dArticles)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(ctx, dItems); err != nil {
		t.Fatal(err)
	}
	writerCodec := func(d []byte) *codec.Codec {
		c, err := codec.New(codec.Options{Compressor: codec.Zstd(3)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetDictionary(d); err != nil {
			t.Fatal(err)
		}
		return c
	}
	articles, err := kura.New[corpus.Article](mem, kura.Options{Name: "articles", Codec: writerCodec(dArticles)})
	if err != nil {
		t.Fatal(err)
	}
	items, err := kura.New[[]corpus.Item](mem, kura.Options{Name: "items", Codec: writerCodec(dItems)})
	if err != nil {
		t.Fatal(err)
	}
	art := corpus.NewArticle(11, 0)
	inv := corpus.Inventory(11, 1, 20)
	if err := articles.Set(ctx, "article:1", art, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := items.Set(ctx, "items:1", inv, time.Hour); err != nil {
		t.Fatal(err)
	}
	if a, i := articles.Stats().BytesWrittenByDictionary, items.Stats().BytesWrittenByDictionary; a[idArticles] == 0 || i[idItems] == 0 {
		t.Fatalf("articles wrote %v, items %v; want each with its own dictionary", a, i)
	}

	reg, err := dictstore.New(dictstore.Options{Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := codec.New(codec.Options{DictionarySource: reg})
	if err != nil {
		t.Fatal(err)
	}
	ra, _ := kura.New[corpus.Article](mem, kura.Options{Codec: rc})
	ri, _ := kura.New[[]corpus.Item](mem, kura.Options{Codec: rc})
	gotA, err := ra.Get(ctx, "article:1")
	if err != nil || gotA.Title != art.Title {
		t.Fatalf("article: %v", err)
	}
	gotI, err := ri.Get(ctx, "items:1")
	if err != nil || len(gotI) != len(inv) {
		t.Fatalf("items: %v", err)
	}
	if st := reg.Stats(); st.Lookups != 2 || st.Held != 2 {
		t.Fatalf("reader registry %+v; want 2 lookups, 2 held", st)
	}
}

type coldStartArgs struct {
	URL, Key string
}

// coldStartReport is what a fresh reader process took: to open the store
// and build its Cache, then to decode its first value (with a dictionary:
// the lookup, the check, the decoder's construction and the decode).
type coldStartReport struct {
	OpenNs, FirstNs int64
	Err             string
}

func coldStartWorker(ctx context.Context, c *proctest.Child) error {
	var a coldStartArgs
	if err := c.Args(&a); err != nil {
		return err
	}
	if err := c.Ready(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	s, err := storeurl.Open(ctx, a.URL)
	if err != nil {
		return err
	}
	defer s.Close()
	reg, err := dictstore.New(dictstore.Options{Store: s})
	if err != nil {
		return err
	}
	cd, err := codec.New(codec.Options{DictionarySource: reg})
	if err != nil {
		return err
	}
	cache, err := kura.New[corpus.Article](s, kura.Options{Codec: cd})
	if err != nil {
		return err
	}
	t1 := time.Now()
	_, err = cache.Get(ctx, a.Key)
	rep := coldStartReport{OpenNs: t1.Sub(t0).Nanoseconds(), FirstNs: time.Since(t1).Nanoseconds()}
	if err != nil {
		rep.Err = err.Error()
	}
	return c.Report(rep)
}

// BenchmarkReaderColdStart: a fresh process reads its first value from a
// real redis-server, written with a published dictionary (zstd or S2,
// 16 KiB) or without one (kura's default), and reports how long the
// first decode took after the store was open. Each iteration is a new
// process.
//
//	go test ./dictstore -run '^$' -bench ReaderColdStart -benchtime 20x -count 3
func BenchmarkReaderColdStart(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	ctx := context.Background()
	s, err := storeurl.Open(ctx, srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pub, err := dictstore.New(dictstore.Options{Store: s})
	if err != nil {
		b.Fatal(err)
	}
	var samples [][]byte
	for _, a := range corpus.Articles(99, 32) {
		p, _ := codec.MsgPack().Marshal(nil, a)
		samples = append(samples, p)
	}
	zd, _, err := codec.TrainContentDictionary(samples, 16<<10)
	if err != nil {
		b.Fatal(err)
	}
	sd, _, err := codec.TrainS2Dictionary(samples, 16<<10)
	if err != nil {
		b.Fatal(err)
	}
	art := corpus.NewArticle(5, 1)
	for _, v := range []struct {
		name string
		comp codec.Compressor
		dict []byte
	}{{"no-dictionary", codec.S2(), nil}, {"zstd-dict16K", codec.Zstd(3), zd}, {"s2-dict16K", codec.S2(), sd}} {
		cd, err := codec.New(codec.Options{Compressor: v.comp})
		if err != nil {
			b.Fatal(err)
		}
		if v.dict != nil {
			if _, err := pub.Publish(ctx, v.dict); err != nil {
				b.Fatal(err)
			}
			if _, err := cd.SetDictionary(v.dict); err != nil {
				b.Fatal(err)
			}
		}
		w, err := kura.New[corpus.Article](s, kura.Options{Codec: cd})
		if err != nil {
			b.Fatal(err)
		}
		key := "coldstart:" + v.name
		if err := w.Set(ctx, key, art, time.Hour); err != nil {
			b.Fatal(err)
		}
		b.Run(v.name, func(b *testing.B) {
			var open, first int64
			for b.Loop() {
				g := proctest.Start(b, "coldstart", 1, coldStartArgs{URL: srv.URL(), Key: key}, proctest.Options{})
				if err := g.Go(); err != nil {
					b.Fatal(err)
				}
				reps, err := proctest.Decode[coldStartReport](g.WaitOK(b))
				if err != nil || len(reps) != 1 || reps[0].Err != "" {
					b.Fatalf("cold reader: %v %+v", err, reps)
				}
				open += reps[0].OpenNs
				first += reps[0].FirstNs
			}
			b.ReportMetric(float64(open)/float64(b.N)/1e3, "open-µs")
			b.ReportMetric(float64(first)/float64(b.N)/1e3, "first-value-µs")
		})
	}
}

// Real eviction: a server under memory pressure drops the dictionary (it
// is read once per reader, so it is among the least recently used keys);
// readers then miss, and the writer's Republish puts it back.
func TestRepublishAfterEviction(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	d1, _ := trained(t)
	mc := servertest.Memcached(t, servers.MemcachedConfig{MemoryMB: 8})
	rd := servertest.Redis(t, servers.RedisConfig{Args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"}})
	for name, url := range map[string]string{"memcached": "memcached://" + mc.Addr, "redis-allkeys-lru": rd.URL()} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := storeurl.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			writer, err := dictstore.New(dictstore.Options{Store: s})
			if err != nil {
				t.Fatal(err)
			}
			id, err := writer.Publish(ctx, d1)
			if err != nil {
				t.Fatal(err)
			}
			keys := []string{writer.Key(id)}
			if nk, ok := store.Find[dictstore.NodeKeyer](s); ok {
				if keys, err = nk.NodeKeys(ctx, writer.Key(id)); err != nil {
					t.Fatal(err)
				}
			}
			// Fill with values of the dictionary's size (memcached evicts
			// within a slab class) until the dictionary is gone. Each
			// round writes twice the server's memory, then looks once (a
			// read counts as use for the LRU, so not while filling).
			filler := make([]byte, len(d1))
			evicted := false
			for round, i := 0, 0; round < 5 && !evicted; round++ {
				for end := i + (16<<20)/len(filler); i < end; i++ {
					filler[0], filler[1], filler[2] = byte(i), byte(i>>8), byte(i>>16)
					if err := s.Set(ctx, fmt.Sprintf("fill:%d", i), filler, 0); err != nil && !strings.Contains(err.Error(), "memory") {
						t.Fatal(err)
					}
				}
				_, err := s.Get(ctx, keys[0])
				evicted = errors.Is(err, store.ErrNotFound)
			}
			if !evicted {
				t.Fatal("the server never evicted the dictionary")
			}
			reader, err := dictstore.New(dictstore.Options{Store: s, NegativeTTL: -1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := reader.Dictionary(id); !errors.Is(err, dictstore.ErrNotPublished) {
				t.Fatalf("evicted dictionary: %v", err)
			}
			if n, err := writer.Republish(ctx); err != nil || n != 1 {
				t.Fatalf("Republish: %d keys, %v", n, err)
			}
			if d, err := reader.Dictionary(id); err != nil || string(d) != string(d1) {
				t.Fatalf("after Republish: %v", err)
			}
		})
	}
}
