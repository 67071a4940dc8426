package codec

import (
	"encoding/binary"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/s2"
)

// s2DictEncoder writes S2 blocks that reach into a dictionary: the same
// block format as klauspost/compress's (*s2.Dict).Encode, which every S2
// dictionary decoder reads (Go's s2.Dict.Decode, the Node package's
// s2Decode), made for the small values a cache holds.
//
// s2.Dict.Encode zeroes a 64 KiB hash table on every call, whatever the
// input's size: 2-4 µs, more than Snappy takes for the whole of a 200-byte
// value (BENCHMARKS.md, issue 24). This encoder builds the dictionary's
// hash table once, sizes the value's own table to the value (cleared
// per call: 512 B for a 200-byte value) and, at each position, takes
// the longer of the match in the value so far and the one in the
// dictionary. It emits literals and Snappy copies only (no S2 repeat
// codes), so a copy never depends on an earlier one's offset.
type s2DictEncoder struct {
	dict  []byte // the dictionary's content (s2.Dict.Bytes without its repeat prefix)
	table []uint16
	long  []uint16 // by an 8-byte hash: the dictionary's long matches
	// snappy makes the encoder write Snappy-compatible blocks (no S2
	// repeat codes); it is set only without a dictionary (snappyEncoder).
	snappy bool
}

// snappyEncoder is the encoder without a dictionary, writing plain
// Snappy blocks (compressor s2's promise: any Snappy library decodes
// them): the compact envelope's third try on values under smallBoth,
// where its long-match search finds what S2's two Snappy-compatible
// encoders miss on some text.
var snappyEncoder = &s2DictEncoder{snappy: true}

const (
	// s2DictTableBits sizes the dictionary's hash tables (2^15 two-byte
	// entries each, 64 KiB, built once per dictionary).
	s2DictTableBits = 15
	// s2SrcTableMaxBits bounds the value's own tables (2^14 entries).
	s2SrcTableMaxBits = 14
	// s2DictFastMax is the largest value the encoder takes; from this
	// size on, values go to s2.Dict.Encode. Its search tries fewer
	// candidates (one table of 6-byte hashes for the value, one for the
	// dictionary) and takes about 2.3x less time per byte than this
	// encoder's, for 4-11% more bytes on the documents of the public
	// data sets (BENCHMARKS.md, "Dictionaries, fifth pass"); the 64 KiB
	// table it clears on every call is paid back from about 1 KiB. Under
	// 2 KiB the bytes weigh more (a value's header is a larger share,
	// and the 0.65x target is within a few percent on small records),
	// so this encoder keeps them.
	s2DictFastMax = 2<<10 - 1
	// s2DictEncMax is the largest value encode is correct for: its
	// tables hold 16-bit positions.
	s2DictEncMax = 64 << 10
	// s2MinBlock is the size under which a block is one literal.
	s2MinBlock = 8
	// s2SkipShift sets how fast the search skips ahead through bytes that
	// match nothing: one more byte per 2^s2SkipShift unmatched ones.
	s2SkipShift = 5
)

// newS2DictEncoder returns the encoder for d (nil when d has no
// content).
func newS2DictEncoder(d *s2.Dict) *s2DictEncoder {
	b := d.Bytes()
	_, n := binary.Uvarint(b) // the repeat offset; the content follows
	if n <= 0 || len(b)-n < 8 {
		return nil
	}
	e := &s2DictEncoder{dict: b[n:], table: make([]uint16, 1<<s2DictTableBits), long: make([]uint16, 1<<s2DictTableBits)}
	// Later positions overwrite earlier ones: nearer the dictionary's
	// end, which the trainer fills with the most common strings.
	for i := 0; i+4 <= len(e.dict); i++ {
		e.table[hash4(load32(e.dict, i), s2DictTableBits)] = uint16(i)
	}
	for i := 0; i+8 <= len(e.dict); i++ {
		e.long[hash8(load64(e.dict, i), s2DictTableBits)] = uint16(i)
	}
	return e
}

// srcTables holds a value's short and long hash tables.
type srcTables struct {
	short, long [1 << s2SrcTableMaxBits]uint16
}

var srcTablePool = sync.Pool{New: func() any { return new(srcTables) }}

func load32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }

func load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

// The multipliers of hash4 and hash8.
const (
	hash4Mul = 0x9E3779B1
	hash8Mul = 0xCF1BBCDCB7A56463
)

func hash4(u uint32, tableBits uint) uint32 { return (u * hash4Mul) >> (32 - tableBits) }

func hash8(u uint64, tableBits uint) uint32 {
	return uint32((u * hash8Mul) >> (64 - tableBits))
}

