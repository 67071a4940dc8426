package codec

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/kuracache/kura/internal/harness/corpus"
)

// ratioAllocBomb is a compressed msgpack value that passes every
// per-stage limit (the zstd ratio stays under MaxRatio thanks to a block
// of random bytes; the payload's allocation estimate stays under 64x the
// payload) but whose decode into []any allocated 6,400 times its stored
// size: 86 KB under a key cost every reader 528 MiB and seconds of CPU.
func ratioAllocBomb(t testing.TB, zeros int) []byte {
	t.Helper()
	rnd := make([]byte, zeros/200)
	x := uint32(7)
	for i := range rnd {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		rnd[i] = byte(x)
	}
	p := []byte{0xDD}
	p = binary.BigEndian.AppendUint32(p, uint32(zeros+1))
	p = append(p, 0xC6)
	p = binary.BigEndian.AppendUint32(p, uint32(len(rnd)))
	p = append(p, rnd...)
	p = append(p, make([]byte, zeros)...)
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	return append(AppendHeader(nil, Header{Serializer: IDMsgPack, Compressor: IDZstd, RawLen: len(p)}), zw.EncodeAll(p, nil)...)
}

// TestCompressedAllocBound: the allocation bound holds against the bytes
// stored, not only against the decompressed payload: one Decode of n
// stored bytes allocates at most AllocBound(n) plus the decompression
// buffer, whatever the compression ratio.
func TestCompressedAllocBound(t *testing.T) {
	c, _ := New(Options{})
	b := ratioAllocBomb(t, 4<<20)
	for _, dst := range []func() any{func() any { return new([]any) }, func() any { return new(any) }, func() any { return new([]int) }} {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, err := c.Decode(b, dst())
		runtime.ReadMemStats(&m1)
		alloc := m1.TotalAlloc - m0.TotalAlloc
		// The decompression buffer (the payload, under MaxRatio) is the
		// one cost allowed beyond AllocBound.
		if bound := AllocBound(len(b)) + 2*uint64(4<<20); alloc > bound {
			t.Errorf("%d stored bytes into %T: allocated %d, bound %d (err %v)", len(b), dst(), alloc, bound, err)
		}
		if !errors.Is(err, ErrBomb) {
			t.Errorf("into %T: %v, want ErrBomb", dst(), err)
		}
		if _, err := c.DecodeStrict(b, dst()); !errors.Is(err, ErrBomb) {
			t.Errorf("DecodeStrict into %T: %v, want ErrBomb", dst(), err)
		}
	}
}

// TestEncodeNeverWritesWhatReadersRefuse: an honest value that compresses
// so well that its decode would exceed the bound of its compressed size
// (a long list of small numbers under zstd) is stored uncompressed, so
// readers decode it.
func TestEncodeNeverWritesWhatReadersRefuse(t *testing.T) {
	c, err := New(Options{Compressor: Zstd(3)})
	if err != nil {
		t.Fatal(err)
	}
	v := make([]int, 1<<20)
	for i := range v {
		v[i] = i % 7
	}
	b, h, err := c.Encode(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	if _, err := c.Decode(b, &out); err != nil || len(out) != len(v) {
		t.Fatalf("readers refuse what Encode wrote (%d bytes, compressor %d): %v", len(b), h.Compressor, err)
	}
	// Realistic records (inventory rows, articles) are still compressed,
	// by S2 and by zstd.
	for _, comp := range []Compressor{S2(), Zstd(3)} {
		cc, _ := New(Options{Compressor: comp})
		for _, v := range []any{corpus.Inventory(1, 1, 1000), corpus.Articles(1, 20)} {
			b, h, err := cc.Encode(nil, v)
			if err != nil || h.Compressor == IDNone {
				t.Fatalf("%s: an honest %T of %d bytes was not compressed: %+v, %v", comp.Name(), v, h.RawLen, h, err)
			}
			var back any
			if _, err := cc.Decode(b, &back); err != nil {
				t.Fatalf("%s: %T does not decode into any: %v", comp.Name(), v, err)
			}
		}
	}
}

// TestCompressedJSONAllocBound: the same bound for JSON, which every
// reader decodes whatever its own serializer (the header names it): a
// zstd-compressed JSON array of millions of small numbers made a reader
// allocate hundreds of times the stored bytes.
func TestCompressedJSONAllocBound(t *testing.T) {
	c, _ := New(Options{})
	rnd := make([]byte, 40<<10) // random letters keep the zstd ratio under MaxRatio
	x := uint32(9)
	for i := range rnd {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		rnd[i] = 'a' + byte(x%26)
	}
	p := []byte(`["` + string(rnd) + `"`)
	for range 2 << 20 {
		p = append(p, ",1"...)
	}
	p = append(p, ']')
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := append(AppendHeader(nil, Header{Serializer: IDJSON, Compressor: IDZstd, RawLen: len(p)}), zw.EncodeAll(p, nil)...)
	for _, dst := range []func() any{func() any { return new([]any) }, func() any { return new(any) }} {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, err := c.Decode(b, dst())
		runtime.ReadMemStats(&m1)
		alloc := m1.TotalAlloc - m0.TotalAlloc
		if bound := AllocBound(len(b)) + 2*uint64(len(p)); alloc > bound {
			t.Errorf("%d stored bytes of JSON into %T: allocated %d, bound %d (err %v)", len(b), dst(), alloc, bound, err)
		}
		if !errors.Is(err, ErrBomb) {
			t.Errorf("JSON into %T: %v, want ErrBomb", dst(), err)
		}
	}
	// Honest JSON still compresses and decodes.
	jc, _ := New(Options{Serializer: JSON(), Compressor: Zstd(3)})
	for _, v := range []any{corpus.Inventory(1, 1, 1000), corpus.Articles(1, 20)} {
		b, h, err := jc.Encode(nil, v)
		if err != nil || h.Compressor == IDNone {
			t.Fatalf("honest JSON %T was not compressed: %+v, %v", v, h, err)
		}
		var back any
		if _, err := jc.Decode(b, &back); err != nil {
			t.Fatalf("honest JSON %T does not decode: %v", v, err)
		}
	}
}
