package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

// The compact envelope (version 3, docs/FORMAT.md "Version 3"): the value
// header of version 2 without the bytes small values do not need. Encode
// writes it only when Options.Compact is set; every reader of this package
// reads it, and readers from before it treat it as not understood (a
// newer version: a miss they do not overwrite). Deploy readers first.
const (
	// VersionCompact is the compact value format (byte 2 = 0x03).
	VersionCompact byte = 3

	// Layout byte (byte 3) of a compact entry.
	compactSerMask    byte = 0x07 // serializer id 1..7, or 0: an id byte follows
	compactCompressed byte = 0x08 // compressor, dictionary id, uncompressed length follow
	compactSchema     byte = 0x10 // 4-byte big-endian schema fingerprint
	compactWritten    byte = 0x20 // uvarint: seconds since CompactEpoch
	compactFields     byte = 0x40 // a version 2 field section (ttl, cost, dict digest, newer)
	compactReserved   byte = 0x80 // not understood by this reader
)

// maxCompactSecs bounds a compact write time (272 years after the epoch)
// so that it converts to a time.Duration.
const maxCompactSecs = 1 << 33

// CompactEpoch is the zero of the compact envelope's write time: seconds
// since 2026-01-01T00:00:00Z, a uvarint of 4 bytes until 2034 (5 after).
// A write time before it is left out.
var CompactEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Serializer ids used by the compact envelope (docs/FORMAT.md).
const (
	// IDString is a UTF-8 string stored as is: what Options.Compact writes
	// for a string value under MsgPack (1 byte less than msgpack's str
	// header, and no schema fingerprint: the id says it is a string).
	IDString byte = 5
	// IDMsgPackArray is MessagePack with structs as arrays of their
	// field values in declaration order (msgpack/v5
	// UseArrayEncodedStructs): what Options.Compact writes for a struct
	// value under MsgPack with a schema fingerprint. Field names are not
	// in the value; a reader decodes it into its type only when the
	// fingerprint is its own (a schema mismatch otherwise, never a
	// positional guess).
	IDMsgPackArray byte = 6
)

// String returns the serializer Options.Compact uses for string values
// (id IDString): the UTF-8 bytes as is. It decodes into *string, *[]byte
// and *any, and a pointer to a named string type.
func String() Serializer { return stringSerializer{} }

// MsgPackArray returns the serializer Options.Compact uses for struct
// values (id IDMsgPackArray): MessagePack with structs as arrays.
func MsgPackArray() Serializer { return msgpackArraySerializer{} }

type stringSerializer struct{}

func (stringSerializer) ID() byte     { return IDString }
func (stringSerializer) Name() string { return "string" }

func (stringSerializer) Marshal(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return append(dst, v...), nil
	case *string:
		if v != nil {
			return append(dst, *v...), nil
		}
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.String {
		return append(dst, rv.String()...), nil
	}
	return dst, fmt.Errorf("%w: string serializer takes a string, not %T", ErrUnsupportedType, v)
}

var errNotUTF8 = errors.New("string: not valid UTF-8")

func (stringSerializer) Unmarshal(data []byte, v any) error {
	if !utf8.Valid(data) {
		return errNotUTF8
	}
	switch v := v.(type) {
	case *string:
		if v != nil {
			*v = string(data)
			return nil
		}
	case *[]byte:
		if v != nil {
			*v = append([]byte(nil), data...)
			return nil
		}
	case *any:
		if v != nil {
			*v = string(data)
			return nil
		}
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.String {
		rv.Elem().SetString(string(data))
		return nil
	}
	return fmt.Errorf("%w: a string value does not decode into %T", ErrUnsupportedType, v)
}

type msgpackArraySerializer struct{}

func (msgpackArraySerializer) ID() byte     { return IDMsgPackArray }
func (msgpackArraySerializer) Name() string { return "msgpack-array" }

var msgpackArrayEncoders = sync.Pool{New: func() any {
	e := &msgpackEncoder{}
	e.enc = msgpack.NewEncoder(&e.w)
	return e
}}

func (msgpackArraySerializer) Marshal(dst []byte, v any) ([]byte, error) {
	e := msgpackArrayEncoders.Get().(*msgpackEncoder)
	e.w.b = dst
	e.enc.Reset(&e.w) // clears the flags, so set them each time
	e.enc.UseArrayEncodedStructs(true)
	err := e.enc.Encode(v)
	out := e.w.b
	e.w.b = nil
	msgpackArrayEncoders.Put(e)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func (msgpackArraySerializer) Unmarshal(data []byte, v any) error {
	return msgpackSerializer{}.decodeBounded(data, v, AllocBound(len(data)), false)
}

// errPositional is the strict decode of a struct-as-array value: without
// field names nothing tells a compatible type from another with as many
// fields, so only the writer's own fingerprint decodes it.
var errPositional = errors.New("msgpack-array: structs are stored by position; only a reader with the writer's schema fingerprint decodes them")

// UnmarshalStrict refuses: see errPositional.
func (msgpackArraySerializer) UnmarshalStrict([]byte, any) error { return errPositional }

// compactSerializer picks the serializer Options.Compact writes v with
// when the Codec's serializer is ser; schema reports a fingerprint in the
// fields. It returns ser itself when no smaller form applies.
func compactSerializer(ser Serializer, v any, schema bool) Serializer {
	if ser.ID() != IDMsgPack {
		return ser
	}
	if _, ok := ser.(msgpackSerializer); !ok {
		return ser // a user's replacement of id 1
	}
	t := reflect.TypeOf(v)
	if t == nil {
		return ser
	}
	for t.Kind() == reflect.Pointer {
		if encodesItself(t) {
			return ser
		}
		t = t.Elem()
	}
	switch {
	case encodesItself(t):
		return ser
	case t.Kind() == reflect.String:
		if s, ok := stringOf(v); ok && utf8.ValidString(s) {
			return stringSerializer{}
		}
	case t.Kind() == reflect.Struct && schema:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return ser
		}
		return msgpackArraySerializer{}
	}
	return ser
}

func stringOf(v any) (string, bool) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "", false
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.String {
		return "", false
	}
	return rv.String(), true
}

