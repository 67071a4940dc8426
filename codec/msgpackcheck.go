package codec

import (
	"encoding/binary"
	"fmt"
)

// DefaultMaxDepth is the deepest nesting of arrays and maps CheckMsgPack
// accepts. Real values nest a few levels (a struct of slices of structs);
// the msgpack decoder recurses once per level, so a few megabytes of
// nested one-element arrays would otherwise end the process with a stack
// overflow that no recover catches.
const DefaultMaxDepth = 256

// CheckMsgPack walks one msgpack value without decoding it and returns an
// error matching ErrMalformed (ErrBomb) if any length it claims (array or
// map count, string, binary or extension length) is larger than the bytes
// that remain could hold, if arrays and maps nest deeper than
// DefaultMaxDepth, or if the bytes end early. Bytes that pass allocate at
// most a small constant times their own length when decoded, whatever the
// destination type: the msgpack decoder allocates what headers claim (a
// 12-byte value claiming 2^32-1 elements would otherwise end the process
// with an out-of-memory fatal error).
//
// The msgpack serializer calls it before every decode. Serializers of
// users that decode msgpack should call it too.
func CheckMsgPack(b []byte) error { return checkMsgPack(b, AllocBound(len(b))) }

// checkMsgPack is CheckMsgPack with the allocation limit given: Decode
// passes the bound of the bytes stored, which for a compressed payload is
// tighter than the bound of the payload (compression would otherwise
// multiply the two: 21 KB of zstd made a 4 MiB payload whose decode
// allocated 138 MB).
func checkMsgPack(b []byte, limit uint64) error {
	// stack[d] is the number of values still expected at depth d; it
	// grows past the first levels only for deeply nested values (zeroing
	// DefaultMaxDepth levels on every decode cost more than the walk of
	// a small value).
	var shallow [16]uint64
	stack := shallow[:]
	// est is what decoding into the costliest destination (any) would
	// allocate, by the measured cost of each kind of value; limit is the
	// bound this package promises.
	est := uint64(0)
	depth := 0
	stack[0] = 1
	off := 0
	for {
		for depth >= 0 && stack[depth] == 0 {
			depth--
		}
		if depth < 0 {
			if est > limit {
				return fmt.Errorf("%w: decoding this msgpack would allocate more than %d bytes (%d-byte input)", ErrBomb, limit, len(b))
			}
			return nil
		}
		stack[depth]--
		est += costValue
		if off >= len(b) {
			return fmt.Errorf("%w: msgpack ends inside a value", ErrBomb)
		}
		c := b[off]
		off++
		rest := uint64(len(b) - off)
		var n, skip uint64 // container count (pairs for maps), bytes to skip
		isMap, isArr := false, false
		switch {
		case c <= 0x7f || c >= 0xe0: // fixint
		case c <= 0x8f:
			isMap, n = true, uint64(c&0x0f)
		case c <= 0x9f:
			isArr, n = true, uint64(c&0x0f)
		case c <= 0xbf:
			skip = uint64(c & 0x1f)
		default:
			switch c {
			case 0xc0, 0xc2, 0xc3:
			case 0xc1:
				return fmt.Errorf("%w: msgpack byte 0xc1 is never used", ErrBomb)
			case 0xcc, 0xd0:
				skip = 1
			case 0xcd, 0xd1:
				skip = 2
			case 0xca, 0xce, 0xd2:
				skip = 4
			case 0xcb, 0xcf, 0xd3:
				skip = 8
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: type byte + 1..16
				skip = 1 + 1<<(c-0xd4)
			case 0xc4, 0xd9, 0xc7, 0xc5, 0xda, 0xc8, 0xc6, 0xdb, 0xc9:
				// bin, str and ext with 8-, 16- and 32-bit lengths; an
				// ext also carries its type byte.
				l, ok := readLen(b, &off, int(lenWidth[c]))
				if !ok {
					return fmt.Errorf("%w: msgpack length cut short", ErrBomb)
				}
				skip = l
				if c == 0xc7 || c == 0xc8 || c == 0xc9 {
					skip++
				}
			case 0xdc, 0xde:
				l, ok := readLen(b, &off, 2)
				if !ok {
					return fmt.Errorf("%w: msgpack count cut short", ErrBomb)
				}
				n, isArr, isMap = l, c == 0xdc, c == 0xde
			case 0xdd, 0xdf:
				l, ok := readLen(b, &off, 4)
				if !ok {
					return fmt.Errorf("%w: msgpack count cut short", ErrBomb)
				}
				n, isArr, isMap = l, c == 0xdd, c == 0xdf
			}
			rest = uint64(len(b) - off)
		}
		switch {
		case isArr || isMap:
			need := n
			if isMap {
				need = 2 * n
			}
			if need > rest {
				return fmt.Errorf("%w: msgpack %s claims %d entries in %d bytes", ErrBomb, kindName(isMap), n, rest)
			}
			if isMap {
				est += costMap + costPair*n
			} else {
				est += costArray
			}
			if est > limit {
				return fmt.Errorf("%w: decoding this msgpack would allocate more than %d bytes (%d-byte input)", ErrBomb, limit, len(b))
			}
			if n == 0 {
				continue
			}
			if depth+1 > DefaultMaxDepth {
				return fmt.Errorf("%w: msgpack nests deeper than %d levels", ErrBomb, DefaultMaxDepth)
			}
			depth++
			if depth == len(stack) {
				stack = append(stack, 0)
			}
			stack[depth] = need
		case skip > rest:
			return fmt.Errorf("%w: msgpack value claims %d bytes, %d remain", ErrBomb, skip, rest)
		default:
			off += int(skip)
		}
	}
}

// The allocation each msgpack value costs when decoded into any, measured
// with Go 1.26 (a map allocates a group of eight slots on its first
// insert, however small it is on the wire): codec/hostile_test.go checks
// the bound they keep.
const (
	costValue = 32  // an interface slot, a string header
	costArray = 32  // a slice header
	costMap   = 384 // an empty map, then its first group
	costPair  = 64  // each entry as the map grows
)

// msgpackMaxCostPerByte bounds checkMsgPack's estimate per byte of
// input: no msgpack value of n bytes is estimated above
// msgpackMaxCostPerByte*n. The costliest byte is an empty fixmap
// (costValue+costMap); a map's costPair per pair is covered by its
// children, at least two bytes a pair, half a costPair each.
// (TestMsgPackCostPerByte and FuzzMsgPackCostPerByte check it.)
const msgpackMaxCostPerByte = costValue + costMap + costPair/2

// AllocBound is the most one Decode of n bytes allocates: 64 bytes per
// input byte plus 1 MiB, whatever the bytes and the destination.
// CheckMsgPack refuses payloads that would cost more.
func AllocBound(n int) uint64 { return 64*uint64(n) + 1<<20 }

// lenWidth is the size of the length field of each bin/str/ext code.
var lenWidth = [256]uint8{
	0xc4: 1, 0xd9: 1, 0xc7: 1,
	0xc5: 2, 0xda: 2, 0xc8: 2,
	0xc6: 4, 0xdb: 4, 0xc9: 4,
}

func kindName(isMap bool) string {
	if isMap {
		return "map"
	}
	return "array"
}

func readLen(b []byte, off *int, n int) (uint64, bool) {
	if *off+n > len(b) {
		return 0, false
	}
	var v uint64
	switch n {
	case 1:
		v = uint64(b[*off])
	case 2:
		v = uint64(binary.BigEndian.Uint16(b[*off:]))
	case 4:
		v = uint64(binary.BigEndian.Uint32(b[*off:]))
	}
	*off += n
	return v, true
}
