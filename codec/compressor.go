package codec

import (
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Compressor compresses a serialized payload.
//
// Implementations must be safe for concurrent use.
type Compressor interface {
	// ID is the byte stored in the envelope header. 0 means "none"; ids
	// 1..127 are reserved for kura's own compressors, 128..255 are for
	// users.
	ID() byte
	// Name is a short lower-case name for tools and errors ("s2").
	Name() string
	// Compress appends the compressed form of src to dst.
	Compress(dst, src []byte) ([]byte, error)
	// Decompress appends the decompressed form of src to dst. rawLen is
	// the uncompressed length from the header, already checked against
	// the Codec's MaxDecodedSize; an implementation must not produce
	// more than rawLen bytes and should fail if src claims more.
	Decompress(dst, src []byte, rawLen int) ([]byte, error)
}

// Built-in compressor ids (see docs/FORMAT.md).
const (
	IDNone byte = 0
	IDS2   byte = 1 // a Snappy-compatible block, decoded with s2
	IDZstd byte = 2
	// IDS2Dict is an S2 block compressed with a dictionary (named by the
	// envelope's dictionary id). It is not Snappy-compatible, hence its
	// own id.
	IDS2Dict byte = 3
)

var errSizeMismatch = errors.New("decompressed length differs from the header")

// None returns the compressor that stores payloads as they are.
func None() Compressor { return noneCompressor{} }

// S2 returns the default compressor: github.com/klauspost/compress/s2
// writing Snappy-compatible blocks, so the payload is exactly what
// golang/snappy's Encode format is and any Snappy library in any language
// reads it. On the article corpus it is as small as golang/snappy and a
// little faster; S2's own extended block format saved under 0.2% more, not
// worth losing every non-Go reader (docs/benchmarks/codec.md).
func S2() Compressor { return s2Compressor{} }

// S2Better is S2 with s2's "better" Snappy-compatible encoder: about 8%
// fewer bytes than S2 on the article corpus for about 1.6x its compression
// time; decoding is as fast. Same id as S2: readers cannot tell them apart.
func S2Better() Compressor { return s2Compressor{better: true} }

// Zstd returns a Zstandard compressor at the given level, on the zstd
// scale 1..22 (mapped to the nearest klauspost/compress/zstd level:
// 1 fastest, 3 default, 7 better, 11+ best). Level 0 means 3.
// Encoders and decoders are pooled per level.
//
// To compress with a trained dictionary, put it in Options.Dictionaries and
// name it in Options.Dictionary.
func Zstd(level int) Compressor {
	if level <= 0 {
		level = 3
	}
	return &zstdCompressor{level: zstd.EncoderLevelFromZstd(level), zlevel: level}
}

var (
	_ Compressor = noneCompressor{}
	_ Compressor = s2Compressor{}
	_ Compressor = (*zstdCompressor)(nil)
)

type noneCompressor struct{}

func (noneCompressor) ID() byte     { return IDNone }
func (noneCompressor) Name() string { return "none" }
func (noneCompressor) Compress(dst, src []byte) ([]byte, error) {
	return append(dst, src...), nil
}

func (noneCompressor) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	if len(src) != rawLen {
		return dst, errSizeMismatch
	}
	return append(dst, src...), nil
}

type s2Compressor struct{ better bool }

func (c s2Compressor) ID() byte { return IDS2 }

func (c s2Compressor) Name() string {
	if c.better {
		return "s2-better"
	}
	return "s2"
}

// smallBoth is the payload size under which the compact envelope's S2
// tries both Snappy-compatible S2 encoders and kura's own (snappyEncoder)
// and keeps the smallest block: on a few hundred bytes of text any of
// them can lose by 5-10%, and all three together cost about 3 µs.
const smallBoth = 1 << 10

// compressSmallest is Compress with the three Snappy-compatible encoders
// for payloads under smallBoth (the compact envelope's S2).
func (c s2Compressor) compressSmallest(dst, src []byte) ([]byte, error) {
	out, err := c.Compress(dst, src)
	if err != nil || len(src) >= smallBoth {
		return out, err
	}
	other := s2Compressor{better: !c.better}
	var buf [2 * smallBoth]byte
	alt, err := other.Compress(buf[:0], src)
	if err == nil && len(alt) < len(out)-len(dst) {
		out = append(out[:len(dst)], alt...)
	}
	if alt = snappyEncoder.encode(buf[:0], src); len(alt) < len(out)-len(dst) {
		out = append(out[:len(dst)], alt...)
	}
	return out, nil
}

