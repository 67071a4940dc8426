package codec

import (
	"encoding/binary"
	"math"
	"slices"
	"sync"
)

// Generic values (what encoding/json decodes into an `any`: maps of
// string to any, slices of any, strings, float64s, bools and nil) are the
// one shape a schema cannot shorten, so MsgPack writes them with the two
// properties that let a dictionary help:
//
//   - map keys in sorted order (msgpack/v5's SetSortMapKeys), so that the
//     same document shape always gives the same bytes: with Go's random
//     map order, two values of one shape share only runs of one key and
//     its value, and a dictionary's matches stop at every key
//     (BENCHMARKS.md, issue 24: nested documents take 15-25% fewer bytes
//     with an S2 dictionary when sorted);
//   - without msgpack/v5's reflection: appendGeneric writes those six
//     types directly, the same bytes msgpack/v5 writes with sorted keys
//     (TestAppendGenericMatchesMsgPack), and takes less than half its CPU,
//     which pays for the sort.
//
// A value holding any other type is written by msgpack/v5 (with sorted
// keys), so the output never depends on which path wrote it.

// maxGenericDepth bounds appendGeneric's recursion; deeper values go to
// msgpack/v5 (which has its own limit).
const maxGenericDepth = 64

// keyBufs holds the scratch slices of keys appendGeneric sorts.
var keyBufs = sync.Pool{New: func() any { s := make([]string, 0, 32); return &s }}

// isGeneric reports whether v is a map[string]any or a []any: the values
// appendGeneric is for.
func isGeneric(v any) bool {
	switch v.(type) {
	case map[string]any, []any, *map[string]any, *[]any:
		return true
	}
	return false
}

// appendGeneric appends the MessagePack of v to dst, maps with sorted
// keys. ok is false (and the result to be dropped) when v holds a type
// other than map[string]any, []any, string, float64, bool and nil, or is
// nested deeper than maxGenericDepth.
func appendGeneric(dst []byte, v any, depth int) (out []byte, ok bool) {
	if depth > maxGenericDepth {
		return dst, false
	}
	switch v := v.(type) {
	case nil:
		return append(dst, 0xc0), true
	case string:
		return appendMsgpackString(dst, v), true
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(v)), true
	case bool:
		if v {
			return append(dst, 0xc3), true
		}
		return append(dst, 0xc2), true
	case map[string]any:
		if v == nil {
			return append(dst, 0xc0), true
		}
		dst = appendMsgpackLen(dst, len(v), 0x80, 0xde, 0xdf)
		kp := keyBufs.Get().(*[]string)
		keys := (*kp)[:0]
		for k := range v {
			keys = append(keys, k)
		}
		if len(keys) > 1 {
			slices.Sort(keys)
		}
		ok = true
		for _, k := range keys {
			dst = appendMsgpackString(dst, k)
			if dst, ok = appendGeneric(dst, v[k], depth+1); !ok {
				break
			}
		}
		clear(keys)
		*kp = keys[:0]
		keyBufs.Put(kp)
		return dst, ok
	case []any:
		if v == nil {
			return append(dst, 0xc0), true
		}
		dst = appendMsgpackLen(dst, len(v), 0x90, 0xdc, 0xdd)
		for _, e := range v {
			if dst, ok = appendGeneric(dst, e, depth+1); !ok {
				return dst, false
			}
		}
		return dst, true
	case *map[string]any:
		if v == nil {
			return append(dst, 0xc0), true
		}
		return appendGeneric(dst, *v, depth)
	case *[]any:
		if v == nil {
			return append(dst, 0xc0), true
		}
		return appendGeneric(dst, *v, depth)
	}
	return dst, false
}

// appendMsgpackString appends s as msgpack/v5 writes a string.
func appendMsgpackString(dst []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n < 256:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, 0xda, byte(n>>8), byte(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
	return append(dst, s...)
}

// appendMsgpackLen appends a map or array length: fix (under 16, or'ed
// into fix), 16-bit or 32-bit.
func appendMsgpackLen(dst []byte, n int, fix, c16, c32 byte) []byte {
	switch {
	case n < 16:
		return append(dst, fix|byte(n))
	case n <= math.MaxUint16:
		return append(dst, c16, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint32(append(dst, c32), uint32(n))
	}
}
