package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
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
	// four bits of byte 2. Readers also read Version1.
	Version byte = 2

	// Version1 is the first format version: no entry kinds besides values
	// and negative entries, no fields. Still read; written only when a
	// Header asks for it (test vectors, tools).
	Version1 byte = 1

	// FlagNegative marks a "known absent" entry in version 1 (byte 2's
	// high nibble). Version 2 has no flag bits; it uses KindNegative.
	FlagNegative byte = 0x10

	// flagsKnownV1 are the flag bits version 1 defines; a reader rejects a
	// version 1 envelope with any other flag bit set.
	flagsKnownV1 = FlagNegative

	negativeLenV1 = 3
)

// Kind is what a version 2 entry holds (byte 3).
type Kind byte

// Entry kinds. A reader that meets a kind it does not know treats the
// entry as not understood: a miss that it does not overwrite.
const (
	// KindValue is a cached value: serializer, compressor, dictionary,
	// length and payload follow the fields.
	KindValue Kind = 0
	// KindNegative is a "known absent" entry (negative caching).
	KindNegative Kind = 1
	// KindLease is a placeholder held while one caller loads the value;
	// Fields.Token identifies the holder.
	KindLease Kind = 2
	// KindTombstone marks an invalidated key: a fill that started before
	// it must not replace it with what it loaded.
	KindTombstone Kind = 3

	kindMax = KindTombstone
)

