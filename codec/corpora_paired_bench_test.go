package codec

import (
	"reflect"
	"runtime"
	"testing"
	"time"
)

// BenchmarkCorpusPaired measures the recommended schemes against
// msgpack+snappy on the same value, one right after the other (the order
// alternating per value), so that both sides of every ratio see the same
// machine: on the 2-core VM, a scheme measured on its own for a few
// milliseconds lands in a fast or a slow state at random (BenchmarkCorpus's
// rounds differ by up to 2x), which pairing cancels. Dictionaries are
// trained as in BenchmarkCorpus (one half; figures on the other half).
//
// Metrics: ratio (the scheme's time ÷ msgpack+snappy's, summed over the
// loop; lower is faster), the two ns/value, and for encode the scheme's
// B/value and its bytes ÷ msgpack+snappy's.
//
//	go test ./codec -run '^$' -bench CorpusPaired -benchtime 0.3s
func BenchmarkCorpusPaired(b *testing.B) {
	for _, s := range corpusSets(b) {
		b.Run(s.name, func(b *testing.B) {
			marshal := func(v any) ([]byte, error) { return MsgPack().Marshal(nil, v) }
			if s.struct_ {
				marshal = func(v any) ([]byte, error) { return MsgPackArray().Marshal(nil, v) }
			}
			var samples [][]byte
			for _, v := range s.train {
				p, err := marshal(v)
				if err != nil {
					b.Fatal(err)
				}
				samples = append(samples, p)
			}
			fields := Fields{Schema: Fingerprint(reflect.TypeOf(s.test[0]), "msgpack"), HasSchema: true, Written: time.Now()}
			schemes := []corpusScheme{kuraCorpusScheme("kura-compact", pairedCodec(b, nil), fields)}
			for _, size := range []int{16 << 10, 64 << 10} {
				d, _, err := TrainS2Dictionary(samples, size)
				if err != nil {
					b.Fatal(err)
				}
				name := "kura-compact-s2-dict16K"
				if size == 64<<10 {
					name = "kura-compact-s2-dict64K"
				}
				schemes = append(schemes, kuraCorpusScheme(name, pairedCodec(b, d), fields))
			}
			seedEnc := encodeAll(b, seedScheme, s.test)
			seedStored := 0
			for _, e := range seedEnc {
				seedStored += len(e)
			}
			for _, sc := range schemes {
				enc := encodeAll(b, sc, s.test)
				stored := 0
				for _, e := range enc {
					stored += len(e)
				}
				b.Run(sc.name+"/encode", func(b *testing.B) {
					var d1, d2 []byte
					pairLoop(b, len(s.test), func(i int) {
						var err error
						if d1, err = seedScheme.encode(d1[:0], s.test[i]); err != nil {
							b.Fatal(err)
						}
					}, func(i int) {
						var err error
						if d2, err = sc.encode(d2[:0], s.test[i]); err != nil {
							b.Fatal(err)
						}
					})
					b.ReportMetric(float64(stored)/float64(len(enc)), "B/value")
					b.ReportMetric(float64(stored)/float64(seedStored), "bytes-vs-m+s")
				})
				b.Run(sc.name+"/decode", func(b *testing.B) {
					pairLoop(b, len(s.test), func(i int) {
						if err := seedScheme.decode(seedEnc[i], s.fresh()); err != nil {
							b.Fatal(err)
						}
					}, func(i int) {
						if err := sc.decode(enc[i], s.fresh()); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
		})
	}
}

// pairedCodec is a compact Codec, with S2 dictionary d when it is not nil.
func pairedCodec(b *testing.B, d []byte) *Codec {
	o := Options{Compact: true}
	if d != nil {
		o.MinCompressSize = -1
	}
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

// encodeAll encodes every value of vals with sc.
func encodeAll(b *testing.B, sc corpusScheme, vals []any) [][]byte {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		e, err := sc.encode(nil, v)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = e
	}
	return out
}

// pairLoop runs seed(i) and kura(i) on value i of n in turn, the first
// alternating, and reports the ratio of their summed times.
func pairLoop(b *testing.B, n int, seed, kura func(i int)) {
	var ts, tk time.Duration
	i := 0
	runtime.GC() // the set-up's garbage is neither side's
	for b.Loop() {
		v := i % n
		t0 := time.Now()
		if i%2 == 0 {
			seed(v)
			t1 := time.Now()
			kura(v)
			t2 := time.Now()
			ts, tk = ts+t1.Sub(t0), tk+t2.Sub(t1)
		} else {
			kura(v)
			t1 := time.Now()
			seed(v)
			t2 := time.Now()
			tk, ts = tk+t1.Sub(t0), ts+t2.Sub(t1)
		}
		i++
	}
	if ts > 0 && b.N > 0 {
		b.ReportMetric(float64(tk)/float64(ts), "ratio")
		b.ReportMetric(float64(ts.Nanoseconds())/float64(b.N), "seed-ns/value")
		b.ReportMetric(float64(tk.Nanoseconds())/float64(b.N), "kura-ns/value")
	}
}