// encode appends the block of src to dst. src must be at most
// s2DictEncMax bytes.
//
// At each position it looks up four candidates, the last position with
// the same 4-byte and the same 8-byte hash in the value so far and in the
// dictionary, and takes the longest match (extended backwards over
// unemitted bytes). The 8-byte tables keep the positions of long matches
// that short hashes of common 4-byte strings (msgpack's headers of short
// keys) would overwrite: nested documents repeat long runs of keys.
func (e *s2DictEncoder) encode(dst, src []byte) []byte {
	n := len(src)
	dst = grow(dst, s2.MaxEncodedLen(n))
	dst = binary.AppendUvarint(dst, uint64(n))
	if n < s2MinBlock {
		return appendLiteral(dst, src)
	}
	tableBits := uint(bits.Len(uint(n)))
	tableBits = min(max(tableBits, 8), s2SrcTableMaxBits)
	tp := srcTablePool.Get().(*srcTables)
	short, long := tp.short[:1<<tableBits], tp.long[:1<<tableBits]
	clear(short)
	clear(long)

	d, dl := e.dict, len(e.dict)
	dlong, dshort := e.long, e.table
	// One multiply per hash serves both tables (the value's, sized to
	// it, and the dictionary's): hash4 and hash8 keep the top bits.
	const dshift4, dshift8 = 32 - s2DictTableBits, 64 - s2DictTableBits
	shift4, shift8 := 32-tableBits, 64-tableBits
	lit := 0     // the first byte not yet emitted
	i := 0       // the position searched
	lastOff := 0 // the offset of the last copy (0: none yet)
	last := n - 8
	for i <= last {
		cur64 := load64(src, i)
		cur := uint32(cur64)
		p4, p8 := cur*hash4Mul, cur64*hash8Mul
		hs, hl := p4>>shift4, p8>>shift8
		// Positions are stored +1 so that 0 means none.
		cs, cl := int(short[hs])-1, int(long[hl])-1
		short[hs], long[hl] = uint16(i+1), uint16(i+1)
		inDict := dl > 0 && i <= s2.MaxDictSrcOffset-8
		// bestPos is the match's start in the value, or (bestDict) in
		// the dictionary.
		bestLen, bestOff, bestPos, bestDict := 0, 0, 0, false
		// The last copy's offset first: a repeat code costs 2-3 bytes
		// (S2's extension of Snappy), and records of one shape repeat at
		// one distance.
		if lastOff > 0 {
			if p := i - lastOff; p >= 0 {
				if load32(src, p) == cur {
					bestLen, bestOff, bestPos = 4+matchLen(src[p+4:], src[i+4:]), lastOff, p
				}
			} else if p += dl; inDict && p >= 0 && p+4 <= dl && load32(d, p) == cur {
				bestLen, bestOff, bestPos, bestDict = 4+matchLen(d[p+4:], src[i+4:]), lastOff, p, true
			}
		}
		// A repeat of 16 bytes or more is taken as is; otherwise look
		// for longer: the value's own tables (shorter offsets) win ties.
		if bestLen < 16 {
			if cl >= 0 && load32(src, cl) == cur {
				if l := 4 + matchLen(src[cl+4:], src[i+4:]); l > bestLen {
					bestLen, bestOff, bestPos, bestDict = l, i-cl, cl, false
				}
			}
			if cs >= 0 && cs != cl && load32(src, cs) == cur {
				if l := 4 + matchLen(src[cs+4:], src[i+4:]); l > bestLen {
					bestLen, bestOff, bestPos, bestDict = l, i-cs, cs, false
				}
			}
			if inDict && bestLen < 16 {
				dc := int(dlong[p8>>dshift8])
				if dc+8 <= dl && load32(d, dc) == cur {
					if l := 4 + matchLen(d[dc+4:], src[i+4:]); l > bestLen {
						bestLen, bestOff, bestPos, bestDict = l, dl+i-dc, dc, true
					}
				}
				if bestLen < 8 {
					dc = int(dshort[p4>>dshift4])
					if dc+4 <= dl && load32(d, dc) == cur {
						if l := 4 + matchLen(d[dc+4:], src[i+4:]); l > bestLen {
							bestLen, bestOff, bestPos, bestDict = l, dl+i-dc, dc, true
						}
					}
				}
			}
		}
		if bestLen == 0 {
			i += 1 + (i-lit)>>s2SkipShift
			continue
		}
		// Extend the match backwards over bytes not yet emitted.
		start := i
		if bestDict {
			for start > lit && bestPos > 0 && d[bestPos-1] == src[start-1] {
				start, bestPos = start-1, bestPos-1
			}
		} else {
			for start > lit && bestPos > 0 && src[bestPos-1] == src[start-1] {
				start, bestPos = start-1, bestPos-1
			}
		}
		bestLen += i - start
		if lit < start {
			dst = appendLiteral(dst, src[lit:start])
		}
		switch {
		case e.snappy:
			dst = appendSnappyCopy(dst, bestOff, bestLen)
		case bestOff == lastOff:
			dst = appendRepeat(dst, bestOff, bestLen)
		default:
			dst = appendCopy(dst, bestOff, bestLen)
		}
		lastOff = bestOff
		// Index a few positions inside the match, as S2's better
		// encoder does: the next value with this run finds it whole.
		end := start + bestLen
		for _, p := range [...]int{start + 1, end - 2} {
			if p > i && p <= last {
				v := load64(src, p)
				short[hash4(uint32(v), tableBits)] = uint16(p + 1)
				long[hash8(v, tableBits)] = uint16(p + 1)
			}
		}
		i = end
		lit = i
	}
	srcTablePool.Put(tp)
	if lit < n {
		dst = appendLiteral(dst, src[lit:])
	}
	return dst
}