// String returns the kind's name as docs/FORMAT.md writes it.
func (k Kind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindNegative:
		return "negative"
	case KindLease:
		return "lease"
	case KindTombstone:
		return "tombstone"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// Field tags of version 2. A tag with the high bit set (TagCritical) must
// be understood by a reader to use the entry; other unknown tags are
// skipped.
const (
	TagSchema  byte = 0x01
	TagWritten byte = 0x02
	TagTTL     byte = 0x03
	TagCost    byte = 0x04
	TagToken   byte = 0x05
	// TagDictDigest carries the first DigestLen bytes of the SHA-256 of
	// the dictionary a value was compressed with (docs/FORMAT.md,
	// "Dictionaries"): the short dictionary id finds the dictionary, the
	// digest proves it is the one the writer used.
	TagDictDigest byte = 0x06
	TagCritical   byte = 0x80

	// MaxFieldsLen bounds the field section a reader accepts. Fields are
	// a few dozen bytes; anything larger is a hostile length claim.
	MaxFieldsLen = 4 << 10
)

// Fields are the optional header fields of a version 2 entry. Zero
// values are absent and cost no bytes.
type Fields struct {
	// Schema is a fingerprint of the writer's Go type (tag 0x01), valid
	// when HasSchema is set.
	Schema    uint32
	HasSchema bool
	// Written is when the entry was written (tag 0x02), to the
	// millisecond, in UTC. Zero when absent.
	Written time.Time
	// TTL is the time to live the writer set (tag 0x03), to the
	// millisecond: the entry's logical expiry is Written+TTL. Zero when
	// absent.
	TTL time.Duration
	// Cost is how long the loader took to produce the value (tag 0x04), to
	// the microsecond: the delta of probabilistic early refresh. Zero when
	// absent.
	Cost time.Duration
	// Token identifies a lease holder (tag 0x05). Empty when absent.
	Token string
	// DictDigest is the digest of the dictionary the payload was
	// compressed with (tag 0x06): Encode sets it on every value that
	// names a dictionary, and Decode refuses a dictionary whose bytes do
	// not hash to it. Zero when absent (values written before the field
	// existed, and values without a dictionary).
	DictDigest DictDigest `json:",omitzero"`
}

func (f *Fields) empty() bool {
	return !f.HasSchema && f.Written.IsZero() && f.TTL <= 0 && f.Cost <= 0 && f.Token == "" && f.DictDigest.IsZero()
}

// appendFields appends the field section (its uvarint length, then each
// field in tag order).
func appendFields(dst []byte, f *Fields) []byte {
	if f.empty() {
		return append(dst, 0)
	}
	var buf [64]byte
	b := buf[:0]
	uv := func(tag byte, x uint64) {
		b = append(b, tag, byte(uvarintLen(x)))
		b = binary.AppendUvarint(b, x)
	}
	if f.HasSchema {
		b = append(b, TagSchema, 4)
		b = binary.BigEndian.AppendUint32(b, f.Schema)
	}
	if !f.Written.IsZero() && f.Written.UnixMilli() > 0 {
		uv(TagWritten, uint64(f.Written.UnixMilli()))
	}
	if ms := f.TTL.Milliseconds(); ms > 0 {
		uv(TagTTL, uint64(ms))
	}
	if us := f.Cost.Microseconds(); us > 0 {
		uv(TagCost, uint64(us))
	}
	if f.Token != "" {
		b = append(b, TagToken)
		b = binary.AppendUvarint(b, uint64(len(f.Token)))
		b = append(b, f.Token...)
	}
	if !f.DictDigest.IsZero() {
		b = append(b, TagDictDigest, DigestLen)
		b = append(b, f.DictDigest[:]...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// parseFields decodes a field section body.
func parseFields(b []byte, f *Fields) error {
	var seen [TagDictDigest + 1]bool
	for len(b) > 0 {
		tag := b[0]
		l, n := binary.Uvarint(b[1:])
		if n <= 0 {
			return fmt.Errorf("%w: field %#02x length", ErrCorrupt, tag)
		}
		if l > uint64(len(b)-1-n) {
			return fmt.Errorf("%w: field %#02x claims %d bytes, %d left", ErrCorrupt, tag, l, len(b)-1-n)
		}
		data := b[1+n : 1+n+int(l)]
		b = b[1+n+int(l):]
		if tag <= TagDictDigest && tag != 0 {
			if seen[tag] {
				return fmt.Errorf("%w: field %#02x twice", ErrCorrupt, tag)
			}
			seen[tag] = true
		}
		uv := func() (uint64, error) {
			x, m := binary.Uvarint(data)
			if m <= 0 || m != len(data) {
				return 0, fmt.Errorf("%w: field %#02x is not one uvarint", ErrCorrupt, tag)
			}
			return x, nil
		}
		switch tag {
		case TagSchema:
			if len(data) != 4 {
				return fmt.Errorf("%w: schema field of %d bytes, want 4", ErrCorrupt, len(data))
			}
			f.Schema, f.HasSchema = binary.BigEndian.Uint32(data), true
		case TagWritten:
			x, err := uv()
			if err != nil {
				return err
			}
			if x > uint64(math.MaxInt64/int64(time.Millisecond)) {
				return fmt.Errorf("%w: written time out of range", ErrCorrupt)
			}
			f.Written = time.UnixMilli(int64(x)).UTC()
		case TagTTL, TagCost:
			x, err := uv()
			if err != nil {
				return err
			}
			unit := time.Millisecond
			if tag == TagCost {
				unit = time.Microsecond
			}
			if x > uint64(math.MaxInt64/int64(unit)) {
				return fmt.Errorf("%w: field %#02x out of range", ErrCorrupt, tag)
			}
			if tag == TagTTL {
				f.TTL = time.Duration(x) * unit
			} else {
				f.Cost = time.Duration(x) * unit
			}
		case TagToken:
			f.Token = string(data)
		case TagDictDigest:
			if len(data) != DigestLen {
				return fmt.Errorf("%w: dictionary digest field of %d bytes, want %d", ErrCorrupt, len(data), DigestLen)
			}
			copy(f.DictDigest[:], data)
			if f.DictDigest.IsZero() {
				return fmt.Errorf("%w: dictionary digest field of zeros", ErrCorrupt)
			}
		default:
			if tag&TagCritical != 0 {
				return fmt.Errorf("%w: critical field %#02x", ErrNotUnderstood, tag)
			}
			// A field from a newer writer that this reader may skip.
		}
	}
	return nil
}

// parseDictAndLen parses the dictionary id and the uncompressed length at
// data[off:] into h and returns the offset after them.
func parseDictAndLen(data []byte, off int, h *Header) (int, error) {
	n, err := parseDictID(data[off:], h)
	if err != nil {
		return off, err
	}
	off += n
	n, err = parseRawLen(data[off:], h)
	return off + n, err
}

// parseDictID parses the dictionary id uvarint at the start of b into h
// and returns its length.
func parseDictID(b []byte, h *Header) (int, error) {
	d, n := binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, fmt.Errorf("%w: dictionary id", ErrTruncated)
	case n < 0 || d > 1<<32-1 || n > binary.MaxVarintLen32:
		return 0, fmt.Errorf("%w: dictionary id out of range", ErrCorrupt)
	}
	h.Dict = uint32(d)
	return n, nil
}

// parseRawLen parses the uncompressed length uvarint at the start of b
// into h and returns its length.
func parseRawLen(b []byte, h *Header) (int, error) {
	l, n := binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, fmt.Errorf("%w: uncompressed length", ErrTruncated)
	case n < 0 || l > math.MaxInt>>1:
		return 0, fmt.Errorf("%w: uncompressed length out of range", ErrCorrupt)
	}
	h.RawLen = int(l)
	return n, nil
}

// fieldSection parses the field section length at data[off:] and returns
// where the section's fields start and end.
func fieldSection(data []byte, off int) (start, end int, err error) {
	fl, n := binary.Uvarint(data[off:])
	switch {
	case n == 0:
		return 0, 0, fmt.Errorf("%w: field section length", ErrTruncated)
	case n < 0 || fl > MaxFieldsLen:
		return 0, 0, fmt.Errorf("%w: field section length out of range", ErrCorrupt)
	case fl > uint64(len(data)-off-n):
		return 0, 0, fmt.Errorf("%w: field section of %d bytes, %d left", ErrTruncated, fl, len(data)-off-n)
	}
	return off + n, off + n + int(fl), nil
}

// Header is the decoded envelope header.
type Header struct {
	// Version is the format version (1, 2 or VersionCompact).
	Version byte
	// Kind is what the entry holds; KindValue or KindNegative in
	// version 1.
	Kind Kind
	// Fields are the optional fields (version 2 only).
	Fields Fields
	// Serializer is the serializer id (0 for an entry that is not a
	// value).
	Serializer byte
	// Compressor is the compressor id; 0 means the payload is stored as is.
	Compressor byte
	// Dict is the compression dictionary id; 0 means none.
	Dict uint32
	// RawLen is the uncompressed payload length.
	RawLen int
	// Negative reports a "known absent" entry (Kind == KindNegative); it
	// has no payload.
	Negative bool
	// Len is the header length in bytes; the payload follows it. For an
	// entry that is not a value it is the whole entry's length.
	Len int
}

// AppendHeader appends the encoding of h to dst. Len is ignored. A
// Version of 0 means Version (2); Version1 writes the first format, which
// has no fields and only values and negative entries (Negative, or Kind
// KindNegative). VersionCompact writes a value in the compact layout
// (entries that are not values are written in version 2). Entries that
// are not values end after their fields.
func AppendHeader(dst []byte, h Header) []byte {
	kind := h.Kind
	if h.Negative {
		kind = KindNegative
	}
	if h.Version == Version1 {
		if kind == KindNegative {
			return append(dst, Magic0, Magic1, Version1|FlagNegative)
		}
		dst = append(dst, Magic0, Magic1, Version1, h.Serializer, h.Compressor)
	} else if h.Version == VersionCompact && kind == KindValue {
		return appendCompactHeader(dst, &h)
	} else {
		dst = append(dst, Magic0, Magic1, Version, byte(kind))
		dst = appendFields(dst, &h.Fields)
		if kind != KindValue {
			return dst
		}
		dst = append(dst, h.Serializer, h.Compressor)
	}
	dst = binary.AppendUvarint(dst, uint64(h.Dict))
	return binary.AppendUvarint(dst, uint64(h.RawLen))
}

// AppendEntry appends an entry that holds no value (a negative entry, a
// lease placeholder or a tombstone) with fields f, in the current
// version.
func AppendEntry(dst []byte, k Kind, f Fields) []byte {
	return AppendHeader(dst, Header{Kind: k, Fields: f})
}

// ParseHeader decodes and checks the structure of the header at the start
// of data: magic, version, kind, fields and that the varints are complete
// and in range. It does not check that the ids are known or that the
// payload has RawLen bytes; Decode does that. An entry this reader cannot
// fully understand (a newer version, an unknown kind or critical field)
// gives an error matching ErrNotUnderstood; every other error matches
// ErrMalformed.
func ParseHeader(data []byte) (Header, error) {
	var h Header
	err := parseHeader(data, &h)
	return h, err
}

// parseHeader is ParseHeader into h (zero on entry), which a read's hot
// path keeps on its own stack instead of copying the header back out.
func parseHeader(data []byte, h *Header) error {
	if len(data) < 2 {
		if len(data) == 0 || data[0] == Magic0 {
			return fmt.Errorf("%w: %d byte(s)", ErrTruncated, len(data))
		}
		return ErrNotKura
	}
	if data[0] != Magic0 || data[1] != Magic1 {
		return fmt.Errorf("%w: starts %#02x %#02x, want %#02x %#02x", ErrNotKura, data[0], data[1], Magic0, Magic1)
	}
	if len(data) < 3 {
		return fmt.Errorf("%w: no version byte", ErrTruncated)
	}
	h.Version = data[2] & 0x0f
	flags := data[2] &^ 0x0f
	var off int
	switch h.Version {
	case Version1:
		if flags&^flagsKnownV1 != 0 {
			return fmt.Errorf("%w: unknown flag bits %#02x", ErrUnsupportedVersion, flags&^flagsKnownV1)
		}
		if flags&FlagNegative != 0 {
			h.Negative, h.Kind = true, KindNegative
			h.Len = negativeLenV1
			if len(data) != negativeLenV1 {
				return fmt.Errorf("%w: negative entry followed by %d byte(s)", ErrCorrupt, len(data)-negativeLenV1)
			}
			return nil
		}
		off = 3
	case Version:
		if flags != 0 {
			return fmt.Errorf("%w: flag bits %#02x in version 2", ErrUnsupportedVersion, flags)
		}
		if len(data) < 5 {
			return fmt.Errorf("%w: header ends at byte %d", ErrTruncated, len(data))
		}
		h.Kind = Kind(data[3])
		if h.Kind > kindMax {
			return fmt.Errorf("%w: entry kind %d", ErrNotUnderstood, data[3])
		}
		start, end, err := fieldSection(data, 4)
		if err != nil {
			return err
		}
		off = end
		if err := parseFields(data[start:end], &h.Fields); err != nil {
			return err
		}
		if h.Kind != KindValue {
			h.Negative = h.Kind == KindNegative
			h.Len = off
			if len(data) != off {
				return fmt.Errorf("%w: %s entry followed by %d byte(s)", ErrCorrupt, h.Kind, len(data)-off)
			}
			return nil
		}
	case VersionCompact:
		if flags&^(compactS2|compactRefresh) != 0 {
			return fmt.Errorf("%w: flag bits %#02x in version 3", ErrUnsupportedVersion, flags)
		}
		if err := parseCompact(data, h); err != nil {
			return err
		}
		if h.Serializer == 0 {
			return fmt.Errorf("%w: serializer id 0", ErrUnknownSerializer)
		}
		return nil
	default:
		return fmt.Errorf("%w: version %d (this reader knows %d, %d and %d)", ErrUnsupportedVersion, h.Version, Version1, Version, VersionCompact)
	}
	if len(data) < off+2 {
		return fmt.Errorf("%w: header ends at byte %d", ErrTruncated, len(data))
	}
	h.Serializer = data[off]
	h.Compressor = data[off+1]
	off, err := parseDictAndLen(data, off+2, h)
	if err != nil {
		return err
	}
	h.Len = off
	if h.Serializer == 0 {
		return fmt.Errorf("%w: serializer id 0", ErrUnknownSerializer)
	}
	return nil
}
