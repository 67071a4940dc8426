package codec

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/s2"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/vmihailenco/msgpack/v5"
)

// s2DictTestDict trains an S2 dictionary on generated articles' and
// inventories' msgpack: a dictionary with real matches for the inputs
// below.
func s2DictTestDict(t testing.TB) *s2.Dict {
	t.Helper()
	var samples [][]byte
	for _, a := range corpus.Articles(7, 8) {
		p, _ := msgpack.Marshal(a)
		samples = append(samples, p)
	}
	for _, it := range corpus.Inventory(7, 1, 200) {
		p, _ := msgpack.Marshal(it)
		samples = append(samples, p)
	}
	d, _, err := TrainS2Dictionary(samples, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	sd := s2.NewDict(d)
	if sd == nil {
		t.Fatal("no dictionary")
	}
	return sd
}

// checkS2DictRoundTrip encodes src with the fast encoder and decodes it
// with klauspost's decoder (the one every Go reader uses).
func checkS2DictRoundTrip(t testing.TB, e *s2DictEncoder, sd *s2.Dict, src []byte) []byte {
	t.Helper()
	prefix := []byte("prefix")
	out := e.encode(append([]byte(nil), prefix...), src)
	if !bytes.Equal(out[:len(prefix)], prefix) {
		t.Fatal("encode changed dst's bytes")
	}
	block := out[len(prefix):]
	got, err := sd.Decode(nil, block)
	if err != nil {
		t.Fatalf("decode of %d bytes: %v", len(src), err)
	}
	if !bytes.Equal(got, src) {
		t.Fatalf("round trip of %d bytes differs", len(src))
	}
	if len(block) > s2.MaxEncodedLen(len(src)) {
		t.Fatalf("block of %d bytes for %d input bytes", len(block), len(src))
	}
	return block
}

func TestS2DictEncoderRoundTrip(t *testing.T) {
	sd := s2DictTestDict(t)
	e := newS2DictEncoder(sd)
	if e == nil {
		t.Fatal("no encoder")
	}
	var inputs [][]byte
	for _, it := range corpus.Inventory(99, 2, 50) { // not the training data
		p, _ := msgpack.Marshal(it)
		inputs = append(inputs, p)
	}
	for _, a := range corpus.Articles(99, 4) {
		p, _ := msgpack.Marshal(a)
		inputs = append(inputs, p)
		j, _ := json.Marshal(a)
		inputs = append(inputs, j)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 8, 9, 17, 100, 1000, 65535, 65536} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(4)) // long repeats, overlapping copies
		}
		inputs = append(inputs, b)
		r := make([]byte, n)
		for i := range r {
			r[i] = byte(rng.Uint32())
		}
		inputs = append(inputs, r)
	}
	// The dictionary itself, and runs of it: copies that reach to its end.
	runs := bytes.Repeat(e.dict, 65536/len(e.dict)+1)[:65536]
	inputs = append(inputs, e.dict, runs)
	fastTotal, libTotal := 0, 0
	for _, in := range inputs {
		checkSnappyRoundTrip(t, in)
		fast := checkS2DictRoundTrip(t, e, sd, in)
		if len(in) < 2000 {
			fastTotal += len(fast)
			libTotal += len(sd.Encode(nil, in))
		}
	}
	// Not a speed claim: the encoder must not give up the bytes that make
	// a dictionary worth having.
	if fastTotal > libTotal*105/100 {
		t.Errorf("fast encoder wrote %d bytes for the small inputs, s2.Dict.Encode %d", fastTotal, libTotal)
	}
	t.Logf("small inputs: fast %d bytes, s2.Dict.Encode %d", fastTotal, libTotal)
}

// FuzzS2DictEncoder round-trips what the fast encoder writes through
// klauspost's decoder, and compares with s2.Dict.Encode's decode.
func FuzzS2DictEncoder(f *testing.F) {
	sd := s2DictTestDict(f)
	e := newS2DictEncoder(sd)
	for _, it := range corpus.Inventory(5, 3, 4) {
		p, _ := msgpack.Marshal(it)
		f.Add(p)
	}
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"))
	f.Add(e.dict[len(e.dict)-100:])
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > s2DictEncMax {
			src = src[:s2DictEncMax]
		}
		checkS2DictRoundTrip(t, e, sd, src)
		checkSnappyRoundTrip(t, src)
	})
}

// checkSnappyRoundTrip encodes src with snappyEncoder (no dictionary) and
// decodes it with golang/snappy, a decoder of plain Snappy only: the
// blocks compressor s2 promises any Snappy library reads.
func checkSnappyRoundTrip(t testing.TB, src []byte) {
	t.Helper()
	block := snappyEncoder.encode([]byte("prefix"), src)[len("prefix"):]
	got, err := snappy.Decode(nil, block)
	if err != nil {
		t.Fatalf("golang/snappy decode of %d bytes: %v", len(src), err)
	}
	if !bytes.Equal(got, src) {
		t.Fatalf("snappy round trip of %d bytes differs", len(src))
	}
	if len(block) > s2.MaxEncodedLen(len(src)) {
		t.Fatalf("block of %d bytes for %d input bytes", len(block), len(src))
	}
}

// BenchmarkS2DictEncoder compares the fast encoder with s2.Dict.Encode
// and plain Snappy (s2.EncodeSnappy) on inventory items' msgpack (~250 B):
//
//	go test ./codec -run '^$' -bench S2DictEncoder
func BenchmarkS2DictEncoder(b *testing.B) {
	sd := s2DictTestDict(b)
	e := newS2DictEncoder(sd)
	var inputs [][]byte
	for _, it := range corpus.Inventory(99, 2, 64) {
		p, _ := msgpack.Marshal(it)
		inputs = append(inputs, p)
	}
	dst := make([]byte, 0, 4096)
	for _, c := range []struct {
		name string
		enc  func(dst, src []byte) []byte
	}{
		{"fast", e.encode},
		{"s2.Dict.Encode", sd.Encode},
		{"snappy", s2.EncodeSnappy},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i, n := 0, 0
			cpu := startCPU()
			for b.Loop() {
				out := c.enc(dst[:0], inputs[i%len(inputs)])
				n += len(out)
				i++
			}
			cpu.report(b)
			b.ReportMetric(float64(n)/float64(i), "B/value")
		})
	}
}