func (c s2Compressor) Compress(dst, src []byte) ([]byte, error) {
	n := s2.MaxEncodedLen(len(src))
	if n < 0 {
		return dst, fmt.Errorf("s2: input of %d bytes too large", len(src))
	}
	dst = grow(dst, n)
	var out []byte
	if c.better {
		out = s2.EncodeSnappyBetter(dst[len(dst):len(dst)+n], src)
	} else {
		out = s2.EncodeSnappy(dst[len(dst):len(dst)+n], src)
	}
	return dst[:len(dst)+len(out)], nil
}

// Decompress reads Snappy blocks, and S2's extended blocks too.
func (s2Compressor) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n != rawLen {
		return dst, errSizeMismatch
	}
	dst = grow(dst, n)
	out, err := s2.Decode(dst[len(dst):len(dst)+n], src)
	if err != nil {
		return dst, err
	}
	return dst[:len(dst)+len(out)], nil
}

// grow returns dst with room for n more bytes, keeping its contents.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	b := make([]byte, len(dst), len(dst)+n)
	copy(b, dst)
	return b
}

type zstdCompressor struct {
	level  zstd.EncoderLevel
	zlevel int

	// dictID and dict are set on the copy New makes for
	// Options.Dictionary; zero for the plain compressor.
	dictID uint32
	dict   []byte

	encOnce sync.Once
	enc     *zstd.Encoder
	encErr  error
}

func (c *zstdCompressor) ID() byte { return IDZstd }
func (c *zstdCompressor) Name() string {
	if c.dictID != 0 {
		return fmt.Sprintf("zstd-%d+dict%d", c.zlevel, c.dictID)
	}
	return fmt.Sprintf("zstd-%d", c.zlevel)
}

// encoder returns the shared encoder. zstd.Encoder.EncodeAll is safe for
// concurrent use and keeps its own pool of block encoders, so one per
// compressor is the pool.
func (c *zstdCompressor) encoder() (*zstd.Encoder, error) {
	c.encOnce.Do(func() {
		opts := []zstd.EOption{
			zstd.WithEncoderLevel(c.level),
			zstd.WithEncoderCRC(false), // the envelope checks the length; 4 bytes a value matter
			zstd.WithZeroFrames(true),
			zstd.WithEncoderConcurrency(0),
		}
		if c.dictID != 0 {
			if isZstdDict(c.dict) {
				opts = append(opts, zstd.WithEncoderDict(c.dict))
			} else {
				// Id 0: the frame names no dictionary (the envelope
				// does), which saves up to 4 bytes a value.
				opts = append(opts, zstd.WithEncoderDictRaw(0, c.dict))
			}
		}
		c.enc, c.encErr = zstd.NewWriter(nil, opts...)
	})
	return c.enc, c.encErr
}

func (c *zstdCompressor) Compress(dst, src []byte) ([]byte, error) {
	enc, err := c.encoder()
	if err != nil {
		return dst, err
	}
	return enc.EncodeAll(src, dst), nil
}

// Decompress handles frames without a dictionary. Frames with one are
// decoded by the Codec, which knows its dictionaries.
func (c *zstdCompressor) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	dec, err := plainZstdDecoder()
	if err != nil {
		return dst, err
	}
	return zstdDecode(dec, dst, src, rawLen)
}

// zstdSlack is the room past the value's end that lets the zstd decoder
// use its fast copy loops, which read and write up to 16 bytes beyond the
// current match (klauspost/compress/zstd's compressedBlockOverAlloc). With
// a buffer of exactly rawLen bytes it falls back to bounds-exact copies.
const zstdSlack = 16

