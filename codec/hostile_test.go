package codec

import (
	"bytes"
	"errors"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/kuracache/kura/internal/harness/hexfile"
)

func allocBound(n int) uint64 { return AllocBound(n) }

type withAny struct {
	A any
	M map[string]any
	S []int
	T []string
}

// destinations are the Go types a reader may decode into; the bombs killed
// readers of the first five.
func destinations() map[string]func() any {
	return map[string]func() any{
		"any":               func() any { return new(any) },
		"[]any":             func() any { return new([]any) },
		"[]int":             func() any { return new([]int) },
		"map[string]any":    func() any { return new(map[string]any) },
		"map[string]string": func() any { return new(map[string]string) },
		"struct":            func() any { return new(withAny) },
		"[]string":          func() any { return new([]string) },
		"string":            func() any { return new(string) },
	}
}

// hostileCorpus reads testdata/hostile/*.hex: one envelope per file, hex,
// with # comments.
func hostileCorpus(t testing.TB) map[string][]byte {
	files, err := filepath.Glob("../testdata/hostile/*.hex")
	if err != nil || len(files) == 0 {
		t.Fatalf("no hostile corpus: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := hexfile.Read(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

// generatedBombs are the hostile values too big to check in as hex.
func generatedBombs(t testing.TB) map[string][]byte {
	env := func(ser, comp byte, raw int, payload []byte) []byte {
		return append(AppendHeader(nil, Header{Version: 1, Serializer: ser, Compressor: comp, RawLen: raw}), payload...)
	}
	deep := bytes.Repeat([]byte{0x91}, 1<<20)
	deep = append(deep, 0xc0)
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 64<<20)
	z := enc.EncodeAll(zeros, nil)
	enc.Close()
	tiny := append([]byte{0xdd, 0x00, 0x04, 0x00, 0x00}, bytes.Repeat([]byte{0x81, 0xa0, 0xc0}, 1<<18)...)
	nested := append([]byte{0xdd, 0x00, 0x04, 0x00, 0x00}, bytes.Repeat([]byte{0x81, 0xa0, 0x81, 0xa0, 0x81, 0xa0, 0xc0}, 1<<18)...)
	return map[string][]byte{
		"array of 256Ki one-pair maps (bomb)":       env(IDMsgPack, IDNone, len(tiny), tiny),
		"array of 256Ki 3-level maps (bomb)":        env(IDMsgPack, IDNone, len(nested), nested),
		"1 MiB of nested one-element arrays (bomb)": env(IDMsgPack, IDNone, len(deep), deep),
		"zstd: 64 MiB of zeros (bomb)":              env(IDMsgPack, IDZstd, len(zeros), z),
		"array of 1M empty maps (bomb)":             env(IDMsgPack, IDNone, 5+1<<20, append([]byte{0xdd, 0x00, 0x10, 0x00, 0x00}, bytes.Repeat([]byte{0x80}, 1<<20)...)),
	}
}

// TestHostileValues decodes every hostile value into every destination and
// checks each Decode fails (or succeeds) within the allocation bound. A
// failure here used to be the end of the process, not a test failure.
func TestHostileValues(t *testing.T) {
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	all := hostileCorpus(t)
	for k, v := range generatedBombs(t) {
		all[k] = v
	}
	gc := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(gc)
	for name, b := range all {
		for dname, mk := range destinations() {
			dst := mk()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := c.Decode(b, dst)
			runtime.ReadMemStats(&after)
			used := after.TotalAlloc - before.TotalAlloc
			if used > allocBound(len(b)) {
				t.Errorf("%s into %s: allocated %d bytes for %d input bytes (bound %d); err %v", name, dname, used, len(b), allocBound(len(b)), err)
			}
			if strings.Contains(name, "bomb") && err == nil {
				t.Errorf("%s into %s: decoded without error", name, dname)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("%s into %s: %v does not match ErrMalformed", name, dname, err)
			}
		}
	}
}

// FuzzDecodeBounded: no input makes Decode allocate past the bound or
// crash, whatever the destination.
func FuzzDecodeBounded(f *testing.F) {
	for _, b := range hostileCorpus(f) {
		f.Add(b)
	}
	f.Add([]byte{0xC1, 0x4B, 0x01, 0x01, 0x00, 0x00, 0x03, 0x92, 0x80, 0x90})
	c, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for dname, mk := range destinations() {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _ = c.Decode(b, mk())
			runtime.ReadMemStats(&after)
			if used := after.TotalAlloc - before.TotalAlloc; used > allocBound(len(b)) {
				t.Fatalf("into %s: %d bytes allocated for %d input bytes", dname, used, len(b))
			}
		}
	})
}

