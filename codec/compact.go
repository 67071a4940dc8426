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

	// compactS2 is bit 4 of byte 2: the payload is a Snappy block
	// (compressor s2), which starts with its own length; no compressor
	// byte. Bits 5-7 of byte 2 are reserved (not understood).
	compactS2 byte = 0x10
	// compactRefresh is bit 5 of byte 2: after the write time, the TTL in
	// whole seconds and the load cost in microseconds (two uvarints), the
	// fields early refresh reads, which every Fetch writes.
	compactRefresh byte = 0x20
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
	// UseArrayEncodedStructs, integers in their fewest bytes): what
	// Options.Compact writes under MsgPack
	// with a schema fingerprint for a struct, or a slice, array or map of
	// structs. Field names are not
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
	e.enc.SetCustomStructTag(fallbackTag) // no names, but the same fields
	e.enc.SetSortMapKeys(true)            // as MsgPack: one shape, one byte string
	// int64 fields in the fewest bytes (msgpack/v5 writes them as 9 by
	// default); any integer encoding decodes into any integer field, and
	// these types hold no interface that would see the narrower type.
	e.enc.UseCompactInts(true)
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
// when the Codec's serializer is ser; positional reports a fingerprint in
// the fields and Options.PositionalStructs (structs as arrays). It returns ser itself when no smaller form applies.
func compactSerializer(ser Serializer, v any, positional bool) Serializer {
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
	var form byte
	if f, ok := compactForms.Load(t); ok {
		form = f.(byte)
	} else {
		form = compactForm(t)
		compactForms.Store(t, form)
	}
	switch form {
	case IDString:
		if s, ok := stringOf(v); ok && utf8.ValidString(s) {
			return stringSerializer{}
		}
	case IDMsgPackArray:
		if rv := reflect.ValueOf(v); positional && !(rv.Kind() == reflect.Pointer && rv.IsNil()) {
			return msgpackArraySerializer{}
		}
	}
	return ser
}

// compactForms caches compactForm by type: Encode must not walk a type
// on every call.
var compactForms sync.Map // reflect.Type -> byte

// compactForm is the serializer id Options.Compact may write values of
// type t with under MsgPack (IDString, IDMsgPackArray), or IDMsgPack.
func compactForm(t reflect.Type) byte {
	for t.Kind() == reflect.Pointer && !encodesItself(t) {
		t = t.Elem()
	}
	switch {
	case encodesItself(t):
	case t.Kind() == reflect.String:
		return IDString
	case holdsStruct(t, 0) && !holdsInterface(t, map[reflect.Type]bool{}):
		return IDMsgPackArray
	}
	return IDMsgPack
}

