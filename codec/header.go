package codec

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The envelope layout is specified byte by byte in docs/FORMAT.md; keep the
// two in step.
const (
	// Magic0 and Magic1 are the first two bytes of every envelope. 0xC1 is
	// the one byte that never starts a msgpack value and never appears in
	// UTF-8 text, so plain strings, JSON and msgpack are told apart at the
	// first byte.
	Magic0 byte = 0xC1
	Magic1 byte = 'K'

	// Version is the format version this package writes. It is the low
	// four bits of byte 2.
	Version byte = 1

	// FlagNegative marks a "known absent" entry (negative caching). Such an
	// entry is exactly three bytes: magic and the version/flags byte.
	FlagNegative byte = 0x10

	// flagsKnown are the flag bits version 1 defines; a reader rejects an
	// envelope with any other flag bit set.
	flagsKnown = FlagNegative

	// MaxHeaderLen is the longest possible header: magic (2), version and
	// flags (1), serializer (1), compressor (1), dictionary id (uvarint of
	// a uint32, up to 5) and uncompressed length (uvarint, up to 10).
	MaxHeaderLen = 2 + 1 + 1 + 1 + binary.MaxVarintLen32 + binary.MaxVarintLen64

	negativeLen = 3
)

// Header is the decoded envelope header.
type Header struct {
	// Version is the format version (1).
	Version byte
	// Serializer is the serializer id (0 for a negative entry).
	Serializer byte
	// Compressor is the compressor id; 0 means the payload is stored as is.
	Compressor byte
	// Dict is the compression dictionary id; 0 means none.
	Dict uint32
	// RawLen is the uncompressed payload length.
	RawLen int
	// Negative reports a "known absent" entry; it has no payload.
	Negative bool
	// Len is the header length in bytes; the payload follows it.
	Len int
}

// AppendHeader appends the encoding of h to dst. Len is ignored; Negative
// entries encode as three bytes and ignore the other fields.
func AppendHeader(dst []byte, h Header) []byte {
	v := h.Version
	if v == 0 {
		v = Version
	}
	if h.Negative {
		return append(dst, Magic0, Magic1, v|FlagNegative)
	}
	dst = append(dst, Magic0, Magic1, v, h.Serializer, h.Compressor)
	dst = binary.AppendUvarint(dst, uint64(h.Dict))
	return binary.AppendUvarint(dst, uint64(h.RawLen))
}

// ParseHeader decodes and checks the structure of the header at the start
// of data: magic, version, flags and that the varints are complete and in
// range. It does not check that the ids are known or that the payload has
// RawLen bytes; Decode does that. Every error matches ErrMalformed.
func ParseHeader(data []byte) (Header, error) {
	var h Header
	if len(data) < 2 {
		if len(data) == 0 || data[0] == Magic0 {
			return h, fmt.Errorf("%w: %d byte(s)", ErrTruncated, len(data))
		}
		return h, ErrNotKura
	}
	if data[0] != Magic0 || data[1] != Magic1 {
		return h, fmt.Errorf("%w: starts %#02x %#02x, want %#02x %#02x", ErrNotKura, data[0], data[1], Magic0, Magic1)
	}
	if len(data) < 3 {
		return h, fmt.Errorf("%w: no version byte", ErrTruncated)
	}
	h.Version = data[2] & 0x0f
	flags := data[2] &^ 0x0f
	if h.Version != Version {
		return h, fmt.Errorf("%w: version %d (this reader knows %d)", ErrUnsupportedVersion, h.Version, Version)
	}
	if flags&^flagsKnown != 0 {
		return h, fmt.Errorf("%w: unknown flag bits %#02x", ErrUnsupportedVersion, flags&^flagsKnown)
	}
	if flags&FlagNegative != 0 {
		h.Negative = true
		h.Len = negativeLen
		if len(data) != negativeLen {
			return h, fmt.Errorf("%w: negative entry followed by %d byte(s)", ErrCorrupt, len(data)-negativeLen)
		}
		return h, nil
	}
	if len(data) < 5 {
		return h, fmt.Errorf("%w: header ends at byte %d", ErrTruncated, len(data))
	}
	h.Serializer = data[3]
	h.Compressor = data[4]
	off := 5
	d, n := binary.Uvarint(data[off:])
	switch {
	case n == 0:
		return h, fmt.Errorf("%w: dictionary id", ErrTruncated)
	case n < 0 || d > 1<<32-1 || n > binary.MaxVarintLen32:
		return h, fmt.Errorf("%w: dictionary id out of range", ErrCorrupt)
	}
	h.Dict = uint32(d)
	off += n
	l, n := binary.Uvarint(data[off:])
	switch {
	case n == 0:
		return h, fmt.Errorf("%w: uncompressed length", ErrTruncated)
	case n < 0 || l > math.MaxInt>>1:
		return h, fmt.Errorf("%w: uncompressed length out of range", ErrCorrupt)
	}
	off += n
	h.RawLen = int(l)
	h.Len = off
	if h.Serializer == 0 {
		return h, fmt.Errorf("%w: serializer id 0", ErrUnknownSerializer)
	}
	return h, nil
}
