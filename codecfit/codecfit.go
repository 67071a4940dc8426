// Package codecfit measures which codec and compression dictionary fit a
// set of cached values: for every candidate (no compression, S2, zstd at a
// few levels, zstd with dictionaries of a few sizes trained on part of the
// values, and S2 with and without a dictionary in the compact envelope,
// named with CompactPrefix) it measures, on values held out from training, the bytes stored
// and the CPU to encode and decode, next to msgpack+snappy (what Go services commonly write) and
// to JSON, and recommends one with its reason. `kura codecs` is the
// command-line face of this package; its reports (text, JSON, HTML with
// the Pareto chart) are in report.go.
//
// Values come in as documents (JSON, or any bytes) from files, a
// directory, stdin or a live server (see Load and SampleStore).
package codecfit

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang/snappy"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kuracache/kura/codec"
)

// Value is one sample: a decoded Go value (what a Cache would be given)
// and the size of its JSON form (the baseline every ratio is against).
type Value struct {
	V         any
	JSONBytes int
}

// Options configures Analyze. The zero value works.
type Options struct {
	// DictSizes are the dictionary sizes tried, in bytes. If nil,
	// 4 KiB, 16 KiB and 64 KiB; sizes above half the training bytes are
	// skipped (a dictionary larger than its samples learns nothing more).
	DictSizes []int
	// TrainFraction is the share of values the dictionaries are trained
	// on; the rest are measured. If 0, 0.5.
	TrainFraction float64
	// MinTime is how long each candidate's encode and decode loops run
	// at least (each runs over all test values at least once). If 0,
	// 200 ms.
	MinTime time.Duration
	// Seed orders the values before the train/test split. If 0, a fixed
	// seed: the same values give the same split.
	Seed uint64
	// Progress, if not nil, is told what is being done.
	Progress func(msg string)
}

// Candidate results.
type Result struct {
	// Name identifies the candidate ("s2", "zstd-3+dict-16KiB",
	// "msgpack+snappy").
	Name string `json:"name"`
	// Reference is true for msgpack+snappy (the common Go cache codec) and JSON,
	// measured for comparison and never recommended.
	Reference bool `json:"reference"`
	// Go is how to configure a kura Codec for it ("" for references).
	Go string `json:"go"`
	// DictSize is the dictionary's size in bytes (0: none); DictID its
	// content id.
	DictSize int    `json:"dict_size"`
	DictID   uint32 `json:"dict_id"`

	// Bytes is the total stored size of the test values; P50, P90 and
	// P99 are per-value percentiles.
	Bytes         int64 `json:"bytes"`
	P50, P90, P99 int   `json:"-"`
	// Per-value percentiles for JSON output.
	Percentiles map[string]int `json:"per_value_bytes"`
	// VsJSON and VsSeed are Bytes over the JSON bytes and over
	// msgpack+snappy's bytes.
	VsJSON float64 `json:"vs_json"`
	VsSeed float64 `json:"vs_msgpack_snappy"`

	// EncodeNs and DecodeNs are the mean CPU time per value; EncodeMBs
	// and DecodeMBs the throughput in JSON-equivalent MB/s (so rows
	// compare directly); EncodeAllocs and DecodeAllocs allocations per
	// value.
	EncodeNs     float64 `json:"encode_ns_per_value"`
	DecodeNs     float64 `json:"decode_ns_per_value"`
	EncodeMBs    float64 `json:"encode_mb_s"`
	DecodeMBs    float64 `json:"decode_mb_s"`
	EncodeAllocs float64 `json:"encode_allocs_per_value"`
	DecodeAllocs float64 `json:"decode_allocs_per_value"`

	// NetPer1000Reads is the value bytes 1,000 reads move at the mean
	// value size; MemoryPerMillion the value bytes a million such values
	// hold on the servers (before the servers' per-key overhead).
	NetPer1000Reads  int64 `json:"network_bytes_per_1000_reads"`
	MemoryPerMillion int64 `json:"memory_bytes_per_million_values"`

	// Pareto is true when no other candidate is both smaller and cheaper
	// (encode + decode CPU).
	Pareto bool `json:"pareto"`
}

