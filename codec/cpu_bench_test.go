package codec

import (
	"testing"

	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/cputime"
)

// BenchmarkDecodeCPU is BenchmarkDecode/kura measured in CPU time of the
// benchmark's own thread (cpu-ns/op) as well as wall time: on a machine
// shared with other work, wall time also counts the time others held the
// CPU, so only the CPU figure shows a few-percent difference.
func BenchmarkDecodeCPU(b *testing.B) {
	arts, jsonSize := benchCorpus()
	c, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	enc := make([][]byte, len(arts))
	for i := range arts {
		if enc[i], _, err = c.Encode(nil, &arts[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(jsonSize))
	b.ReportAllocs()
	n := 0
	cpu := cputime.Measure(func() {
		for b.Loop() {
			var a corpus.Article
			if _, err := c.Decode(enc[n%len(enc)], &a); err != nil {
				b.Fatal(err)
			}
			n++
		}
	})
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
}