// zstdDecode decodes one frame into dst without ever growing past rawLen
// (+zstdSlack) bytes, whatever the frame claims.
//
// The returned slice keeps dst's full capacity: DecodeAll hands back a
// slice capped at what it was allowed to write, and returning that would
// shrink the caller's pooled scratch buffer to this value's size, so the
// next larger value would allocate a new one (9 KB a decode on the
// article corpus).
func zstdDecode(dec *zstd.Decoder, dst, src []byte, rawLen int) ([]byte, error) {
	var fh zstd.Header
	if err := fh.Decode(src); err != nil {
		return dst, err
	}
	if fh.HasFCS && fh.FrameContentSize != uint64(rawLen) {
		return dst, errSizeMismatch
	}
	dst = grow(dst, rawLen+zstdSlack)
	start := len(dst)
	// The decoder is built with WithDecodeAllCapLimit, so the capacity
	// bound is the bomb guard even when the frame has no content size.
	out, err := dec.DecodeAll(src, dst[:start:start+rawLen+zstdSlack])
	if err != nil {
		return dst, err
	}
	if len(out)-start != rawLen {
		return dst, errSizeMismatch
	}
	res := dst[:start+rawLen]
	if rawLen > 0 && &out[start] != &res[start] {
		// Not reachable with the cap limit (the decoder fails rather than
		// reallocate), but never hand back bytes that are not the value.
		copy(res[start:], out[start:])
	}
	return res, nil
}

var plainZstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderLowmem(false),
	)
})

// isZstdDict reports whether d is in the zstd dictionary format (magic
// 0xEC30A437), as dict.BuildZstdDict and `zstd --train` write it.
func isZstdDict(d []byte) bool {
	return len(d) >= 8 && d[0] == 0x37 && d[1] == 0xA4 && d[2] == 0x30 && d[3] == 0xEC
}

// zstdDictID returns the id embedded in a zstd-format dictionary.
func zstdDictID(d []byte) uint32 {
	return uint32(d[4]) | uint32(d[5])<<8 | uint32(d[6])<<16 | uint32(d[7])<<24
}

// s2DictCompressor is S2 with a dictionary. Without one (the instance New
// registers so that Decode knows the id) it only reports that values with
// this id need their dictionary.
type s2DictCompressor struct {
	better bool
	id     uint32
	dict   *s2.Dict
	fast   *s2DictEncoder // Compress's encoder for values up to s2DictFastMax bytes (not better)
}

var errNeedsDictionary = errors.New("s2-dict: value names no dictionary")

func (c *s2DictCompressor) ID() byte { return IDS2Dict }

func (c *s2DictCompressor) Name() string {
	n := "s2-dict"
	if c.better {
		n = "s2-better-dict"
	}
	if c.id != 0 {
		n += fmt.Sprintf("%d", c.id)
	}
	return n
}

func (c *s2DictCompressor) Compress(dst, src []byte) ([]byte, error) {
	if c.dict == nil {
		return dst, errNeedsDictionary
	}
	n := s2.MaxEncodedLen(len(src))
	if n < 0 {
		return dst, fmt.Errorf("s2: input of %d bytes too large", len(src))
	}
	if c.fast != nil && len(src) <= s2DictFastMax {
		return c.fast.encode(dst, src), nil
	}
	dst = grow(dst, n)
	var out []byte
	if c.better {
		out = c.dict.EncodeBetter(dst[len(dst):len(dst)+n], src)
	} else {
		out = c.dict.Encode(dst[len(dst):len(dst)+n], src)
	}
	return dst[:len(dst)+len(out)], nil
}

// Decompress is reached only for a value without a dictionary id, which
// no writer produces: the Codec decodes values with one through
// s2DictDecode.
func (c *s2DictCompressor) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	if c.dict == nil {
		return dst, errNeedsDictionary
	}
	return s2DictDecode(c.dict, dst, src, rawLen)
}

// s2DictDecode decodes an S2 block made with dictionary d into dst,
// checking the block's length against rawLen before writing anything.
func s2DictDecode(d *s2.Dict, dst, src []byte, rawLen int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return dst, err
	}
	if n != rawLen {
		return dst, errSizeMismatch
	}
	dst = grow(dst, n)
	out, err := d.Decode(dst[len(dst):len(dst)+n], src)
	if err != nil {
		return dst, err
	}
	if len(out) != n {
		return dst, errSizeMismatch
	}
	return dst[:len(dst)+n], nil
}