// Report is the outcome of Analyze.
type Report struct {
	Values      int   `json:"values"`
	TrainValues int   `json:"train_values"`
	TestValues  int   `json:"test_values"`
	JSONBytes   int64 `json:"json_bytes"`
	// RawP50 is the median serialized (msgpack) size of a test value.
	RawP50  int      `json:"raw_p50"`
	Results []Result `json:"results"`
	// Recommended is the name of the recommended candidate; Reason says
	// why, in a sentence a person reads.
	Recommended string `json:"recommended"`
	Reason      string `json:"reason"`
	// Machine names what the timings were taken on.
	Machine string `json:"machine"`

	dicts map[string][]byte
}

// Dictionary returns the trained dictionary of candidate name (nil when it
// has none): the one to write to a file or publish.
func (r *Report) Dictionary(name string) []byte { return r.dicts[name] }

// Result returns the result of candidate name.
func (r *Report) Result(name string) (Result, bool) {
	for _, x := range r.Results {
		if x.Name == name {
			return x, true
		}
	}
	return Result{}, false
}

// ErrTooFewValues is returned for fewer values than a split needs.
var ErrTooFewValues = errors.New("kura: codecfit: need at least 4 values (half to train dictionaries, half to measure)")

// Thresholds of the recommendation (see recommend).
const (
	// MinSavings is the share of bytes compression must save over no
	// compression to be worth its CPU (as codec.DefaultMinSavings).
	MinSavings = 0.10
	// DictGain is the share of bytes a dictionary must save over the
	// best candidate without one to be worth training, shipping and
	// rotating it.
	DictGain = 0.10
	// TinyValue is the median serialized size below which nothing pays
	// for its header.
	TinyValue = 32
)

// CompactPrefix starts the name of a candidate that writes the compact
// envelope (codec.Options.Compact, kura.New's default): the
// same bytes of payload with a smaller header ("s2-compact",
// "s2-compact+dict-16KiB").
const CompactPrefix = "s2-compact"

type candidate struct {
	name, goCfg string
	opts        codec.Options
	dictSize    int
	reference   bool
	encode      func(dst []byte, v any) ([]byte, error)
	decode      func(b []byte) error
}