// holdsInterface reports whether a value of t can hold an interface
// value: a struct stored there would decode as an array (an `any` field
// gets []any, not the map the version 2 form gives), so such types keep
// their field names.
func holdsInterface(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] || encodesItself(t) {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsInterface(t.Elem(), seen)
	case reflect.Map:
		return holdsInterface(t.Key(), seen) || holdsInterface(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); (f.IsExported() || f.Anonymous) && holdsInterface(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// holdsStruct reports whether values of t encode a struct of their own
// (t is one, or a slice, array, map or pointer of one), which
// MsgPackArray writes without its field names.
func holdsStruct(t reflect.Type, depth int) bool {
	if depth > 8 || encodesItself(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsStruct(t.Elem(), depth+1)
	case reflect.Map:
		return holdsStruct(t.Elem(), depth+1)
	}
	return false
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

// compactHeaderLen is the length of h's compact header if its payload
// were stored uncompressed.
func compactHeaderLen(h *Header) int {
	u := *h
	u.Compressor, u.Dict, u.Fields.DictDigest = IDNone, 0, DictDigest{}
	var buf [64]byte
	return len(appendCompactHeader(buf[:0], &u))
}

// appendCompactHeader appends the version 3 header of h.
func appendCompactHeader(dst []byte, h *Header) []byte {
	layout := byte(0)
	if h.Serializer <= compactSerMask {
		layout = h.Serializer
	}
	version := VersionCompact
	switch h.Compressor {
	case IDNone:
	case IDS2:
		version |= compactS2
	default:
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
	ttl := h.Fields.TTL / time.Second
	refresh := h.Fields.TTL > 0 && h.Fields.TTL%time.Second == 0 && ttl <= maxCompactSecs && h.Fields.Cost >= 0
	if refresh {
		rest.TTL, rest.Cost = 0, 0
		version |= compactRefresh
	}
	if !rest.empty() {
		layout |= compactFields
	}
	dst = append(dst, Magic0, Magic1, version, layout)
	if layout&compactSerMask == 0 {
		dst = append(dst, h.Serializer)
	}
	if layout&compactSchema != 0 {
		dst = binary.BigEndian.AppendUint32(dst, h.Fields.Schema)
	}
	if layout&compactWritten != 0 {
		dst = binary.AppendUvarint(dst, uint64(secs))
	}
	if refresh {
		dst = binary.AppendUvarint(dst, uint64(ttl))
		dst = binary.AppendUvarint(dst, uint64(h.Fields.Cost.Microseconds()))
	}
	if layout&compactFields != 0 {
		dst = appendFields(dst, &rest)
	}
	if layout&compactCompressed != 0 {
		dst = append(dst, h.Compressor)
		if compactHasDict(h.Compressor) {
			dst = binary.AppendUvarint(dst, uint64(h.Dict))
		}
		if compactHasLen(h.Compressor) {
			dst = binary.AppendUvarint(dst, uint64(h.RawLen))
		}
	}
	return dst
}

// compactHasDict reports whether a compact entry names a dictionary id
// after compressor comp: every compressor but s2, which takes none.
func compactHasDict(comp byte) bool { return comp != IDS2 }

// compactHasLen reports whether a compact entry stores the uncompressed
// length after compressor comp: every compressor but s2 and s2-dict, whose
// block starts with that length (a uvarint) itself.
func compactHasLen(comp byte) bool { return comp != IDS2 && comp != IDS2Dict }

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
	refresh := data[2]&compactRefresh != 0
	if refresh {
		ttl, n := binary.Uvarint(data[off:])
		if n <= 0 {
			return fmt.Errorf("%w: ttl", ErrTruncated)
		}
		off += n
		cost, m := binary.Uvarint(data[off:])
		switch {
		case m == 0:
			return fmt.Errorf("%w: load cost", ErrTruncated)
		case m < 0 || ttl > maxCompactSecs || ttl == 0 || cost > maxCompactSecs*1e6:
			return fmt.Errorf("%w: ttl or load cost out of range", ErrCorrupt)
		}
		off += m
		h.Fields.TTL, h.Fields.Cost = time.Duration(ttl)*time.Second, time.Duration(cost)*time.Microsecond
	}
	if layout&compactFields != 0 {
		start, end, err := fieldSection(data, off)
		if err != nil {
			return err
		}
		var f Fields
		if err := parseFields(data[start:end], &f); err != nil {
			return err
		}
		if f.HasSchema || !f.Written.IsZero() || (refresh && (f.TTL > 0 || f.Cost > 0)) {
			return fmt.Errorf("%w: a field of the compact header repeated in its field section", ErrCorrupt)
		}
		f.HasSchema, f.Schema, f.Written = h.Fields.HasSchema, h.Fields.Schema, h.Fields.Written
		if refresh {
			f.TTL, f.Cost = h.Fields.TTL, h.Fields.Cost
		}
		h.Fields = f
		off = end
	}
	if data[2]&compactS2 != 0 {
		if layout&compactCompressed != 0 {
			return fmt.Errorf("%w: s2 bit and a compressor byte", ErrCorrupt)
		}
		h.Compressor = IDS2
	} else if layout&compactCompressed != 0 {
		if len(data) < off+1 {
			return fmt.Errorf("%w: compressor id", ErrTruncated)
		}
		h.Compressor = data[off]
		off++
		if h.Compressor == IDNone || h.Compressor == IDS2 {
			return fmt.Errorf("%w: compressor byte %d (0 is none; s2 is byte 2's bit 0x10)", ErrCorrupt, h.Compressor)
		}
	}
	if h.Compressor != IDNone {
		if compactHasDict(h.Compressor) {
			n, err := parseDictID(data[off:], h)
			if err != nil {
				return err
			}
			off += n
		}
		// A Snappy or S2 block starts with its own uncompressed length:
		// the header does not repeat it.
		n, err := parseRawLen(data[off:], h)
		if err != nil {
			return err
		}
		if compactHasLen(h.Compressor) {
			off += n
		}
	} else {
		h.RawLen = len(data) - off
	}
	h.Len = off
	return nil
}
