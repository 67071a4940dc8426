package scan

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
)

// otherPatterns collects the smallest patterns when there are too many to
// keep apart even after collapsing.
const otherPatterns = "(other patterns)"

// histBuckets: value bytes up to 2^6 .. 2^26, then unbounded.
const (
	histMinShift = 6
	histMaxShift = 26
)

// sampleRef is a key kept in a pattern's reservoir.
type sampleRef struct {
	key    string
	server int
	// w is the number of keys this sample stands for (reservoirs merged
	// by collapsing carry their own weights).
	w float64
}

type patternStats struct {
	keys, valueBytes, memBytes int64
	stringBytes                int64
	minTTL, maxTTL             float64
	haveTTL                    bool
	noTTL                      int64
	types                      map[string]int64
	// reservoir of string keys (Algorithm R), seen = string keys offered.
	seen    int64
	samples []sampleRef
	savings *Savings
}

type aggregator struct {
	opts Options
	kind string
	rng  *rand.Rand

	mu         sync.Mutex
	keys       int64
	valueBytes int64
	memBytes   int64
	types      map[string]int64
	hist       [histMaxShift - histMinShift + 2]Bucket
	patterns   map[string]*patternStats
	top        keyHeap
	big        bigHeap
	bigCount   int64
	errors     []string
	// folded: the patterns are final (sample folded them and estimated
	// their savings; folding again could merge an estimate away).
	folded bool
}

func newAggregator(opts Options, kind string) *aggregator {
	return &aggregator{
		opts: opts, kind: kind,
		rng:      rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		types:    map[string]int64{},
		patterns: map[string]*patternStats{},
	}
}

func histIndex(n int64) int {
	for s := histMinShift; s <= histMaxShift; s++ {
		if n <= 1<<s {
			return s - histMinShift
		}
	}
	return histMaxShift - histMinShift + 1
}

// add counts one key seen on server.
func (a *aggregator) add(k KeyInfo, server int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k.Pattern = patternOf(k.Key, a.opts.Separator)
	a.keys++
	a.valueBytes += k.ValueBytes
	a.memBytes += k.MemoryBytes
	a.types[k.Type]++
	h := &a.hist[histIndex(k.ValueBytes)]
	h.Keys++
	h.ValueBytes += k.ValueBytes

	p := a.patterns[k.Pattern]
	if p == nil {
		p = &patternStats{types: map[string]int64{}}
		a.patterns[k.Pattern] = p
	}
	p.keys++
	p.valueBytes += k.ValueBytes
	p.memBytes += k.MemoryBytes
	p.types[k.Type]++
	if k.TTLSeconds < 0 {
		p.noTTL++
	} else {
		if !p.haveTTL || k.TTLSeconds < p.minTTL {
			p.minTTL = k.TTLSeconds
		}
		if !p.haveTTL || k.TTLSeconds > p.maxTTL {
			p.maxTTL = k.TTLSeconds
		}
		p.haveTTL = true
	}
	if k.Type == "string" || k.Type == "item" {
		p.stringBytes += k.ValueBytes
		p.seen++
		ref := sampleRef{key: k.Key, server: server, w: 1}
		switch {
		case a.opts.Samples < 0 || len(p.samples) < a.opts.Samples:
			p.samples = append(p.samples, ref)
		default:
			if j := a.rng.Int64N(p.seen); j < int64(len(p.samples)) {
				p.samples[j] = ref
			}
		}
	}

	// The biggest keys: by memory where the server tells it, else bytes.
	if a.opts.Top > 0 {
		if len(a.top) < a.opts.Top {
			heap.Push(&a.top, k)
		} else if smaller(a.top[0], k) {
			a.top[0] = k
			heap.Fix(&a.top, 0)
		}
	}
	if k.ValueBytes >= a.opts.Big {
		a.bigCount++
		bk := BigKey{Key: k.Key, ValueBytes: k.ValueBytes, Node: k.Node}
		if len(a.big) < MaxBigValues {
			heap.Push(&a.big, bk)
		} else if bk.ValueBytes > a.big[0].ValueBytes || bk.ValueBytes == a.big[0].ValueBytes && bk.Key < a.big[0].Key {
			a.big[0] = bk
			heap.Fix(&a.big, 0)
		}
	}
	if len(a.patterns) > maxPatterns {
		a.fold()
	}
}