// BenchmarkCheckMsgPack is the cost the hostile-input walk adds to every
// msgpack decode, on the generated articles (compare BenchmarkDecode).
func BenchmarkCheckMsgPack(b *testing.B) {
	arts, _ := benchCorpus()
	payloads := make([][]byte, len(arts))
	n := 0
	for i := range arts {
		p, err := MsgPack().Marshal(nil, &arts[i])
		if err != nil {
			b.Fatal(err)
		}
		payloads[i] = p
		n += len(p)
	}
	b.SetBytes(int64(n / len(arts)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := CheckMsgPack(payloads[i%len(payloads)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// msgpackEstimate is checkMsgPack's estimate for b, found by bisecting the
// limit (0 and false if b is not well formed at any limit).
func msgpackEstimate(b []byte) (uint64, bool) {
	hi := uint64(1) << 62
	if checkMsgPack(b, hi) != nil {
		return 0, false
	}
	lo := uint64(0)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if checkMsgPack(b, mid) == nil {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}

// TestMsgPackCostPerByte: the shapes that cost the most per byte stay
// within msgpackMaxCostPerByte, which lets Encode skip readable's walk of
// short payloads.
func TestMsgPackCostPerByte(t *testing.T) {
	maps := func(n int) []byte { // an array of n empty maps
		return append([]byte{0xdd, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, bytes.Repeat([]byte{0x80}, n)...)
	}
	pairs := []byte{0x8f} // 15 pairs of empty maps
	pairs = append(pairs, bytes.Repeat([]byte{0x80}, 30)...)
	nested := bytes.Repeat([]byte{0x81, 0x80}, 200) // maps of one pair whose value is the next map
	nested = append(nested, 0x80)
	worst := uint64(0)
	for name, b := range map[string][]byte{"empty map": {0x80}, "maps": maps(1000), "pairs": pairs, "nested": nested} {
		est, ok := msgpackEstimate(b)
		if !ok {
			t.Fatalf("%s: not well formed", name)
		}
		if est > msgpackMaxCostPerByte*uint64(len(b)) {
			t.Errorf("%s: estimate %d for %d bytes, above %d per byte", name, est, len(b), msgpackMaxCostPerByte)
		}
		worst = max(worst, est/uint64(len(b)))
	}
	if worst < msgpackMaxCostPerByte*9/10 {
		t.Errorf("the costliest shape is %d per byte; the bound %d is loose (skip the walk for longer payloads)", worst, msgpackMaxCostPerByte)
	}
}

// FuzzMsgPackCostPerByte: no well-formed msgpack is estimated above
// msgpackMaxCostPerByte per byte.
func FuzzMsgPackCostPerByte(f *testing.F) {
	for _, b := range hostileCorpus(f) {
		f.Add(b)
	}
	f.Add([]byte{0x8f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80})
	f.Add([]byte{0x92, 0x81, 0x80, 0x80, 0x90})
	f.Fuzz(func(t *testing.T, b []byte) {
		if est, ok := msgpackEstimate(b); ok && est > msgpackMaxCostPerByte*uint64(len(b)) {
			t.Fatalf("estimate %d for %d bytes (% x)", est, len(b), b)
		}
	})
}