// Analyze measures every candidate on values and recommends one.
func Analyze(values []Value, opts Options) (*Report, error) {
	if len(values) < 4 {
		return nil, ErrTooFewValues
	}
	if opts.TrainFraction == 0 {
		opts.TrainFraction = 0.5
	}
	if opts.TrainFraction <= 0 || opts.TrainFraction >= 1 {
		return nil, fmt.Errorf("kura: codecfit: TrainFraction %v: want a fraction between 0 and 1", opts.TrainFraction)
	}
	if opts.DictSizes == nil {
		opts.DictSizes = []int{4 << 10, 16 << 10, 64 << 10}
	}
	if opts.MinTime == 0 {
		opts.MinTime = 200 * time.Millisecond
	}
	if opts.Seed == 0 {
		opts.Seed = 0x6b757261
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf(format, args...))
		}
	}

	vals := slices.Clone(values)
	r := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	r.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
	nTrain := max(1, min(len(vals)-1, int(math.Round(float64(len(vals))*opts.TrainFraction))))
	train, test := vals[:nTrain], vals[nTrain:]

	rep := &Report{Values: len(vals), TrainValues: len(train), TestValues: len(test), dicts: map[string][]byte{},
		Machine: fmt.Sprintf("%s/%s, %d CPU, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())}
	jsonSize := 0
	for _, v := range test {
		jsonSize += v.JSONBytes
	}
	rep.JSONBytes = int64(jsonSize)

	// Serialized training samples and test sizes.
	var samples [][]byte
	trainBytes := 0
	// Samples are what the codec compresses: MsgPack's bytes (map keys
	// sorted), which is what lets a dictionary match across keys.
	for _, v := range train {
		b, err := codec.MsgPack().Marshal(nil, v.V)
		if err != nil {
			return nil, fmt.Errorf("kura: codecfit: serialize a value: %w", err)
		}
		samples = append(samples, b)
		trainBytes += len(b)
	}
	var rawSizes []int
	for _, v := range test {
		b, err := codec.MsgPack().Marshal(nil, v.V)
		if err != nil {
			return nil, fmt.Errorf("kura: codecfit: serialize a value: %w", err)
		}
		rawSizes = append(rawSizes, len(b))
	}
	slices.Sort(rawSizes)
	rep.RawP50 = rawSizes[len(rawSizes)/2]

	cands := []candidate{
		{name: "json", reference: true,
			encode: func(dst []byte, v any) ([]byte, error) { return appendJSON(dst, v) },
			decode: func(b []byte) error { var v any; return unmarshalJSON(b, &v) }},
		{name: "msgpack+snappy", reference: true,
			encode: func(_ []byte, v any) ([]byte, error) {
				b, err := msgpack.Marshal(v)
				if err != nil {
					return nil, err
				}
				return snappy.Encode(nil, b), nil
			},
			decode: func(b []byte) error {
				raw, err := snappy.Decode(nil, b)
				if err != nil {
					return err
				}
				var v any
				return msgpack.Unmarshal(raw, &v)
			}},
		{name: "none", goCfg: "codec.Options{Compressor: codec.None()}", opts: codec.Options{Compressor: codec.None()}},
		{name: "s2", goCfg: "kura.Options{Envelope: kura.EnvelopeV2} (codec.Options{})", opts: codec.Options{}},
		{name: CompactPrefix, goCfg: "kura.Options{} (the default; codec.Options{Compact: true})", opts: codec.Options{Compact: true}},
		{name: "s2-better", goCfg: "codec.Options{Compressor: codec.S2Better()}", opts: codec.Options{Compressor: codec.S2Better()}},
		{name: "zstd-1", goCfg: "codec.Options{Compressor: codec.Zstd(1)}", opts: codec.Options{Compressor: codec.Zstd(1)}},
		{name: "zstd-3", goCfg: "codec.Options{Compressor: codec.Zstd(3)}", opts: codec.Options{Compressor: codec.Zstd(3)}},
		{name: "zstd-7", goCfg: "codec.Options{Compressor: codec.Zstd(7)}", opts: codec.Options{Compressor: codec.Zstd(7)}},
	}
	for _, size := range opts.DictSizes {
		if size > trainBytes/2 && size != opts.DictSizes[0] {
			continue
		}
		if size <= 64<<10 {
			name := fmt.Sprintf("s2+dict-%s", sizeName(size))
			progress("training %s on %d values (%s)", name, len(samples), humanBytes(int64(trainBytes)))
			if d, id, err := codec.TrainS2Dictionary(samples, size); err != nil {
				progress("%s: %v", name, err)
			} else {
				rep.dicts[name] = d
				cands = append(cands, candidate{
					name:     name,
					goCfg:    fmt.Sprintf("codec.Options{MinCompressSize: -1, DictionarySource: registry} + SetDictionary(dict %08x)", id),
					opts:     codec.Options{MinCompressSize: -1, Dictionaries: map[uint32][]byte{id: d}, Dictionary: id},
					dictSize: len(d),
				})
				compact := fmt.Sprintf("%s+dict-%s", CompactPrefix, sizeName(size))
				rep.dicts[compact] = d
				cands = append(cands, candidate{
					name:     compact,
					goCfg:    fmt.Sprintf("codec.Options{Compact: true, MinCompressSize: -1, DictionarySource: registry} + SetDictionary(dict %08x); readers first: docs/FORMAT.md", id),
					opts:     codec.Options{Compact: true, MinCompressSize: -1, Dictionaries: map[uint32][]byte{id: d}, Dictionary: id},
					dictSize: len(d),
				})
				better := fmt.Sprintf("s2-better+dict-%s", sizeName(size))
				rep.dicts[better] = d
				cands = append(cands, candidate{
					name:     better,
					goCfg:    fmt.Sprintf("codec.Options{Compressor: codec.S2Better(), MinCompressSize: -1, DictionarySource: registry} + SetDictionary(dict %08x)", id),
					opts:     codec.Options{Compressor: codec.S2Better(), MinCompressSize: -1, Dictionaries: map[uint32][]byte{id: d}, Dictionary: id},
					dictSize: len(d),
				})
			}
		}
		name := fmt.Sprintf("zstd+dict-%s", sizeName(size))
		progress("training %s on %d values (%s)", name, len(samples), humanBytes(int64(trainBytes)))
		d, id, err := codec.TrainContentDictionary(samples, size)
		if err != nil {
			// Too few or too uniform samples: report it as a missing row,
			// not a failure of the whole analysis.
			progress("%s: %v", name, err)
			continue
		}
		for _, level := range []int{1, 3} {
			name := fmt.Sprintf("zstd-%d+dict-%s", level, sizeName(size))
			rep.dicts[name] = d
			cands = append(cands, candidate{
				name:     name,
				goCfg:    fmt.Sprintf("codec.Options{Compressor: codec.Zstd(%d), MinCompressSize: -1, DictionarySource: registry} + SetDictionary(dict %08x)", level, id),
				opts:     codec.Options{Compressor: codec.Zstd(level), MinCompressSize: -1, Dictionaries: map[uint32][]byte{id: d}, Dictionary: id},
				dictSize: len(d),
			})
		}
	}

	for _, c := range cands {
		progress("measuring %s", c.name)
		res, err := measure(c, test, opts.MinTime)
		if err != nil {
			return nil, fmt.Errorf("kura: codecfit: %s: %w", c.name, err)
		}
		res.Name, res.Reference, res.Go = c.name, c.reference, c.goCfg
		if c.dictSize > 0 {
			res.DictSize = c.dictSize
			res.DictID = codec.DictionaryID(rep.dicts[c.name])
		}
		res.VsJSON = float64(res.Bytes) / float64(max(1, jsonSize))
		res.EncodeMBs = float64(jsonSize) / float64(len(test)) / res.EncodeNs * 1e3
		res.DecodeMBs = float64(jsonSize) / float64(len(test)) / res.DecodeNs * 1e3
		mean := float64(res.Bytes) / float64(len(test))
		res.NetPer1000Reads = int64(math.Round(mean * 1000))
		res.MemoryPerMillion = int64(math.Round(mean * 1e6))
		rep.Results = append(rep.Results, res)
	}
	seed, _ := rep.Result("msgpack+snappy")
	for i := range rep.Results {
		rep.Results[i].VsSeed = float64(rep.Results[i].Bytes) / float64(max(1, seed.Bytes))
	}
	markPareto(rep.Results)
	rep.Recommended, rep.Reason = recommend(rep)
	if strings.HasPrefix(rep.Recommended, CompactPrefix) {
		rep.Reason += "; it writes the compact envelope (version 3), which releases before it do not read: upgrade every reader first (docs/FORMAT.md)"
	}
	return rep, nil
}

// sizeName names a dictionary size in a candidate's name in the one size
// grammar of every kura command (internal/units: KiB = 1,024 B, KB =
// 1,000 B), exactly, so the name reads back as the size: 16KiB, 1MiB,
// 16KB (a --dict-sizes 16K), 1500B.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%dMB", n/1e6)
	case n >= 1e3 && n%1e3 == 0:
		return fmt.Sprintf("%dKB", n/1e3)
	}
	return fmt.Sprintf("%dB", n)
}