func sizeOf(k KeyInfo) int64 {
	if k.MemoryBytes > 0 {
		return k.MemoryBytes
	}
	return k.ValueBytes
}

// fold collapses the patterns (see collapse) and, when there are still
// too many, merges the smallest into otherPatterns. Called with mu held.
func (a *aggregator) fold() {
	names := make([]string, 0, len(a.patterns))
	for n := range a.patterns {
		names = append(names, n)
	}
	sort.Strings(names) // merge order must not depend on map order
	to := collapse(names, a.opts.Separator)
	merged := make(map[string]*patternStats, len(a.patterns))
	for _, n := range names {
		a.mergeInto(merged, to[n], a.patterns[n])
	}
	if len(merged) > maxPatterns/2 {
		names = names[:0]
		for n := range merged {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool {
			if merged[names[i]].keys != merged[names[j]].keys {
				return merged[names[i]].keys > merged[names[j]].keys
			}
			return names[i] < names[j]
		})
		keep := make(map[string]*patternStats, maxPatterns/2)
		for i, n := range names {
			dst := n
			if i >= maxPatterns/4 {
				dst = otherPatterns
			}
			a.mergeInto(keep, dst, merged[n])
		}
		merged = keep
	}
	a.patterns = merged
}

func (a *aggregator) mergeInto(m map[string]*patternStats, name string, src *patternStats) {
	dst := m[name]
	if dst == nil {
		m[name] = src
		return
	}
	dst.keys += src.keys
	dst.valueBytes += src.valueBytes
	dst.memBytes += src.memBytes
	dst.stringBytes += src.stringBytes
	dst.noTTL += src.noTTL
	if src.haveTTL {
		if !dst.haveTTL || src.minTTL < dst.minTTL {
			dst.minTTL = src.minTTL
		}
		if !dst.haveTTL || src.maxTTL > dst.maxTTL {
			dst.maxTTL = src.maxTTL
		}
		dst.haveTTL = true
	}
	for t, n := range src.types {
		dst.types[t] += n
	}
	dst.samples = a.mergeSamples(dst, src)
	dst.seen += src.seen
}

// mergeSamples keeps a weighted random sample of both reservoirs
// (Efraimidis-Spirakis): each sample stands for seen/len(samples) keys of
// its pattern, so the merged reservoir is still uniform over the keys.
func (a *aggregator) mergeSamples(x, y *patternStats) []sampleRef {
	limit := a.opts.Samples
	all := make([]sampleRef, 0, len(x.samples)+len(y.samples))
	for _, p := range []*patternStats{x, y} {
		if len(p.samples) == 0 {
			continue
		}
		per := float64(p.seen) / float64(len(p.samples))
		for _, s := range p.samples {
			s.w *= per
			all = append(all, s)
		}
	}
	if limit < 0 || len(all) <= limit {
		// Weights stay relative to their own reservoir; normalise so a
		// later merge multiplies by the new per-sample share.
		return normalise(all)
	}
	type keyed struct {
		k float64
		s sampleRef
	}
	ks := make([]keyed, len(all))
	for i, s := range all {
		ks[i] = keyed{math.Pow(a.rng.Float64(), 1/s.w), s}
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].k > ks[j].k })
	out := make([]sampleRef, limit)
	for i := range out {
		out[i] = ks[i].s
	}
	return normalise(out)
}

func normalise(s []sampleRef) []sampleRef {
	for i := range s {
		s[i].w = 1
	}
	return s
}

