// Package demo replays the field reports behind kura on this machine. It
// backs `kura demo`; the command is a thin shell over Run.
//
// Seed 000: a Go service with about a million articles behind Redis
// swapped Gob for msgpack+snappy and saw value size halve and Redis network
// bytes fall to a third. Run generates realistic articles, reads them
// through a kura Cache with seven codecs side by side (JSON, encoding/gob,
// msgpack, the seed's msgpack+snappy, kura's default, kura with a trained
// S2 or zstd dictionary) and measures what each
// stores, what each puts on the wire, and how fast Fetch is with each.
package demo

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/golang/snappy"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/corpus"
	"github.com/kuracache/kura/internal/servers"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/redisstore"
)

// Config configures Run. The zero value runs the default demo.
type Config struct {
	// RedisURL is the Redis to use. If blank, Run starts a private
	// redis-server from PATH, or falls back to the in-process store when
	// none is installed.
	RedisURL string
	// InMemory forces the in-process store.
	InMemory bool
	// Records is the number of articles; 0 means 1000.
	Records int
	// Reads is the number of Fetches per codec; 0 means 20000.
	Reads int
	// Concurrency is the number of reading goroutines; 0 means 16.
	Concurrency int
	// Seed makes the articles and the read order reproducible; 0 means 1.
	Seed int64
	// Progress receives progress lines (nil discards them).
	Progress io.Writer
}

// CodecResult is one row of the demo's table.
type CodecResult struct {
	Codec string
	// StoredBytes is the mean encoded size of one article.
	StoredBytes float64
	// WireBytes is what the server sent for the reads (its own
	// total_net_output_bytes counter when the store is Redis; the value
	// bytes read otherwise).
	WireBytes int64
	// WireFromServer tells whether WireBytes came from the server's counter.
	WireFromServer bool
	Reads          int
	OpsPerSec      float64
	P50, P99       time.Duration
	Hits           uint64
}

// Result is what Run measured.
type Result struct {
	// Store says which store the demo used, in words.
	Store   string
	Records int
	// JSONBytes is the mean size of an article as plain encoding/json.
	JSONBytes float64
	Codecs    []CodecResult
}

type namedCodec struct {
	name  string
	codec *codec.Codec
}

// Run performs the demo and returns its measurements.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Records == 0 {
		cfg.Records = 1000
	}
	if cfg.Reads == 0 {
		cfg.Reads = 20000
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 16
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Records < 0 || cfg.Reads < 0 || cfg.Concurrency < 0 {
		return nil, errors.New("demo: records, reads and concurrency must be positive")
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}

	st, desc, wire, cleanup, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(progress, "store: %s\n", desc)

	fmt.Fprintf(progress, "generating %d articles ...\n", cfg.Records)
	articles := corpus.Articles(cfg.Seed, cfg.Records)
	res := &Result{Store: desc, Records: cfg.Records}
	var jsonTotal int
	for i := range articles {
		b, err := json.Marshal(&articles[i])
		if err != nil {
			return nil, err
		}
		jsonTotal += len(b)
	}
	res.JSONBytes = float64(jsonTotal) / float64(len(articles))

	codecs, err := demoCodecs()
	if err != nil {
		return nil, err
	}
	for _, nc := range codecs {
		fmt.Fprintf(progress, "%s: filling %d articles through FetchMany ...\n", nc.name, cfg.Records)
		r, err := runCodec(ctx, st, wire, nc, articles, cfg, progress)
		if err != nil {
			return nil, fmt.Errorf("demo %s: %w", nc.name, err)
		}
		res.Codecs = append(res.Codecs, *r)
	}
	return res, nil
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
	// The seed's code: msgpack, then golang/snappy on every value.
	snap, err := codec.New(codec.Options{Compressor: goSnappy{}, MinCompressSize: -1, MinSavings: -1})
	if err != nil {
		return nil, err
	}
	def, err := codec.New(codec.Options{})
	if err != nil {
		return nil, err
	}
	// Dictionaries trained on other articles (another seed: yesterday's
	// values), as `kura codecs` would train them, with S2 and zstd.
	var samples [][]byte
	for _, a := range corpus.Articles(977, 64) {
		b, err := codec.MsgPack().Marshal(nil, a)
		if err != nil {
			return nil, err
		}
		samples = append(samples, b)
	}
	s2d, _, err := codec.TrainS2Dictionary(samples, 32<<10)
	if err != nil {
		return nil, err
	}
	s2dict, err := codec.New(codec.Options{})
	if err != nil {
		return nil, err
	}
	if _, err := s2dict.SetDictionary(s2d); err != nil {
		return nil, err
	}
	zd, _, err := codec.TrainContentDictionary(samples, 32<<10)
	if err != nil {
		return nil, err
	}
	zdict, err := codec.New(codec.Options{Compressor: codec.Zstd(1)})
	if err != nil {
		return nil, err
	}
	if _, err := zdict.SetDictionary(zd); err != nil {
		return nil, err
	}
	return []namedCodec{{"json", js}, {"gob", gb}, {"msgpack", mp}, {"msgpack+snappy", snap}, {"kura default", def},
		{"kura s2+dictionary", s2dict}, {"kura zstd+dictionary", zdict}}, nil
}