// measure encodes every test value for the sizes, then times encode and
// decode loops over them.
func measure(c candidate, test []Value, minTime time.Duration) (Result, error) {
	encode, decode := c.encode, c.decode
	if encode == nil {
		cd, err := codec.New(c.opts)
		if err != nil {
			return Result{}, err
		}
		encode = func(dst []byte, v any) ([]byte, error) { b, _, err := cd.Encode(dst, v); return b, err }
		decode = func(b []byte) error { var v any; _, err := cd.Decode(b, &v); return err }
	}
	enc := make([][]byte, len(test))
	sizes := make([]int, len(test))
	var res Result
	for i, v := range test {
		b, err := encode(nil, v.V)
		if err != nil {
			return res, err
		}
		if err := decode(b); err != nil {
			return res, fmt.Errorf("decoding its own output: %w", err)
		}
		enc[i], sizes[i] = b, len(b)
		res.Bytes += int64(len(b))
	}
	slices.Sort(sizes)
	pct := func(p float64) int { return sizes[min(len(sizes)-1, int(p*float64(len(sizes))))] }
	res.P50, res.P90, res.P99 = pct(0.5), pct(0.9), pct(0.99)
	res.Percentiles = map[string]int{"p50": res.P50, "p90": res.P90, "p99": res.P99}

	var dst []byte
	var err error
	res.EncodeNs, res.EncodeAllocs = timeLoop(len(test), minTime, func(i int) {
		if err == nil {
			dst, err = encode(dst[:0], test[i].V)
		}
	})
	if err != nil {
		return res, err
	}
	res.DecodeNs, res.DecodeAllocs = timeLoop(len(test), minTime, func(i int) {
		if err == nil {
			err = decode(enc[i])
		}
	})
	return res, err
}