// appendCompactHeader appends the version 3 header of h.
func appendCompactHeader(dst []byte, h *Header) []byte {
	layout := byte(0)
	if h.Serializer <= compactSerMask {
		layout = h.Serializer
	}
	if h.Compressor != IDNone {
		layout |= compactCompressed
	}
	if h.Fields.HasSchema {
		layout |= compactSchema
	}
	secs := int64(-1)
	if !h.Fields.Written.IsZero() {
		secs = int64(h.Fields.Written.Sub(CompactEpoch) / time.Second)
		if secs >= 0 && secs <= maxCompactSecs {
			layout |= compactWritten
		}
	}
	rest := h.Fields
	rest.HasSchema, rest.Schema, rest.Written = false, 0, time.Time{}
	if !rest.empty() {
		layout |= compactFields
	}
	dst = append(dst, Magic0, Magic1, VersionCompact, layout)
	if layout&compactSerMask == 0 {
		dst = append(dst, h.Serializer)
	}
	if layout&compactSchema != 0 {
		dst = binary.BigEndian.AppendUint32(dst, h.Fields.Schema)
	}
	if layout&compactWritten != 0 {
		dst = binary.AppendUvarint(dst, uint64(secs))
	}
	if layout&compactFields != 0 {
		dst = appendFields(dst, &rest)
	}
	if layout&compactCompressed != 0 {
		dst = append(dst, h.Compressor)
		dst = binary.AppendUvarint(dst, uint64(h.Dict))
		dst = binary.AppendUvarint(dst, uint64(h.RawLen))
	}
	return dst
}

// parseCompact parses the version 3 header after byte 2 into h.
func parseCompact(data []byte, h *Header) error {
	if len(data) < 4 {
		return fmt.Errorf("%w: no layout byte", ErrTruncated)
	}
	layout := data[3]
	if layout&compactReserved != 0 {
		return fmt.Errorf("%w: compact layout bit %#02x", ErrNotUnderstood, compactReserved)
	}
	h.Kind = KindValue
	off := 4
	h.Serializer = layout & compactSerMask
	if h.Serializer == 0 {
		if len(data) < off+1 {
			return fmt.Errorf("%w: serializer id", ErrTruncated)
		}
		h.Serializer = data[off]
		off++
		if h.Serializer <= compactSerMask {
			return fmt.Errorf("%w: serializer id %d written as a byte", ErrCorrupt, h.Serializer)
		}
	}
	if layout&compactSchema != 0 {
		if len(data) < off+4 {
			return fmt.Errorf("%w: schema fingerprint", ErrTruncated)
		}
		h.Fields.Schema, h.Fields.HasSchema = binary.BigEndian.Uint32(data[off:]), true
		off += 4
	}
	if layout&compactWritten != 0 {
		s, n := binary.Uvarint(data[off:])
		switch {
		case n == 0:
			return fmt.Errorf("%w: write time", ErrTruncated)
		case n < 0 || s > maxCompactSecs:
			return fmt.Errorf("%w: write time out of range", ErrCorrupt)
		}
		h.Fields.Written = CompactEpoch.Add(time.Duration(s) * time.Second)
		off += n
	}
	if layout&compactFields != 0 {
		fl, n := binary.Uvarint(data[off:])
		switch {
		case n == 0:
			return fmt.Errorf("%w: field section length", ErrTruncated)
		case n < 0 || fl > MaxFieldsLen:
			return fmt.Errorf("%w: field section length out of range", ErrCorrupt)
		case fl > uint64(len(data)-off-n):
			return fmt.Errorf("%w: field section of %d bytes, %d left", ErrTruncated, fl, len(data)-off-n)
		}
		var f Fields
		if err := parseFields(data[off+n:off+n+int(fl)], &f); err != nil {
			return err
		}
		if f.HasSchema || !f.Written.IsZero() {
			return fmt.Errorf("%w: schema or written time in a compact entry's field section", ErrCorrupt)
		}
		f.HasSchema, f.Schema, f.Written = h.Fields.HasSchema, h.Fields.Schema, h.Fields.Written
		h.Fields = f
		off += n + int(fl)
	}
	if layout&compactCompressed != 0 {
		if len(data) < off+1 {
			return fmt.Errorf("%w: compressor id", ErrTruncated)
		}
		h.Compressor = data[off]
		off++
		if h.Compressor == IDNone {
			return fmt.Errorf("%w: compressed flag with compressor 0", ErrCorrupt)
		}
		var err error
		if off, err = parseDictAndLen(data, off, h); err != nil {
			return err
		}
	} else {
		h.RawLen = len(data) - off
	}
	h.Len = off
	return nil
}
