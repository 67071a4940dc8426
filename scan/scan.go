// Package scan walks a live Redis, Redis Cluster or memcached pool without
// hurting it and reports where the bytes go: the biggest keys, the size
// distribution, statistics per key pattern (detected automatically), what
// kura's codecs would save per pattern (estimated from a sample of
// values), and the values big enough to cost time on the network. It is
// the library behind `kura scan`; the report's JSON form (schema
// "kura.scan/v1") is documented in docs/scan.md and read by `kura ui`.
//
// The walk is Redis SCAN with COUNT on every master, or memcached's
// `lru_crawler metadump hash` plus `mg` without values, paced by a per-server
// command rate limit. Memory stays bounded whatever the key count: keys
// are not kept, only counters, reservoirs of sampled keys and the top
// keys.
package scan

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/internal/redact"
	"github.com/kuracache/kura/store"
)

// Schema is the value of Report.Schema.
const Schema = "kura.scan/v1"

// Defaults for the zero Options.
const (
	DefaultCount     = 500
	DefaultRate      = 10000
	DefaultSamples   = 200
	DefaultBig       = 100_000
	DefaultBandwidth = 1e9
	DefaultTop       = 20
	// MaxBigValues bounds Report.BigValues.Keys (Count keeps counting).
	MaxBigValues = 1000
)

// ErrUnsupportedStore is matched by Run's error for a store it cannot walk
// (only Redis, Redis Cluster and memcached can be scanned).
var ErrUnsupportedStore = errors.New("kura: scan needs a Redis, Redis Cluster, sharded Redis (redis+ring://) or memcached store")

// Options configures Run. The zero value works.
type Options struct {
	// Target is the store URL shown in the report; it is redacted (a
	// password never reaches the report).
	Target string
	// Count is the COUNT hint of each Redis SCAN and the batch size of
	// memcached mg pipelines. If zero, DefaultCount (500).
	Count int
	// Rate caps the commands sent to each server per second. If zero,
	// DefaultRate (10,000); negative means no limit.
	Rate int
	// Samples is the number of values read per pattern to estimate
	// compression savings. If zero, DefaultSamples (200); negative reads
	// every value (exact, but memory then grows with the key count).
	Samples int
	// Separator splits keys into parts for pattern detection. If empty,
	// the first of ":", "/", "|", "." found in each key.
	Separator string
	// Big is the value size, in bytes, from which a value is called out.
	// If zero, DefaultBig (100 KB, the advice of the memcached and Redis
	// communities).
	Big int64
	// Bandwidth is the link speed, in bits per second, at which the cost
	// of reading a big value is given. If zero, DefaultBandwidth (1 Gbit/s).
	Bandwidth float64
	// Top is the number of biggest keys reported. If zero, DefaultTop (20).
	Top int
	// Seed makes the sampling reproducible. If zero, a fixed seed (the
	// same server content gives the same estimate).
	Seed uint64
	// Progress, if not nil, is called about every ProgressEvery during the
	// walk and once at its end, from a goroutine of its own.
	Progress func(Progress)
	// ProgressEvery is the progress period. If zero, 500 ms.
	ProgressEvery time.Duration
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Count < 0:
		return o, fmt.Errorf("scan: Options.Count is negative (%d)", o.Count)
	case o.Big < 0:
		return o, fmt.Errorf("scan: Options.Big is negative (%d)", o.Big)
	case o.Bandwidth < 0:
		return o, fmt.Errorf("scan: Options.Bandwidth is negative (%v)", o.Bandwidth)
	case o.Top < 0:
		return o, fmt.Errorf("scan: Options.Top is negative (%d)", o.Top)
	}
	if o.Count == 0 {
		o.Count = DefaultCount
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Samples == 0 {
		o.Samples = DefaultSamples
	}
	if o.Big == 0 {
		o.Big = DefaultBig
	}
	if o.Bandwidth == 0 {
		o.Bandwidth = DefaultBandwidth
	}
	if o.Top == 0 {
		o.Top = DefaultTop
	}
	if o.Seed == 0 {
		o.Seed = 0x6b757261 // "kura"
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 500 * time.Millisecond
	}
	return o, nil
}

// Progress is a snapshot of a running scan.
type Progress struct {
	// Phase is "walk" while keys are listed, "sample" while sampled values
	// are read, "done" at the end.
	Phase string
	// Keys is the number of keys seen so far; Servers and ServersDone the
	// servers walked.
	Keys        int64
	Servers     int
	ServersDone int
	Elapsed     time.Duration
}