// timeLoop runs f over 0..n-1 repeatedly for at least minTime and returns
// the CPU time and allocations per call. CPU time (the process's, so the
// collector's share is in it) rather than wall time: the machine may be
// busy with other work, which wall time would charge to the codec.
func timeLoop(n int, minTime time.Duration, f func(i int)) (ns, allocs float64) {
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	c0 := processCPU()
	start := time.Now()
	calls := 0
	for calls == 0 || time.Since(start) < minTime {
		for i := 0; i < n; i++ {
			f(i)
		}
		calls += n
	}
	cpu := processCPU() - c0
	if cpu <= 0 { // no CPU clock: fall back to wall time
		cpu = time.Since(start)
	}
	runtime.ReadMemStats(&ms1)
	return float64(cpu.Nanoseconds()) / float64(calls), float64(ms1.Mallocs-ms0.Mallocs) / float64(calls)
}

// markPareto sets Pareto on results no other result beats in both bytes
// and CPU (encode + decode).
func markPareto(rs []Result) {
	for i := range rs {
		rs[i].Pareto = true
		for j := range rs {
			if i == j {
				continue
			}
			a, b := rs[i], rs[j]
			if b.Bytes <= a.Bytes && b.EncodeNs+b.DecodeNs <= a.EncodeNs+a.DecodeNs &&
				(b.Bytes < a.Bytes || b.EncodeNs+b.DecodeNs < a.EncodeNs+a.DecodeNs) {
				rs[i].Pareto = false
				break
			}
		}
	}
}

