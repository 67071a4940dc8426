package codec

import (
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/s2"
	"github.com/vmihailenco/msgpack/v5"
)

// BenchmarkDictSteps splits the encode and decode of the compact envelope
// with a trained S2 dictionary (kura-compact-s2-dict64K of
// BenchmarkCorpusPaired) into its steps, next to msgpack+snappy's two, so
// that a ratio above 1.0x can be charged to the step that costs it. Each
// sub-benchmark loops over the measured half of one data set; ns/op is
// per value, and thread-ns/op the loop's own thread's CPU time per value
// (what a loaded machine's other processes do not inflate; a collection
// the loop's garbage starts on another thread is not in it).
//
//	go test ./codec -run '^$' -bench 'DictSteps/(articles|redis-commands)/' -benchtime 2000x
func BenchmarkDictSteps(b *testing.B) {
	for _, s := range corpusSets(b) {
		b.Run(s.name, func(b *testing.B) {
			ser := MsgPack()
			if s.struct_ {
				ser = MsgPackArray()
			}
			var samples [][]byte
			for _, v := range s.train {
				p, err := ser.Marshal(nil, v)
				if err != nil {
					b.Fatal(err)
				}
				samples = append(samples, p)
			}
			d, _, err := TrainS2Dictionary(samples, 64<<10)
			if err != nil {
				b.Fatal(err)
			}
			c := pairedCodec(b, d)
			sd := s2.NewDict(d)
			fast := newS2DictEncoder(sd)
			fields := Fields{Schema: Fingerprint(reflect.TypeOf(s.test[0]), "msgpack"), HasSchema: true, Written: time.Now()}
			n := len(s.test)
			seedRaw, kuraRaw, seedBlk, kuraBlk, entries := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
			for i, v := range s.test {
				if seedRaw[i], err = msgpack.Marshal(v); err != nil {
					b.Fatal(err)
				}
				seedBlk[i] = snappy.Encode(nil, seedRaw[i])
				if kuraRaw[i], err = ser.Marshal(nil, v); err != nil {
					b.Fatal(err)
				}
				kuraBlk[i] = fast.encode(nil, kuraRaw[i])
				if entries[i], _, err = c.EncodeWith(nil, v, fields); err != nil {
					b.Fatal(err)
				}
			}
			loop := func(name string, f func(i int)) {
				b.Run(name, func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					i := 0
					t0 := threadCPU()
					for b.Loop() {
						f(i % n)
						i++
					}
					b.ReportMetric(float64(threadCPU()-t0)/float64(b.N), "thread-ns/op")
				})
			}
			var buf []byte
			loop("seed/marshal", func(i int) { buf, _ = msgpack.Marshal(s.test[i]) })
			loop("seed/snappy", func(i int) { buf = snappy.Encode(buf[:cap(buf)], seedRaw[i]) })
			loop("kura/marshal", func(i int) { buf, _ = ser.Marshal(buf[:0], s.test[i]) })
			// The compressors also report the bytes of their blocks.
			block := func(name string, enc func(dst, src []byte) []byte) {
				total := 0
				for i := range n {
					total += len(enc(nil, kuraRaw[i]))
				}
				b.Run(name, func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					i := 0
					t0 := threadCPU()
					for b.Loop() {
						buf = enc(buf[:0], kuraRaw[i%n])
						i++
					}
					b.ReportMetric(float64(threadCPU()-t0)/float64(b.N), "thread-ns/op")
					b.ReportMetric(float64(total)/float64(n), "B/value")
				})
			}
			block("kura/s2dict", fast.encode)
			block("kura/s2dict-lib", func(dst, src []byte) []byte { return sd.Encode(dst[:cap(dst)], src) })
			block("kura/s2dict-lib-better", func(dst, src []byte) []byte { return sd.EncodeBetter(dst[:cap(dst)], src) })
			block("kura/s2-snappy", func(dst, src []byte) []byte { return s2.EncodeSnappy(dst[:cap(dst)], src) })
			loop("kura/readable", func(i int) { readable(ser, kuraRaw[i], len(entries[i])) })
			loop("kura/encode", func(i int) { buf, _, _ = c.EncodeWith(buf[:0], s.test[i], fields) })
			loop("seed/unsnappy", func(i int) { buf, _ = snappy.Decode(buf[:cap(buf)], seedBlk[i]) })
			loop("seed/unmarshal", func(i int) { _ = msgpack.Unmarshal(seedRaw[i], s.fresh()) })
			loop("kura/s2dict-decode", func(i int) { buf, _ = s2DictDecode(sd, buf[:0], kuraBlk[i], len(kuraRaw[i])) })
			loop("kura/unmarshal", func(i int) { _ = ser.Unmarshal(kuraRaw[i], s.fresh()) })
			loop("kura/decode", func(i int) { _, _ = c.DecodeSchema(entries[i], s.fresh(), fields.Schema) })
		})
	}
}