// Report is the result of a scan; its JSON form is schema kura.scan/v1
// (docs/scan.md).
type Report struct {
	Schema         string           `json:"schema"`
	Target         string           `json:"target"`
	Kind           string           `json:"kind"`
	Started        time.Time        `json:"started"`
	ElapsedSeconds float64          `json:"elapsed_seconds"`
	Complete       bool             `json:"complete"`
	Options        ReportOptions    `json:"options"`
	Servers        []ServerReport   `json:"servers"`
	Keys           int64            `json:"keys"`
	ValueBytes     int64            `json:"value_bytes"`
	MemoryBytes    int64            `json:"memory_bytes"`
	Types          map[string]int64 `json:"types"`
	Biggest        []KeyInfo        `json:"biggest"`
	Histogram      []Bucket         `json:"histogram"`
	Patterns       []Pattern        `json:"patterns"`
	BigValues      BigValues        `json:"big_values"`
	Errors         []string         `json:"errors"`
}

// ReportOptions are the options the scan ran with.
type ReportOptions struct {
	Count         int     `json:"count"`
	Rate          int     `json:"rate"`
	Samples       int     `json:"samples"`
	Separator     string  `json:"separator"`
	BigBytes      int64   `json:"big_bytes"`
	BandwidthBits float64 `json:"bandwidth_bits"`
	Top           int     `json:"top"`
}

// ServerReport is one Redis master or memcached server.
type ServerReport struct {
	Addr     string `json:"addr"`
	Keys     int64  `json:"keys"`
	Commands int64  `json:"commands"`
	Error    string `json:"error"`
}

// KeyInfo describes one key.
type KeyInfo struct {
	Key  string `json:"key"`
	Type string `json:"type"`
	// TTLSeconds is the time left, -1 for a key without expiry.
	TTLSeconds float64 `json:"ttl_seconds"`
	// Length is the string length or the collection's element count.
	Length int64 `json:"length"`
	// ValueBytes is the string length; for collections MEMORY USAGE.
	ValueBytes  int64  `json:"value_bytes"`
	MemoryBytes int64  `json:"memory_bytes"`
	Node        string `json:"node"`
	Pattern     string `json:"pattern"`
}

// Bucket is one bar of the size histogram: keys whose value bytes are at
// most LE (and above the previous bucket's LE); LE -1 is unbounded.
type Bucket struct {
	LE         int64 `json:"le"`
	Keys       int64 `json:"keys"`
	ValueBytes int64 `json:"value_bytes"`
}

// Pattern is the statistics of one key pattern.
type Pattern struct {
	Pattern     string           `json:"pattern"`
	Keys        int64            `json:"keys"`
	ValueBytes  int64            `json:"value_bytes"`
	MeanBytes   float64          `json:"mean_bytes"`
	MemoryBytes int64            `json:"memory_bytes"`
	MemoryShare float64          `json:"memory_share"`
	TTL         TTLSpread        `json:"ttl"`
	Types       map[string]int64 `json:"types"`
	Savings     *Savings         `json:"savings,omitempty"`
}

// TTLSpread is the range of TTLs over the keys that have one, and the
// count of keys without.
type TTLSpread struct {
	MinSeconds float64 `json:"min_seconds"`
	MaxSeconds float64 `json:"max_seconds"`
	NoTTL      int64   `json:"no_ttl"`
}

// Savings estimates what kura's codecs would store for a pattern.
type Savings struct {
	Sampled          int        `json:"sampled"`
	SampledBytes     int64      `json:"sampled_bytes"`
	KuraValues       int        `json:"kura_values"`
	CompressedValues int        `json:"compressed_values"`
	Estimates        []Estimate `json:"estimates"`
}

// Estimate is the estimated result of one compressor over a pattern.
type Estimate struct {
	Codec         string  `json:"codec"`
	StoredBytes   int64   `json:"stored_bytes"`
	SavedBytes    int64   `json:"saved_bytes"`
	SavedFraction float64 `json:"saved_fraction"`
}

// BigValues are the values of at least ThresholdBytes.
type BigValues struct {
	ThresholdBytes int64    `json:"threshold_bytes"`
	BandwidthBits  float64  `json:"bandwidth_bits"`
	Count          int64    `json:"count"`
	Keys           []BigKey `json:"keys"`
}

// BigKey is one big value and what one read of it costs.
type BigKey struct {
	Key            string  `json:"key"`
	ValueBytes     int64   `json:"value_bytes"`
	ReadSeconds    float64 `json:"read_seconds"`
	ReadsPerSecond float64 `json:"reads_per_second"`
	Node           string  `json:"node"`
}

// walker walks one server: the store's NodeWalker, paced.
type walker struct {
	n    store.NodeWalker
	opts Options
	pace *pacer
}