// recommend picks a candidate:
//
//  1. values whose median serialized size is under TinyValue bytes, or
//     that no candidate shrinks by MinSavings: no compression;
//  2. if the best dictionary candidate stores DictGain less than the best
//     candidate without a dictionary: among the dictionary candidates
//     that do, those at no more encode+decode CPU than msgpack+snappy
//     (all of them if none is), and of those the ones no other beats in
//     both bytes and CPU, the fewest bytes, and the smallest dictionary
//     within 2% of those bytes;
//  3. otherwise the smallest candidate without a dictionary (of those no
//     other beats in both) whose encode plus decode CPU is no more than
//     msgpack+snappy's (the common speed) or, if none is that fast, no
//     more than S2's (kura's default).
//
// The pick is on the Pareto frontier (markPareto) unless a reference or
// a dictionary that does not earn its keep beats it; the reason then
// names that candidate and why it is not the pick.
func recommend(rep *Report) (string, string) {
	none, _ := rep.Result("none")
	s2, _ := rep.Result("s2")
	seed, _ := rep.Result("msgpack+snappy")
	if rep.RawP50 < TinyValue {
		return "none", fmt.Sprintf("values are tiny (median %d B serialized): no compressor saves more than its header and frame cost; store them as they are", rep.RawP50)
	}
	var best *Result
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Reference || r.Name == "none" {
			continue
		}
		if best == nil || r.Bytes < best.Bytes {
			best = r
		}
	}
	if best == nil || float64(best.Bytes) > (1-MinSavings)*float64(none.Bytes) {
		saved := 0.0
		if best != nil {
			saved = 1 - float64(best.Bytes)/float64(none.Bytes)
		}
		return "none", fmt.Sprintf("values barely compress (the best candidate saves %.1f%%, under %.0f%%): incompressible data; compression would cost CPU for nothing (kura's default S2 stores such values uncompressed anyway)", 100*saved, 100*MinSavings)
	}

	var bestPlain, bestDict *Result
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Reference || r.Name == "none" {
			continue
		}
		if r.DictSize == 0 {
			if bestPlain == nil || r.Bytes < bestPlain.Bytes {
				bestPlain = r
			}
		} else if bestDict == nil || r.Bytes < bestDict.Bytes {
			bestDict = r
		}
	}
	seedCPU := cpuOf(&seed)
	if bestDict != nil && float64(bestDict.Bytes) <= (1-DictGain)*float64(bestPlain.Bytes) {
		// Dictionaries earn their keep. Among those that do, prefer the
		// ones at no more CPU than msgpack+snappy; of those, the ones no
		// other such candidate beats in both bytes and CPU (so the pick
		// lies on the frontier the chart draws); then the fewest bytes,
		// and the smallest dictionary within 2% of them.
		var pool []*Result
		fast := true
		for _, f := range []bool{true, false} {
			fast = f
			for i := range rep.Results {
				r := &rep.Results[i]
				if r.DictSize > 0 && float64(r.Bytes) <= (1-DictGain)*float64(bestPlain.Bytes) &&
					(!f || cpuOf(r) <= seedCPU) {
					pool = append(pool, r)
				}
			}
			if len(pool) > 0 {
				break
			}
		}
		pool = undominated(pool)
		fewest := pool[0]
		for _, r := range pool {
			if r.Bytes < fewest.Bytes {
				fewest = r
			}
		}
		pick := fewest
		for _, r := range pool {
			if r.DictSize < pick.DictSize && float64(r.Bytes) <= 1.02*float64(fewest.Bytes) {
				pick = r
			}
		}
		var speed string
		switch {
		case fast && pick == fewest:
			speed = "the fewest bytes of the dictionary candidates at no more CPU than msgpack+snappy"
		case fast:
			speed = fmt.Sprintf("at no more CPU than msgpack+snappy, and within 2%% of the fewest bytes (%s) with a smaller dictionary", fewest.Name)
		case pick == fewest:
			speed = "no dictionary candidate is as fast as msgpack+snappy here; this one stores the fewest bytes"
		default:
			speed = fmt.Sprintf("no dictionary candidate is as fast as msgpack+snappy here; this one is within 2%% of the fewest bytes (%s) with a smaller dictionary", fewest.Name)
		}
		note := ""
		if bestDict.Bytes < pick.Bytes {
			note = fmt.Sprintf("; %s stores %.0f%% less at %.2fx the CPU", bestDict.Name,
				100*(1-float64(bestDict.Bytes)/float64(pick.Bytes)), cpuOf(bestDict)/cpuOf(pick))
		}
		return pick.Name, fmt.Sprintf("a %s dictionary trained on %d of your values stores the other %d in %.2fx the bytes of msgpack+snappy (%.0f%% less than the best codec without a dictionary, %s), %s: encode %.1fx, decode %.1fx its CPU per value%s%s",
			sizeName(pick.DictSize), rep.TrainValues, rep.TestValues, pick.VsSeed,
			100*(1-float64(pick.Bytes)/float64(bestPlain.Bytes)), bestPlain.Name, speed,
			pick.EncodeNs/seed.EncodeNs, pick.DecodeNs/seed.DecodeNs, note, offFrontier(rep, pick))
	}
	dictNote := "no dictionary was trained"
	if bestDict != nil {
		dictNote = fmt.Sprintf("the best dictionary (%s) saves only %.0f%% over %s, under the %.0f%% a dictionary must earn", bestDict.Name,
			100*(1-float64(bestDict.Bytes)/float64(bestPlain.Bytes)), bestPlain.Name, 100*DictGain)
	}
	// Without a dictionary: the fewest bytes at no more CPU than
	// msgpack+snappy or, when no such candidate is that fast, at no more
	// CPU than S2 (kura's default); among candidates no other of them
	// beats in both bytes and CPU.
	bound, boundName := seedCPU, "msgpack+snappy"
	var pool []*Result
	for pass := 0; pass < 2 && len(pool) == 0; pass++ {
		if pass == 1 {
			bound, boundName = cpuOf(&s2), "s2"
		}
		for i := range rep.Results {
			r := &rep.Results[i]
			if !r.Reference && r.DictSize == 0 && r.Name != "none" && cpuOf(r) <= bound {
				pool = append(pool, r)
			}
		}
	}
	if len(pool) == 0 {
		return "s2", fmt.Sprintf("s2 is kura's default; %s", dictNote)
	}
	pool = undominated(pool)
	pick := pool[0]
	for _, r := range pool {
		if r.Bytes < pick.Bytes {
			pick = r
		}
	}
	lead := fmt.Sprintf("%s is the smallest codec at no more CPU than msgpack+snappy", pick.Name)
	if boundName != "msgpack+snappy" {
		lead = fmt.Sprintf("no codec without a dictionary is as fast as msgpack+snappy here; %s is the smallest at no more CPU than s2 (kura's default)", pick.Name)
	}
	return pick.Name, fmt.Sprintf("%s (%.2fx msgpack+snappy's bytes, %.1fx its encode+decode CPU); %s%s",
		lead, pick.VsSeed, cpuOf(pick)/seedCPU, dictNote, offFrontier(rep, pick))
}