// report builds the Report from the counters (sampling done).
func (a *aggregator) report() *Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.folded {
		a.fold()
	}
	r := &Report{
		Schema: Schema, Kind: a.kind,
		Options: ReportOptions{Count: a.opts.Count, Rate: max(a.opts.Rate, 0), Samples: a.opts.Samples, Separator: a.opts.Separator,
			BigBytes: a.opts.Big, BandwidthBits: a.opts.Bandwidth, Top: a.opts.Top},
		Keys: a.keys, ValueBytes: a.valueBytes, MemoryBytes: a.memBytes, Types: a.types,
		Errors: []string{},
	}
	for i, b := range a.hist {
		b.LE = -1
		if s := i + histMinShift; s <= histMaxShift {
			b.LE = 1 << s
		}
		r.Histogram = append(r.Histogram, b)
	}
	top := append(keyHeap(nil), a.top...)
	sort.Slice(top, func(i, j int) bool {
		if sizeOf(top[i]) != sizeOf(top[j]) {
			return sizeOf(top[i]) > sizeOf(top[j])
		}
		return top[i].Key < top[j].Key
	})
	r.Biggest = append([]KeyInfo{}, top...)
	memTotal := a.memBytes
	if memTotal == 0 {
		memTotal = a.valueBytes
	}
	for name, p := range a.patterns {
		pt := Pattern{Pattern: name, Keys: p.keys, ValueBytes: p.valueBytes, MemoryBytes: p.memBytes, Types: p.types,
			TTL: TTLSpread{MinSeconds: p.minTTL, MaxSeconds: p.maxTTL, NoTTL: p.noTTL}, Savings: p.savings}
		if p.keys > 0 {
			pt.MeanBytes = float64(p.valueBytes) / float64(p.keys)
		}
		share := p.memBytes
		if a.memBytes == 0 {
			share = p.valueBytes
		}
		if memTotal > 0 {
			pt.MemoryShare = float64(share) / float64(memTotal)
		}
		r.Patterns = append(r.Patterns, pt)
	}
	sort.Slice(r.Patterns, func(i, j int) bool {
		x, y := r.Patterns[i], r.Patterns[j]
		if sizeX, sizeY := x.MemoryBytes+x.ValueBytes*boolInt(a.memBytes == 0), y.MemoryBytes+y.ValueBytes*boolInt(a.memBytes == 0); sizeX != sizeY {
			return sizeX > sizeY
		}
		return x.Pattern < y.Pattern
	})
	big := append(bigHeap(nil), a.big...)
	sort.Slice(big, func(i, j int) bool {
		if big[i].ValueBytes != big[j].ValueBytes {
			return big[i].ValueBytes > big[j].ValueBytes
		}
		return big[i].Key < big[j].Key
	})
	for i := range big {
		big[i].ReadSeconds = float64(big[i].ValueBytes) * 8 / a.opts.Bandwidth
		big[i].ReadsPerSecond = 1 / big[i].ReadSeconds
	}
	r.BigValues = BigValues{ThresholdBytes: a.opts.Big, BandwidthBits: a.opts.Bandwidth, Count: a.bigCount, Keys: append([]BigKey{}, big...)}
	return r
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// keyHeap is a min-heap by size: the root is the smallest of the top keys.
type keyHeap []KeyInfo

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return smaller(h[i], h[j]) }

// smaller orders the top keys: by size, then a later key name counts as
// smaller, so ties resolve the same way whatever order SCAN returns keys in.
func smaller(a, b KeyInfo) bool {
	if sizeOf(a) != sizeOf(b) {
		return sizeOf(a) < sizeOf(b)
	}
	return a.Key > b.Key
}
func (h keyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *keyHeap) Push(x any)   { *h = append(*h, x.(KeyInfo)) }
func (h *keyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type bigHeap []BigKey

func (h bigHeap) Len() int { return len(h) }
func (h bigHeap) Less(i, j int) bool {
	if h[i].ValueBytes != h[j].ValueBytes {
		return h[i].ValueBytes < h[j].ValueBytes
	}
	return h[i].Key > h[j].Key
}
func (h bigHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *bigHeap) Push(x any)   { *h = append(*h, x.(BigKey)) }
func (h *bigHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