// openStore picks the store: the URL given, a private redis-server, or
// memory. wire returns the server's sent-bytes counter, when it has one.
func openStore(ctx context.Context, cfg Config) (store.Store, string, func() (int64, bool), func(), error) {
	noWire := func() (int64, bool) { return 0, false }
	memory := func(why string) (store.Store, string, func() (int64, bool), func(), error) {
		s, err := memstore.New(memstore.Options{MaxBytes: 1 << 30})
		if err != nil {
			return nil, "", nil, nil, err
		}
		return s, "in-process store: " + why, noWire, func() { s.Close() }, nil
	}
	if cfg.InMemory {
		return memory("asked for with --memory")
	}
	url := cfg.RedisURL
	var proc *servers.Redis
	if url == "" {
		r, err := servers.StartRedis(ctx, servers.RedisConfig{})
		if errors.Is(err, servers.ErrNotInstalled) {
			return memory("no --redis URL was given and redis-server is not installed (apt-get install redis-server)")
		}
		if err != nil {
			return nil, "", nil, nil, err
		}
		proc, url = r, r.URL()
	}
	s, err := redisstore.NewFromURL(ctx, url, redisstore.Options{})
	if err != nil {
		if proc != nil {
			proc.Stop()
			return nil, "", nil, nil, err
		}
		return nil, "", nil, nil, fmt.Errorf("%w (start that server, fix --redis, or leave --redis out and the demo starts its own)", err)
	}
	desc := "Redis at " + url + " (given with --redis)"
	var addr, password string
	if proc != nil {
		desc = "private redis-server " + proc.Addr + " started for this demo (stopped at the end)"
		addr, password = proc.Addr, proc.Password
	}
	wire := func() (int64, bool) {
		if addr == "" {
			return 0, false
		}
		info, err := servers.RedisDo(ctx, addr, password, "INFO", "stats")
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseInt(servers.ParseInfo(info)["total_net_output_bytes"], 10, 64)
		return n, err == nil
	}
	cleanup := func() {
		s.Close()
		if proc != nil {
			proc.Stop()
		}
	}
	return s, desc, wire, cleanup, nil
}

func runCodec(ctx context.Context, st store.Store, wire func() (int64, bool), nc namedCodec,
	articles []corpus.Article, cfg Config, progress io.Writer) (*CodecResult, error) {
	c, err := kura.New[corpus.Article](st, kura.Options{Name: nc.name, Codec: nc.codec,
		MaxValueSize: -1, WarnValueSize: -1})
	if err != nil {
		return nil, err
	}
	prefix := "demo:" + nc.name + ":article:"
	key := func(i int) string { return prefix + strconv.Itoa(i) }
	byKey := make(map[string]*corpus.Article, len(articles))
	keys := make([]string, len(articles))
	for i := range articles {
		keys[i] = key(i)
		byKey[keys[i]] = &articles[i]
	}
	// The database: a map lookup, so the demo measures the cache.
	loadMany := func(_ context.Context, missing []string) (map[string]corpus.Article, error) {
		out := make(map[string]corpus.Article, len(missing))
		for _, k := range missing {
			out[k] = *byKey[k]
		}
		return out, nil
	}
	if err := c.DeleteMany(ctx, keys); err != nil {
		return nil, err
	}
	for i := 0; i < len(keys); i += 100 {
		end := min(i+100, len(keys))
		if _, err := c.FetchMany(ctx, keys[i:end], time.Hour, loadMany); err != nil {
			return nil, err
		}
	}
	filled := c.Stats()
	if filled.StoreErrors > 0 {
		return nil, fmt.Errorf("%d store errors while filling the cache", filled.StoreErrors)
	}
	r := &CodecResult{Codec: nc.name, Reads: cfg.Reads,
		StoredBytes: float64(filled.BytesWritten) / float64(len(articles))}

	load := func(_ context.Context, k string) (corpus.Article, error) { return *byKey[k], nil }
	hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
	var mu sync.Mutex
	var next atomic.Int64
	var readErr error
	wireBefore, okBefore := wire()
	fmt.Fprintf(progress, "%s: %d Fetches with %d goroutines ...\n", nc.name, cfg.Reads, cfg.Concurrency)
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < cfg.Concurrency; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(g)))
			local := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
			for next.Add(1) <= int64(cfg.Reads) {
				k := keys[rng.IntN(len(keys))]
				t0 := time.Now()
				if _, err := c.Fetch(ctx, k, time.Hour, load); err != nil {
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
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if readErr != nil {
		return nil, readErr
	}
	after := c.Stats()
	r.OpsPerSec = float64(cfg.Reads) / elapsed.Seconds()
	r.P50 = time.Duration(hist.ValueAtQuantile(50)) * time.Microsecond
	r.P99 = time.Duration(hist.ValueAtQuantile(99)) * time.Microsecond
	r.Hits = after.Hits - filled.Hits
	if wireAfter, okAfter := wire(); okBefore && okAfter {
		r.WireBytes, r.WireFromServer = wireAfter-wireBefore, true
	} else {
		r.WireBytes = int64(after.BytesRead - filled.BytesRead)
	}
	// Leave the next codec a clean heap rather than this one's garbage.
	runtime.GC()
	return r, nil
}

// gobSerializer is encoding/gob as the seed's service used it: a fresh
// Encoder per value, so every value carries its type description.
type gobSerializer struct{}

func (gobSerializer) ID() byte     { return 200 }
func (gobSerializer) Name() string { return "gob" }
func (gobSerializer) Marshal(dst []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	err := gob.NewEncoder(buf).Encode(v)
	return buf.Bytes(), err
}
func (gobSerializer) Unmarshal(data []byte, v any) error {
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}

// goSnappy is github.com/golang/snappy as the seed's service called it,
// plugged in as a user compressor so its row is the seed's own code.
type goSnappy struct{}

func (goSnappy) ID() byte     { return 201 }
func (goSnappy) Name() string { return "golang/snappy" }
func (goSnappy) Compress(dst, src []byte) ([]byte, error) {
	return append(dst, snappy.Encode(nil, src)...), nil
}
func (goSnappy) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n != rawLen {
		return nil, fmt.Errorf("snappy: decoded length %d, header says %d", n, rawLen)
	}
	out, err := snappy.Decode(nil, src)
	return append(dst, out...), err
}
