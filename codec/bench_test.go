package codec

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	rediscache "github.com/go-redis/cache/v9"
	"github.com/golang/snappy"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/vmihailenco/msgpack/v5"
)

// The benchmarks compare kura's envelope with its peers on the same
// generated article corpus (internal/harness/corpus, seed 1). Run them with:
//
//	go test ./codec -run '^$' -bench 'Encode|Decode' -benchtime 2000x -count 3
//
// SetBytes is the article's average JSON size for every scheme, so MB/s
// reads as "JSON-equivalent megabytes per second" and is comparable across
// rows. B/value is what the scheme stores per article. cpu-ns/op is the
// process's CPU time (user+system, GC included) per operation: on a shared
// machine it moves less than ns/op when other jobs take the cores.

const benchArticles = 64

var benchCorpus = sync.OnceValues(func() ([]corpus.Article, int) {
	arts := corpus.Articles(1, benchArticles)
	total := 0
	for _, a := range arts {
		b, _ := json.Marshal(a)
		total += len(b)
	}
	return arts, total / len(arts)
})

// scheme is one way of turning an article into cache bytes and back.
type scheme struct {
	name   string
	encode func(dst []byte, a *corpus.Article) ([]byte, error)
	decode func(b []byte, a *corpus.Article) error
}

var benchDict = sync.OnceValue(func() []byte {
	// Trained on a different seed than the benchmark corpus, as a real
	// dictionary is trained on yesterday's values.
	var samples [][]byte
	for _, a := range corpus.Articles(99, 200) {
		b, _ := msgpack.Marshal(a)
		samples = append(samples, b)
	}
	d, err := TrainDictionary(samples, 1, 64<<10)
	if err != nil {
		panic(err)
	}
	return d
})

var benchS2DictBytes = sync.OnceValue(func() []byte {
	var samples [][]byte
	for _, a := range corpus.Articles(99, 200) {
		b, _ := msgpack.Marshal(a)
		samples = append(samples, b)
	}
	d, _, err := TrainS2Dictionary(samples, 64<<10)
	if err != nil {
		panic(err)
	}
	return d
})

func benchS2Dict() uint32 { return DictionaryID(benchS2DictBytes()) }

func kuraScheme(name string, o Options, reuse bool) scheme {
	c, err := New(o)
	if err != nil {
		panic(err)
	}
	return scheme{
		name: name,
		encode: func(dst []byte, a *corpus.Article) ([]byte, error) {
			if !reuse {
				dst = nil
			}
			b, _, err := c.Encode(dst, a)
			return b, err
		},
		decode: func(b []byte, a *corpus.Article) error { _, err := c.Decode(b, a); return err },
	}
}

func schemes() []scheme {
	grc := rediscache.New(&rediscache.Options{})
	return []scheme{
		{"json",
			func(_ []byte, a *corpus.Article) ([]byte, error) { return json.Marshal(a) },
			func(b []byte, a *corpus.Article) error { return json.Unmarshal(b, a) }},
		{"gob",
			func(_ []byte, a *corpus.Article) ([]byte, error) {
				var buf bytes.Buffer
				err := gob.NewEncoder(&buf).Encode(a)
				return buf.Bytes(), err
			},
			func(b []byte, a *corpus.Article) error { return gob.NewDecoder(bytes.NewReader(b)).Decode(a) }},
		{"msgpack",
			func(_ []byte, a *corpus.Article) ([]byte, error) { return msgpack.Marshal(a) },
			func(b []byte, a *corpus.Article) error { return msgpack.Unmarshal(b, a) }},
		// Seed 000's code, verbatim in spirit: msgpack then golang/snappy.
		{"msgpack+snappy",
			func(_ []byte, a *corpus.Article) ([]byte, error) {
				b, err := msgpack.Marshal(a)
				if err != nil {
					return nil, err
				}
				return snappy.Encode(nil, b), nil
			},
			func(b []byte, a *corpus.Article) error {
				raw, err := snappy.Decode(nil, b)
				if err != nil {
					return err
				}
				return msgpack.Unmarshal(raw, a)
			}},
		{"go-redis-cache",
			func(_ []byte, a *corpus.Article) ([]byte, error) { return grc.Marshal(a) },
			func(b []byte, a *corpus.Article) error { return grc.Unmarshal(b, a) }},
		kuraScheme("kura", Options{}, true),
		kuraScheme("kura-nil-dst", Options{}, false),
		kuraScheme("kura-s2better", Options{Compressor: S2Better()}, true),
		kuraScheme("kura-zstd", Options{Compressor: Zstd(3)}, true),
		kuraScheme("kura-zstd-dict", Options{Compressor: Zstd(3), Dictionaries: map[uint32][]byte{1: benchDict()}, Dictionary: 1}, true),
		kuraScheme("kura-s2-dict", Options{Dictionaries: map[uint32][]byte{benchS2Dict(): benchS2DictBytes()}, Dictionary: benchS2Dict()}, true),
	}
}

