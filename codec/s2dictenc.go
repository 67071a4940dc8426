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
}

const (
	// s2DictTableBits sizes the dictionary's hash table (2^16 two-byte
	// entries, 128 KiB, built once per dictionary).
	s2DictTableBits = 15
	// s2SrcTableMaxBits bounds the value's own table (2^14 entries).
	s2SrcTableMaxBits = 14
	// s2DictFastMax is the largest value the encoder takes; larger
	// values go to s2.Dict.Encode, whose fixed table cost no longer
	// matters (and copies into the dictionary may only start in the
	// first s2.MaxDictSrcOffset bytes anyway).
	s2DictFastMax = 64 << 10
	// s2MinBlock is the size under which a block is one literal.
	s2MinBlock = 8
)

// newS2DictEncoder returns the encoder for d (nil when d has no
// content).
func newS2DictEncoder(d *s2.Dict) *s2DictEncoder {
	b := d.Bytes()
	_, n := binary.Uvarint(b) // the repeat offset; the content follows
	if n <= 0 || len(b)-n < 4 {
		return nil
	}
	e := &s2DictEncoder{dict: b[n:], table: make([]uint16, 1<<s2DictTableBits)}
	// Later positions overwrite earlier ones: nearer the dictionary's
	// end, which the trainer fills with the most common strings.
	for i := 0; i+4 <= len(e.dict); i++ {
		e.table[hash4(load32(e.dict, i), s2DictTableBits)] = uint16(i)
	}
	return e
}

var srcTables = sync.Pool{New: func() any { return new([1 << s2SrcTableMaxBits]uint16) }}

func load32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }

func hash4(u uint32, tableBits uint) uint32 { return (u * 0x9E3779B1) >> (32 - tableBits) }

// encode appends the block of src to dst. src must be at most
// s2DictFastMax bytes.
func (e *s2DictEncoder) encode(dst, src []byte) []byte {
	n := len(src)
	dst = grow(dst, s2.MaxEncodedLen(n))
	dst = binary.AppendUvarint(dst, uint64(n))
	if n < s2MinBlock {
		return appendLiteral(dst, src)
	}
	tableBits := uint(bits.Len(uint(n)))
	tableBits = min(max(tableBits, 8), s2SrcTableMaxBits)
	tp := srcTables.Get().(*[1 << s2SrcTableMaxBits]uint16)
	table := tp[:1<<tableBits]
	clear(table)

	d, dl := e.dict, len(e.dict)
	lit := 0 // the first byte not yet emitted
	i := 0   // the position searched
	last := n - 4
	for i <= last {
		cur := load32(src, i)
		h := hash4(cur, tableBits)
		// Positions are stored +1 so that 0 means none.
		cand := int(table[h]) - 1
		table[h] = uint16(i + 1)
		bestLen, bestOff, back := 0, 0, 0
		if cand >= 0 && load32(src, cand) == cur {
			l := 4 + matchLen(src[cand+4:], src[i+4:])
			b := 0
			for i-b > lit && cand-b > 0 && src[cand-b-1] == src[i-b-1] {
				b++
			}
			bestLen, bestOff, back = l+b, i-cand, b
		}
		if i <= s2.MaxDictSrcOffset-8 {
			dc := int(e.table[hash4(cur, s2DictTableBits)])
			if dc+4 <= dl && load32(d, dc) == cur {
				l := 4 + matchLen(d[dc+4:], src[i+4:])
				b := 0
				for i-b > lit && dc-b > 0 && d[dc-b-1] == src[i-b-1] {
					b++
				}
				if l+b > bestLen {
					bestLen, bestOff, back = l+b, dl+i-dc, b
				}
			}
		}
		if bestLen == 0 {
			i += 1 + (i-lit)>>5
			continue
		}
		start := i - back
		if lit < start {
			dst = appendLiteral(dst, src[lit:start])
		}
		dst = appendCopy(dst, bestOff, bestLen)
		i = start + bestLen
		lit = i
		// The match's last positions start the next search's table.
		if i-2 >= 0 && i-2 <= last {
			table[hash4(load32(src, i-2), tableBits)] = uint16(i - 2 + 1)
		}
	}
	srcTables.Put(tp)
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

// appendCopy appends Snappy copy elements of length bytes (4 or more)
// at offset (1 or more; beyond the output so far, into the dictionary).
// Offset 0 is never written: in S2 a 1-byte-offset copy of offset 0
// repeats the last offset.
func appendCopy(dst []byte, offset, length int) []byte {
	for length >= 68 {
		dst = appendCopyElem(dst, offset, 64)
		length -= 64
	}
	if length > 64 {
		dst = appendCopyElem(dst, offset, 60)
		length -= 60
	}
	return appendCopyElem(dst, offset, length)
}

func appendCopyElem(dst []byte, offset, length int) []byte {
	switch {
	case length <= 11 && offset < 2048:
		return append(dst, byte(offset>>8)<<5|byte(length-4)<<2|1, byte(offset))
	case offset < 1<<16:
		return append(dst, byte(length-1)<<2|2, byte(offset), byte(offset>>8))
	default:
		return append(dst, byte(length-1)<<2|3, byte(offset), byte(offset>>8), byte(offset>>16), byte(offset>>24))
	}
}
