package codec

import (
	"container/heap"
	"reflect"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/s2"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/vmihailenco/msgpack/v5"
)

// BenchmarkEntropyProjection measures what an entropy stage after the S2
// dictionary encoder would store, without building the format for it
// (issue 24, third pass: "people" and "emoji" miss 0.65x because S2 has no
// entropy coding). Per public data set, with the compact envelope and a
// 16 KiB S2 dictionary trained on one half as in BenchmarkCorpus:
//
//   - entry-B/value: what kura stores today (a Cache's Set: fingerprint,
//     write time, dictionary id and digest);
//   - huff-B/value: the same entry with its S2 block Huffman-coded (one
//     code of at most 11 bits per byte, trained on the blocks of the
//     training half and shipped with the dictionary, so values carry no
//     table; +1 byte for the bit count);
//   - huff+ref-B/value: that, with the dictionary named by its digest
//     alone (7 bytes less a value);
//   - m+s-B/value: msgpack+snappy, the seed.
//
// The timed loop is the Huffman stage's encode (bit packing of the
// block), the CPU it would add to a write.
//
//	go test ./codec -run '^$' -bench EntropyProjection -benchtime 20000x
func BenchmarkEntropyProjection(b *testing.B) {
	reals, errs := corpus.RealCorpora("..")
	for _, err := range errs {
		b.Logf("corpus skipped: %v", err)
	}
	for _, r := range reals {
		b.Run(r.Name, func(b *testing.B) {
			vals := shuffledGeneric(b, r)
			h := len(vals) / 2
			var train [][]byte
			for _, v := range vals[:h] {
				p, err := MsgPack().Marshal(nil, v)
				if err != nil {
					b.Fatal(err)
				}
				train = append(train, p)
			}
			d, _, err := TrainS2Dictionary(train, 16<<10)
			if err != nil {
				b.Fatal(err)
			}
			enc := newS2DictEncoder(s2.NewDict(d))
			var hist [256]int
			for _, p := range train {
				for _, c := range enc.encode(nil, p) {
					hist[c]++
				}
			}
			lens := huffmanLengths(hist, 11)
			c, err := New(Options{Compact: true, MinCompressSize: -1})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.SetDictionary(d); err != nil {
				b.Fatal(err)
			}
			fields := Fields{Schema: Fingerprint(reflect.TypeOf(vals[0]), "msgpack"), HasSchema: true, Written: time.Now()}
			var entry, huff, ref, seed float64
			var blocks [][]byte
			for _, v := range vals[h:] {
				out, hdr, err := c.EncodeWith(nil, v, fields)
				if err != nil {
					b.Fatal(err)
				}
				entry += float64(len(out))
				coded := float64(len(out))
				if hdr.Compressor == IDS2Dict {
					block := out[hdr.Len:]
					blocks = append(blocks, block)
					bits := 0
					for _, c := range block {
						bits += int(lens[c])
					}
					if n := (bits+7)/8 + 1; n < len(block) {
						coded -= float64(len(block) - n)
					}
					huff += coded
					ref += coded - 7
				} else {
					huff += coded
					ref += coded
				}
				p, err := msgpack.Marshal(v)
				if err != nil {
					b.Fatal(err)
				}
				seed += float64(len(snappy.Encode(nil, p)))
			}
			n := float64(len(vals) - h)
			codes := canonicalCodes(lens)
			var dst []byte
			i := 0
			for b.Loop() {
				dst = huffmanEncode(dst[:0], blocks[i%len(blocks)], &lens, &codes)
				i++
			}
			b.ReportMetric(entry/n, "entry-B/value")
			b.ReportMetric(huff/n, "huff-B/value")
			b.ReportMetric(ref/n, "huff+ref-B/value")
			b.ReportMetric(seed/n, "m+s-B/value")
			b.ReportMetric(ref/seed, "huff+ref/m+s")
		})
	}
}

// huffmanLengths returns Huffman code lengths of at most maxBits for the
// byte histogram hist (every byte gets a code: counts are smoothed by 1,
// doubled until the longest code fits).
func huffmanLengths(hist [256]int, maxBits int) [256]uint8 {
	for scale := 1; ; scale *= 2 {
		var lens [256]uint8
		nodes := &huffHeap{}
		parent := make([]int, 0, 512)
		for s, c := range hist {
			heap.Push(nodes, huffNode{w: c + scale, id: s})
			parent = append(parent, -1)
		}
		for nodes.Len() > 1 {
			a, c := heap.Pop(nodes).(huffNode), heap.Pop(nodes).(huffNode)
			id := len(parent)
			parent = append(parent, -1)
			parent[a.id], parent[c.id] = id, id
			heap.Push(nodes, huffNode{w: a.w + c.w, id: id})
		}
		longest := 0
		for s := range 256 {
			depth := 0
			for p := parent[s]; p >= 0; p = parent[p] {
				depth++
			}
			lens[s] = uint8(depth)
			longest = max(longest, depth)
		}
		if longest <= maxBits {
			return lens
		}
	}
}

type huffNode struct{ w, id int }

type huffHeap []huffNode

func (h huffHeap) Len() int { return len(h) }
func (h huffHeap) Less(i, j int) bool {
	if h[i].w != h[j].w {
		return h[i].w < h[j].w
	}
	return h[i].id < h[j].id
}
func (h huffHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *huffHeap) Push(x any)   { *h = append(*h, x.(huffNode)) }
func (h *huffHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// canonicalCodes assigns canonical Huffman codes to lens.
func canonicalCodes(lens [256]uint8) [256]uint16 {
	var count [17]int
	for _, l := range lens {
		count[l]++
	}
	count[0] = 0
	var next [17]int
	code := 0
	for l := 1; l <= 16; l++ {
		code = (code + count[l-1]) << 1
		next[l] = code
	}
	var codes [256]uint16
	for s, l := range lens {
		if l > 0 {
			codes[s] = uint16(next[l])
			next[l]++
		}
	}
	return codes
}

// huffmanEncode appends src coded with codes (most significant bit
// first): the write-side work of the projected stage.
func huffmanEncode(dst, src []byte, lens *[256]uint8, codes *[256]uint16) []byte {
	var acc uint64
	var n uint
	for _, c := range src {
		acc = acc<<lens[c] | uint64(codes[c])
		n += uint(lens[c])
		for n >= 8 {
			n -= 8
			dst = append(dst, byte(acc>>n))
		}
	}
	if n > 0 {
		dst = append(dst, byte(acc<<(8-n)))
	}
	return dst
}