// cpuOf is a result's encode plus decode CPU per value.
func cpuOf(r *Result) float64 { return r.EncodeNs + r.DecodeNs }

// dominates reports whether a beats b: no more bytes and no more CPU,
// and less of one.
func dominates(a, b *Result) bool {
	return a.Bytes <= b.Bytes && cpuOf(a) <= cpuOf(b) && (a.Bytes < b.Bytes || cpuOf(a) < cpuOf(b))
}

// undominated returns the members of rs no other member dominates (never
// empty when rs is not).
func undominated(rs []*Result) []*Result {
	var out []*Result
	for _, a := range rs {
		beaten := false
		for _, b := range rs {
			if b != a && dominates(b, a) {
				beaten = true
				break
			}
		}
		if !beaten {
			out = append(out, a)
		}
	}
	return out
}

// offFrontier says, for a pick off the Pareto frontier (see markPareto),
// which candidate on it beats the pick and why that one is not
// recommended; "" for a pick on the frontier. The recommendation only
// leaves the frontier for a reference (never recommended: kura does not
// write it) or for a dictionary that does not earn its keep.
func offFrontier(rep *Report, pick *Result) string {
	if pick.Pareto {
		return ""
	}
	var by *Result
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Pareto && dominates(r, pick) && (by == nil || r.Bytes < by.Bytes) {
			by = r
		}
	}
	if by == nil {
		return ""
	}
	why := "the rules above set it aside"
	switch {
	case by.Reference:
		why = "it is a reference kura does not write"
	case by.DictSize > 0 && pick.DictSize == 0:
		why = fmt.Sprintf("a dictionary must save %.0f%% to pay for training, shipping and rotating it", 100*DictGain)
	}
	less := 100 * (1 - float64(by.Bytes)/float64(pick.Bytes))
	prec := 0
	if less < 1 {
		prec = 1
	}
	return fmt.Sprintf("; off the Pareto frontier because %s stores %.*f%% less at %.2fx the CPU, but %s",
		by.Name, prec, less, cpuOf(by)/cpuOf(pick), why)
}

// sortByBytes orders results by stored bytes, smallest first.
func sortByBytes(rs []Result) []Result {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b Result) int { return cmp.Compare(a.Bytes, b.Bytes) })
	return out
}

// NewCodec returns a writer's Codec for a recommended candidate name
// ("s2", "zstd-3", "s2+dict-16KiB", "zstd-1+dict-4KiB", ...) with its
// dictionary d (nil for candidates without one), reading with source
// (may be nil). It is what the candidate's Go field describes.
func NewCodec(name string, d []byte, source codec.DictionarySource) (*codec.Codec, error) {
	base, _, hasDict := strings.Cut(name, "+dict-")
	o := codec.Options{DictionarySource: source}
	switch {
	case base == "none":
		o.Compressor = codec.None()
	case base == "s2":
	case base == "s2-better":
		o.Compressor = codec.S2Better()
	case strings.HasPrefix(base, "zstd-"):
		level, err := strconv.Atoi(strings.TrimPrefix(base, "zstd-"))
		if err != nil {
			return nil, fmt.Errorf("kura: codecfit: unknown candidate %q", name)
		}
		o.Compressor = codec.Zstd(level)
	default:
		return nil, fmt.Errorf("kura: codecfit: unknown candidate %q", name)
	}
	if hasDict {
		if len(d) == 0 {
			return nil, fmt.Errorf("kura: codecfit: candidate %q needs its dictionary", name)
		}
		o.MinCompressSize = -1
	}
	c, err := codec.New(o)
	if err != nil {
		return nil, err
	}
	if hasDict {
		if _, err := c.SetDictionary(d); err != nil {
			return nil, err
		}
	}
	return c, nil
}
