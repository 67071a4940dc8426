package codec

import (
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/vmihailenco/msgpack/v5"
)

// zstdFrames returns article payloads and their zstd frames, of varied
// sizes, as the article corpus has them.
func zstdFrames(t testing.TB) (raws, frames [][]byte) {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(false))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range corpus.Articles(1, 8) {
		raw, err := msgpack.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
		frames = append(frames, enc.EncodeAll(raw, nil))
	}
	return raws, frames
}

// A decode must leave the caller's scratch buffer as large as it was: the
// decoder's cap-limited result once replaced the pooled buffer, so every
// value larger than the previous one allocated a new buffer (the main
// cause of zstd decoding at a fraction of S2's speed end to end).
func TestZstdDecodeKeepsBufferCapacity(t *testing.T) {
	raws, frames := zstdFrames(t)
	z := Zstd(3)
	buf := make([]byte, 0, 64<<10)
	for i := range frames {
		out, err := z.Decompress(buf[:0], frames[i], len(raws[i]))
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != string(raws[i]) {
			t.Fatalf("value %d: decoded bytes differ", i)
		}
		if cap(out) != cap(buf) {
			t.Fatalf("value %d: result capacity %d, want the buffer's %d", i, cap(out), cap(buf))
		}
		buf = out[:0]
	}
	if raceEnabled {
		return
	}
	allocs := testing.AllocsPerRun(50, func() {
		for i := range frames {
			out, err := z.Decompress(buf[:0], frames[i], len(raws[i]))
			if err != nil {
				t.Fatal(err)
			}
			buf = out[:0]
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations decoding %d values into a reused buffer, want 0", allocs, len(frames))
	}
}

// The slack that enables the fast copy loops must not let a frame write
// more than the header's length.
func TestZstdDecodeLengthMismatch(t *testing.T) {
	raws, frames := zstdFrames(t)
	z := Zstd(3)
	for _, n := range []int{len(raws[0]) - 1, len(raws[0]) - zstdSlack, len(raws[0]) + 1} {
		if _, err := z.Decompress(nil, frames[0], n); err == nil {
			t.Fatalf("rawLen %d for a %d-byte frame: no error", n, len(raws[0]))
		}
	}
}