func (w walker) addr() string    { return w.n.Addr() }
func (w walker) commands() int64 { return w.pace.count.Load() }
func (w walker) close()          { _ = w.n.Close() }

func (w walker) walk(ctx context.Context, add func(KeyInfo)) error {
	err := w.n.Walk(ctx, store.WalkOptions{Count: w.opts.Count, Pace: w.pace.wait}, func(k store.KeyInfo) error {
		add(KeyInfo{Key: k.Key, Type: k.Type, TTLSeconds: k.TTLSeconds, Length: k.Length,
			ValueBytes: k.ValueBytes, MemoryBytes: k.MemoryBytes, Node: k.Node})
		return nil
	})
	return nodeCause(err)
}

// fetch reads the values of keys (nil for a key gone since).
func (w walker) fetch(ctx context.Context, keys []string) ([][]byte, error) {
	if err := w.pace.wait(ctx, len(keys)); err != nil {
		return nil, err
	}
	vals, err := w.n.Read(ctx, keys)
	return vals, nodeCause(err)
}

// nodeCause drops the node's address from err: the report names the
// server beside it.
func nodeCause(err error) error {
	if ne := store.AsNodeError(err); ne != nil {
		return ne.Err
	}
	return err
}

// Run scans the server(s) behind st, a store that can list its keys
// (store.KeyWalker: Redis, Redis Cluster, sharded Redis, memcached, and
// the wrappers that let the capability through). A server that fails
// midway is reported in Report.Errors and Complete is false; the error
// returned is for a scan that could not start, or a cancelled ctx (the
// partial report is returned with it).
func Run(ctx context.Context, st store.Store, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	kw, ok := store.Find[store.KeyWalker](st)
	if !ok {
		return nil, fmt.Errorf("%w (got %T)", ErrUnsupportedStore, st)
	}
	kind, nodes, err := kw.WalkNodes(ctx)
	if errors.Is(err, store.ErrCannotWalk) {
		return nil, fmt.Errorf("%w (%v)", ErrUnsupportedStore, err)
	}
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	walkers := make([]walker, len(nodes))
	for i, n := range nodes {
		walkers[i] = walker{n: n, opts: opts, pace: newPacer(opts.Rate)}
	}
	defer func() {
		for _, w := range walkers {
			w.close()
		}
	}()
	start := time.Now()
	a := newAggregator(opts, kind)
	var (
		keys     atomic.Int64
		done     atomic.Int64
		phase    atomic.Value
		stopProg = make(chan struct{})
		progWG   sync.WaitGroup
	)
	phase.Store("walk")
	snapshot := func() Progress {
		return Progress{Phase: phase.Load().(string), Keys: keys.Load(), Servers: len(walkers), ServersDone: int(done.Load()), Elapsed: time.Since(start)}
	}
	if opts.Progress != nil {
		progWG.Go(func() {
			t := time.NewTicker(opts.ProgressEvery)
			defer t.Stop()
			for {
				select {
				case <-stopProg:
					return
				case <-t.C:
					opts.Progress(snapshot())
				}
			}
		})
	}
	errs := make([]error, len(walkers))
	serverKeys := make([]int64, len(walkers))
	var wg sync.WaitGroup
	for i, w := range walkers {
		wg.Go(func() {
			errs[i] = w.walk(ctx, func(k KeyInfo) {
				keys.Add(1)
				serverKeys[i]++
				a.add(k, i)
			})
			done.Add(1)
		})
	}
	wg.Wait()
	phase.Store("sample")
	if ctx.Err() == nil {
		a.sample(ctx, walkers)
	}
	phase.Store("done")
	close(stopProg)
	progWG.Wait()
	if opts.Progress != nil {
		opts.Progress(snapshot())
	}
	r := a.report()
	r.Target = redact.URL(opts.Target)
	r.Started = start.UTC()
	r.ElapsedSeconds = time.Since(start).Seconds()
	r.Complete = ctx.Err() == nil
	for i, w := range walkers {
		sr := ServerReport{Addr: w.addr(), Keys: serverKeys[i], Commands: w.commands()}
		if errs[i] != nil {
			sr.Error = errs[i].Error()
			r.Errors = append(r.Errors, w.addr()+": "+sr.Error)
			r.Complete = false
		}
		r.Servers = append(r.Servers, sr)
	}
	r.Errors = append(r.Errors, a.errors...)
	sort.Slice(r.Servers, func(i, j int) bool { return r.Servers[i].Addr < r.Servers[j].Addr })
	if err := ctx.Err(); err != nil {
		return r, err
	}
	return r, nil
}