// matchLen is the length of the common prefix of a and b.
func matchLen(a, b []byte) int {
	n := 0
	for len(a) >= 8 && len(b) >= 8 {
		if x := binary.LittleEndian.Uint64(a) ^ binary.LittleEndian.Uint64(b); x != 0 {
			return n + bits.TrailingZeros64(x)>>3
		}
		a, b, n = a[8:], b[8:], n+8
	}
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b, n = a[1:], b[1:], n+1
	}
	return n
}

// appendLiteral appends a literal element of lit (1 or more bytes).
func appendLiteral(dst, lit []byte) []byte {
	if len(lit) == 0 {
		return dst
	}
	n := uint32(len(lit) - 1)
	switch {
	case n < 60:
		dst = append(dst, byte(n)<<2)
	case n < 1<<8:
		dst = append(dst, 60<<2, byte(n))
	case n < 1<<16:
		dst = append(dst, 61<<2, byte(n), byte(n>>8))
	case n < 1<<24:
		dst = append(dst, 62<<2, byte(n), byte(n>>8), byte(n>>16))
	default:
		dst = append(dst, 63<<2, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	}
	return append(dst, lit...)
}

// appendCopy appends the copy elements of length bytes (4 or more) at
// offset (1 or more; beyond the output so far, into the dictionary), as
// S2's emitCopy: a long copy is one copy element and a repeat.
func appendCopy(dst []byte, offset, length int) []byte {
	if offset >= 1<<16 {
		if length > 64 {
			dst = append(dst, 63<<2|3, byte(offset), byte(offset>>8), byte(offset>>16), byte(offset>>24))
			length -= 64
			if length >= 4 {
				return appendRepeat(dst, offset, length)
			}
		}
		if length == 0 {
			return dst
		}
		return append(dst, byte(length-1)<<2|3, byte(offset), byte(offset>>8), byte(offset>>16), byte(offset>>24))
	}
	if length > 64 {
		if offset < 2048 {
			dst = append(dst, byte(offset>>8)<<5|(8-4)<<2|1, byte(offset))
			length -= 8
		} else {
			dst = append(dst, 59<<2|2, byte(offset), byte(offset>>8))
			length -= 60
		}
		return appendRepeat(dst, offset, length)
	}
	if length >= 12 || offset >= 2048 {
		return append(dst, byte(length-1)<<2|2, byte(offset), byte(offset>>8))
	}
	return append(dst, byte(offset>>8)<<5|byte(length-4)<<2|1, byte(offset))
}

// appendSnappyCopy appends Snappy copy elements (no S2 repeat codes) of
// length bytes (4 or more) at offset.
func appendSnappyCopy(dst []byte, offset, length int) []byte {
	for length >= 68 {
		dst = appendSnappyCopyElem(dst, offset, 64)
		length -= 64
	}
	if length > 64 {
		dst = appendSnappyCopyElem(dst, offset, 60)
		length -= 60
	}
	return appendSnappyCopyElem(dst, offset, length)
}

func appendSnappyCopyElem(dst []byte, offset, length int) []byte {
	switch {
	case length <= 11 && offset < 2048:
		return append(dst, byte(offset>>8)<<5|byte(length-4)<<2|1, byte(offset))
	case offset < 1<<16:
		return append(dst, byte(length-1)<<2|2, byte(offset), byte(offset>>8))
	default:
		return append(dst, byte(length-1)<<2|3, byte(offset), byte(offset>>8), byte(offset>>16), byte(offset>>24))
	}
}

// appendRepeat appends a copy of length bytes (4 or more) at the last
// copy's offset, offset: S2's repeat code (a 1-byte-offset copy of offset
// 0), as S2's emitRepeat.
func appendRepeat(dst []byte, offset, length int) []byte {
	length -= 4
	switch {
	case length <= 4:
		return append(dst, byte(length)<<2|1, 0)
	case length < 8 && offset < 2048:
		return append(dst, byte(offset>>8)<<5|byte(length)<<2|1, byte(offset))
	case length < 1<<8+4:
		length -= 4
		return append(dst, 5<<2|1, 0, byte(length))
	case length < 1<<16+1<<8:
		length -= 1 << 8
		return append(dst, 6<<2|1, 0, byte(length), byte(length>>8))
	}
	const maxRepeat = 1<<24 - 1
	length -= 1 << 16
	left := 0
	if length > maxRepeat {
		left = length - maxRepeat + 4
		length = maxRepeat - 4
	}
	dst = append(dst, 7<<2|1, 0, byte(length), byte(length>>8), byte(length>>16))
	if left > 0 {
		return appendRepeat(dst, offset, left)
	}
	return dst
}
