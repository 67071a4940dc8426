package codec

import (
	"reflect"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/cputime"
)

// BenchmarkDecodeSchema is what a Cache's reader pays for the schema
// check: "match" is the honest path (the entry carries the reader's
// fingerprint: one header parse more than Decode), "no-schema" an entry
// without a fingerprint (written by an older kura: a strict decode), and
// "mismatch" an entry of another type (a strict decode that fails).
// BenchmarkDecode/kura is the same values with Decode alone.
func BenchmarkDecodeSchema(b *testing.B) {
	arts, jsonSize := benchCorpus()
	c, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	fp := c.Fingerprint(reflect.TypeFor[corpus.Article]())
	type other struct{ Headline string }
	for _, v := range []struct {
		name   string
		fields Fields
		into   func() any
	}{
		{"match", Fields{Schema: fp, HasSchema: true, Written: time.Now()}, func() any { return new(corpus.Article) }},
		{"no-schema", Fields{}, func() any { return new(corpus.Article) }},
		{"mismatch", Fields{Schema: fp + 1, HasSchema: true, Written: time.Now()}, func() any { return new(other) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			enc := make([][]byte, len(arts))
			for i := range arts {
				out, _, err := c.EncodeWith(nil, &arts[i], v.fields)
				if err != nil {
					b.Fatal(err)
				}
				enc[i] = out
			}
			b.SetBytes(int64(jsonSize))
			b.ReportAllocs()
			i := 0
			cpu := cputime.Measure(func() {
				for b.Loop() {
					_, err := c.DecodeSchema(enc[i%len(enc)], v.into(), fp)
					if (err != nil) != (v.name == "mismatch") {
						b.Fatal(err)
					}
					i++
				}
			})
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(i), "cpu-ns/op")
		})
	}
}
