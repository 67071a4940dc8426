package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/store/redisstore"
)

func bytesScenario() scenario {
	return scenario{
		name:    "bytes",
		title:   "Network bytes and value size",
		problem: "A news site caches ~15 KB articles from PostgreSQL in Redis as Gob; Redis's network out, not its CPU, sets how big (and costly) the Redis nodes must be.",
		answer:  "kura's default envelope (msgpack, compressed when it pays) sends less than half the bytes, and the compact envelope with an S2 dictionary trained on other articles (what kura codecs recommends) about half as many again, through the same read-through Fetch.",
		needs:   []string{"postgres", "redis"},
		run:     runBytes,
	}
}

type namedCodec struct {
	name  string
	codec *codec.Codec
	kura  bool
}

type codecRow struct {
	name                 string
	kura                 bool
	storedBytes          float64
	wireBytes            int64
	opsPerSec            float64
	p50, p99             time.Duration
	fillRows, readRows   int64
	fillQueries, readHit uint64
}

func runBytes(ctx context.Context, env *Env, res *Result) error {
	size := env.cfg.Size
	codecs, err := demoCodecs()
	if err != nil {
		return err
	}
	fmt.Fprintf(env.progress, "  training dictionaries on %d articles the demo does not read ...\n", size.DictSamples)
	t0 := time.Now()
	dictCodecs, err := trainedCodecs(env.cfg.Seed, size.DictSamples)
	if err != nil {
		return err
	}
	codecs = append(codecs, dictCodecs...)
	trainTime := time.Since(t0)

	st, err := redisstore.NewFromURL(ctx, env.redis.URL(), redisstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	wire := func() (int64, error) {
		info, err := env.redis.Do(ctx, "INFO", "stats")
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(servers.ParseInfo(info)["total_net_output_bytes"], 10, 64)
	}

	ids := make([]int64, size.Articles)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	var jsonBytes float64
	var rows []codecRow
	for _, nc := range codecs {
		var db dbCounter
		var firstErr error
		var errMu sync.Mutex
		// StoreTimeout: the fill writes batches of 50 articles (0.75 MB as
		// JSON); on a busy 2-core machine that can take longer than the
		// default 250 ms budget, and a skipped write-back would make every
		// read of the measured phase a miss.
		c, err := kura.New[corpus.Article](st, kura.Options{Name: nc.name, Codec: nc.codec, TTL: time.Hour,
			MaxValueSize: -1, WarnValueSize: -1, StoreTimeout: 10 * time.Second,
			OnError: func(op kura.Op, key string, err error) {
				errMu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("%v %s: %w", op, key, err)
				}
				errMu.Unlock()
			}})
		if err != nil {
			return err
		}
		arts, err := kura.NewKeyed[int64, corpus.Article](c, kura.KeyedOptions[int64]{Prefix: "demo:" + nc.name + ":article:"})
		if err != nil {
			return err
		}
		loadMany := func(ctx context.Context, ids []int64) (map[int64]corpus.Article, error) {
			return env.articlesByID(ctx, &db, ids)
		}
		fmt.Fprintf(env.progress, "  %s: filling %d articles from PostgreSQL through FetchMany ...\n", nc.name, len(ids))
		for i := 0; i < len(ids); i += 50 {
			got, err := arts.FetchMany(ctx, ids[i:min(i+50, len(ids))], loadMany)
			if err != nil {
				return err
			}
			if nc.name == "json" && i == 0 {
				for _, a := range got {
					b, _ := json.Marshal(&a)
					jsonBytes += float64(len(b)) / float64(len(got))
				}
			}
		}
		filled := c.Stats()
		if filled.StoreErrors > 0 || filled.BudgetSkips > 0 {
			return fmt.Errorf("%s: %d store errors and %d skipped write-backs while filling the cache (first: %v)",
				nc.name, filled.StoreErrors, filled.BudgetSkips, firstErr)
		}
		fillQ, fillRows := db.snapshot()
		row := codecRow{name: nc.name, kura: nc.kura, fillRows: fillRows, fillQueries: uint64(fillQ),
			storedBytes: float64(filled.BytesWritten) / float64(len(ids))}

		load := func(ctx context.Context, id int64) (corpus.Article, error) {
			m, err := env.articlesByID(ctx, &db, []int64{id})
			if err != nil {
				return corpus.Article{}, err
			}
			a, ok := m[id]
			if !ok {
				return a, kura.ErrNotFound
			}
			return a, nil
		}
		hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
		var mu sync.Mutex
		var next atomic.Int64
		var readErr error
		before, err := wire()
		if err != nil {
			return err
		}
		fmt.Fprintf(env.progress, "  %s: %d Fetches with %d goroutines ...\n", nc.name, size.Reads, size.Concurrency)
		start := time.Now()
		var wg sync.WaitGroup
		for g := range size.Concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(env.cfg.Seed), uint64(g)))
				local := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
				for next.Add(1) <= int64(size.Reads) {
					id := ids[rng.IntN(len(ids))]
					t0 := time.Now()
					if _, err := arts.Fetch(ctx, id, load); err != nil {
						mu.Lock()
						readErr = err
						mu.Unlock()
						return
					}
					_ = local.RecordValue(time.Since(t0).Microseconds())
				}
				mu.Lock()
				hist.Merge(local)
				mu.Unlock()
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		if readErr != nil {
			return readErr
		}
		after, err := wire()
		if err != nil {
			return err
		}
		_, allRows := db.snapshot()
		row.readRows = allRows - fillRows
		row.readHit = c.Stats().Hits - filled.Hits
		row.wireBytes = after - before
		row.opsPerSec = float64(size.Reads) / elapsed.Seconds()
		row.p50 = time.Duration(hist.ValueAtQuantile(50)) * time.Microsecond
		row.p99 = time.Duration(hist.ValueAtQuantile(99)) * time.Microsecond
		rows = append(rows, row)
		if err := arts.Cache().DeleteMany(ctx, keysOf(arts, ids)); err != nil {
			return err
		}
		// Leave the next codec a clean heap rather than this one's garbage.
		runtime.GC()
	}

	by := map[string]codecRow{}
	for _, r := range rows {
		by[r.name] = r
	}
	gob := by["gob"]
	t := Table{Columns: []string{"codec", "bytes/value", "vs gob", "wire bytes", "vs gob", "Fetch/s", "p50", "p99", "DB rows (fill / reads)"}}
	bytesChart := Chart{Title: "Bytes the server sent for the same Fetches", Unit: "bytes"}
	sizeChart := Chart{Title: "Stored size of one article", Unit: "bytes"}
	rateChart := Chart{Title: "Fetch throughput (hits)", Unit: "Fetch/s"}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r.name, fmt.Sprintf("%.0f", r.storedBytes), ratio(r.storedBytes, gob.storedBytes),
			human(r.wireBytes), ratio(float64(r.wireBytes), float64(gob.wireBytes)), fmt.Sprintf("%.0f", r.opsPerSec),
			round(r.p50), round(r.p99), fmt.Sprintf("%d / %d", r.fillRows, r.readRows)})
		res.count(r.name+".wire_bytes", r.wireBytes)
		res.count(r.name+".read_db_rows", r.readRows)
		res.count(r.name+".fill_db_rows", r.fillRows)
		res.count(r.name+".hits", int64(r.readHit))
		bytesChart.Bars = append(bytesChart.Bars, Bar{Label: r.name, Value: float64(r.wireBytes), Kura: r.kura})
		sizeChart.Bars = append(sizeChart.Bars, Bar{Label: r.name, Value: r.storedBytes, Kura: r.kura})
		rateChart.Bars = append(rateChart.Bars, Bar{Label: r.name, Value: r.opsPerSec, Kura: r.kura})
	}
	res.Tables = append(res.Tables, t)
	res.Charts = append(res.Charts, bytesChart, sizeChart, rateChart)
	def, dict := by["kura default"], by[compactS2Dict]
	res.Headline = fmt.Sprintf("Redis sent %s for gob, %s with kura's default (%s), %s with the compact envelope and a trained S2 dictionary (%s)",
		human(gob.wireBytes), human(def.wireBytes), ratio(float64(def.wireBytes), float64(gob.wireBytes)),
		human(dict.wireBytes), ratio(float64(dict.wireBytes), float64(gob.wireBytes)))
	for _, k := range []string{"kura default", compactS2Dict, "kura zstd + dictionary"} {
		res.Checks = append(res.Checks,
			Check{What: "bytes the server sent, gob vs " + k, Before: gob.wireBytes, After: by[k].wireBytes, Want: "less"})
	}
	res.Checks = append(res.Checks,
		Check{What: "database rows read during the cached reads (gob vs kura default)", Before: gob.readRows, After: by["kura default"].readRows, Want: "equal"})
	res.note("%d articles in PostgreSQL (mean %.0f B as JSON); each codec fills its own keys through FetchMany (one query per 50 misses), then %d Fetches with %d goroutines read them back; every read is a hit.",
		len(ids), jsonBytes, size.Reads, size.Concurrency)
	res.note("wire bytes: the redis-server's own total_net_output_bytes counter before and after the reads of each codec.")
	res.note("Dictionaries are trained (in %v) on %d articles generated with another seed, so the articles read were never seen in training.", trainTime.Round(time.Millisecond), size.DictSamples)
	res.note("In production, a Go service saw 14,602 B JSON -> 7,789 B msgpack+snappy (0.53x) and Redis network bytes fall to about 1/3.")
	res.Commands = append(res.Commands, "kura demo --only bytes",
		"go test -run '^$' -bench 'Fetch' -benchmem .   # the codec benchmarks, side by side",
		"kura codecs --url redis://HOST:PORT --prefix article: --html codecs.html   # every codec on your own values")
	return nil
}

func keysOf(k *kura.Keyed[int64, corpus.Article], ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = k.Key(id)
	}
	return out
}

func demoCodecs() ([]namedCodec, error) {
	js, err := codec.New(codec.Options{Serializer: codec.JSON(), Compressor: codec.None()})
	if err != nil {
		return nil, err
	}
	gb, err := codec.New(codec.Options{Serializer: gobSerializer{}, Compressor: codec.None()})
	if err != nil {
		return nil, err
	}
	mp, err := codec.New(codec.Options{Compressor: codec.None()})
	if err != nil {
		return nil, err
	}
	// The field report's code: msgpack, then golang/snappy on every value.
	snap, err := codec.New(codec.Options{Compressor: goSnappy{}, MinCompressSize: -1, MinSavings: -1})
	if err != nil {
		return nil, err
	}
	def, err := codec.New(codec.Options{})
	if err != nil {
		return nil, err
	}
	return []namedCodec{{"json", js, false}, {"gob", gb, false}, {"msgpack", mp, false},
		{"msgpack+snappy", snap, false}, {"kura default", def, true}}, nil
}