func BenchmarkEncode(b *testing.B) {
	arts, jsonSize := benchCorpus()
	for _, s := range schemes() {
		b.Run(s.name, func(b *testing.B) {
			stored := 0
			for i := range arts {
				out, err := s.encode(nil, &arts[i])
				if err != nil {
					b.Fatal(err)
				}
				stored += len(out)
			}
			b.SetBytes(int64(jsonSize))
			b.ReportAllocs()
			var dst []byte
			i := 0
			cpu := startCPU()
			for b.Loop() {
				out, err := s.encode(dst[:0], &arts[i%len(arts)])
				if err != nil {
					b.Fatal(err)
				}
				dst = out
				i++
			}
			cpu.report(b)
			b.ReportMetric(float64(stored)/float64(len(arts)), "B/value")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	arts, jsonSize := benchCorpus()
	for _, s := range schemes() {
		b.Run(s.name, func(b *testing.B) {
			enc := make([][]byte, len(arts))
			stored := 0
			for i := range arts {
				out, err := s.encode(nil, &arts[i])
				if err != nil {
					b.Fatal(err)
				}
				enc[i] = out
				stored += len(out)
			}
			b.SetBytes(int64(jsonSize))
			b.ReportAllocs()
			i := 0
			cpu := startCPU()
			for b.Loop() {
				var a corpus.Article
				if err := s.decode(enc[i%len(enc)], &a); err != nil {
					b.Fatal(err)
				}
				i++
			}
			cpu.report(b)
			b.ReportMetric(float64(stored)/float64(len(arts)), "B/value")
		})
	}
}

// sizedPayloads returns msgpack payloads of exactly n bytes cut from
// realistic values: small inventory records for small sizes, articles for
// large ones, as a cache holds both kinds.
func sizedPayloads(family string, n int) [][]byte {
	var out [][]byte
	for k := 0; k < 16; k++ {
		var src []byte
		if family == "inventory" {
			for u := 0; len(src) < n; u++ {
				b, _ := msgpack.Marshal(corpus.Inventory(int64(k), int64(u), 1+n/250))
				src = append(src, b...)
			}
		} else {
			for i := 0; len(src) < n; i++ {
				b, _ := msgpack.Marshal(corpus.NewArticle(int64(k), i))
				src = append(src, b...)
			}
		}
		out = append(out, src[:n])
	}
	return out
}

var sweepSizes = []int{64, 128, 256, 512, 1 << 10, 4 << 10, 16 << 10, 64 << 10}

// BenchmarkCompressBySize measures, per payload size, what each compressor
// saves and costs. It is the measurement behind DefaultMinCompressSize and
// DefaultMinSavings (docs/benchmarks/codec.md).
func BenchmarkCompressBySize(b *testing.B) {
	zenc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(false))
	zdec, _ := zstd.NewReader(nil)
	type comp struct {
		name string
		enc  func(dst, src []byte) []byte
		dec  func(dst, src []byte) ([]byte, error)
	}
	comps := []comp{
		{"s2", func(d, s []byte) []byte { return s2.EncodeSnappy(d[:cap(d)], s) }, func(d, s []byte) ([]byte, error) { return s2.Decode(d[:cap(d)], s) }},
		{"s2better", func(d, s []byte) []byte { return s2.EncodeSnappyBetter(d[:cap(d)], s) }, func(d, s []byte) ([]byte, error) { return s2.Decode(d[:cap(d)], s) }},
		{"zstd3", func(d, s []byte) []byte { return zenc.EncodeAll(s, d[:0]) }, func(d, s []byte) ([]byte, error) { return zdec.DecodeAll(s, d[:0]) }},
	}
	for _, family := range []string{"inventory", "article"} {
		for _, n := range sweepSizes {
			payloads := sizedPayloads(family, n)
			for _, c := range comps {
				for _, op := range []string{"enc", "dec"} {
					b.Run(fmt.Sprintf("%s/%d/%s/%s", family, n, c.name, op), func(b *testing.B) {
						comp := make([][]byte, len(payloads))
						total := 0
						for i, p := range payloads {
							comp[i] = c.enc(make([]byte, 0, s2.MaxEncodedLen(n)+64), p)
							total += len(comp[i])
						}
						dst := make([]byte, 0, s2.MaxEncodedLen(n)+64)
						b.SetBytes(int64(n))
						b.ReportAllocs()
						i := 0
						for b.Loop() {
							if op == "enc" {
								c.enc(dst, payloads[i%len(payloads)])
							} else if _, err := c.dec(dst, comp[i%len(comp)]); err != nil {
								b.Fatal(err)
							}
							i++
						}
						b.ReportMetric(100*(1-float64(total)/float64(n*len(payloads))), "%saved")
					})
				}
			}
		}
	}
}

// BenchmarkParseHeader is the cost version 2 adds to every read: the
// header parse is the only step that changed (the payload is decoded as in
// version 1).
//
//	go test ./codec -run '^$' -bench ParseHeader -count 10
func BenchmarkParseHeader(b *testing.B) {
	v1 := AppendHeader(nil, Header{Version: Version1, Serializer: IDMsgPack, Compressor: IDS2, RawLen: 15021})
	v2 := AppendHeader(nil, Header{Serializer: IDMsgPack, Compressor: IDS2, RawLen: 15021})
	v2f := AppendHeader(nil, Header{Serializer: IDMsgPack, Compressor: IDS2, RawLen: 15021, Fields: Fields{
		Schema: 0x9e3779b9, HasSchema: true, Written: time.UnixMilli(1795000000123), TTL: time.Hour, Cost: 4500 * time.Microsecond,
	}})
	for _, bc := range []struct {
		name string
		data []byte
	}{{"v1", v1}, {"v2", v2}, {"v2-fields", v2f}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseHeader(bc.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
