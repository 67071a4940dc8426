package codec

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Serializer turns a Go value into payload bytes and back.
//
// Implementations must be safe for concurrent use. Unmarshal must not keep
// data after it returns: the Codec reuses that buffer.
type Serializer interface {
	// ID is the byte stored in the envelope header. Ids 1..127 are
	// reserved for kura's own serializers; 128..255 are for users. 0 is
	// invalid.
	ID() byte
	// Name is a short lower-case name for tools and errors ("msgpack").
	Name() string
	// Marshal appends the encoding of v to dst and returns the extended
	// slice.
	Marshal(dst []byte, v any) ([]byte, error)
	// Unmarshal decodes data into v, which is a pointer.
	Unmarshal(data []byte, v any) error
}

// Built-in serializer ids (see docs/FORMAT.md).
const (
	IDMsgPack byte = 1
	IDJSON    byte = 2
	IDRaw     byte = 3
)

// MsgPack returns the default serializer: MessagePack via
// github.com/vmihailenco/msgpack/v5 with its default settings and sorted
// map keys, so the payload is byte-for-byte what msgpack.Marshal produces
// after Encoder.SetSortMapKeys(true) and SetCustomStructTag("json")
// (struct fields named by the field-name rule of docs/FORMAT.md: the
// `msgpack` tag, else the `json` tag, else the Go name; maps of string
// to any, string or bool in key order). Sorted keys
// make one document shape always the same bytes, which is what lets a
// dictionary match across keys; readers are unaffected (any msgpack
// decoder reads maps in any order). Generic values (map[string]any,
// []any and what encoding/json puts in them) are written without
// reflection.
func MsgPack() Serializer { return msgpackSerializer{} }

// JSON returns a serializer using encoding/json. It is slower and larger
// than MsgPack but readable by anything.
func JSON() Serializer { return jsonSerializer{} }

// Raw returns the serializer for values that are already bytes: []byte,
// string, and pointers to them. It costs one copy and nothing else. Other
// types fail with ErrUnsupportedType.
func Raw() Serializer { return rawSerializer{} }

var (
	_ Serializer = msgpackSerializer{}
	_ Serializer = jsonSerializer{}
	_ Serializer = rawSerializer{}
)

// appendWriter lets an encoder that wants an io.Writer append to a slice
// the caller owns, instead of a bytes.Buffer we would copy out of.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *appendWriter) WriteByte(c byte) error {
	w.b = append(w.b, c)
	return nil
}

func (w *appendWriter) WriteString(s string) (int, error) {
	w.b = append(w.b, s...)
	return len(s), nil
}

type msgpackEncoder struct {
	w   appendWriter
	enc *msgpack.Encoder
}

var msgpackEncoders = sync.Pool{New: func() any {
	e := &msgpackEncoder{}
	e.enc = msgpack.NewEncoder(&e.w)
	return e
}}

type msgpackSerializer struct{}

// fallbackTag is the struct tag msgpack names a field by when it has no
// `msgpack` tag (docs/FORMAT.md, "Field names"): a Go struct written for
// encoding/json shares its names with Node's and Ruby's objects.
const fallbackTag = "json"

func (msgpackSerializer) ID() byte     { return IDMsgPack }
func (msgpackSerializer) Name() string { return "msgpack" }

func (msgpackSerializer) Marshal(dst []byte, v any) ([]byte, error) {
	if isGeneric(v) {
		if out, ok := appendGeneric(dst, v, 0); ok {
			return out, nil
		}
	}
	e := msgpackEncoders.Get().(*msgpackEncoder)
	e.w.b = dst
	e.enc.Reset(&e.w)
	e.enc.SetSortMapKeys(true)            // Reset clears it
	e.enc.SetCustomStructTag(fallbackTag) // and this: the field-name rule
	err := e.enc.Encode(v)
	out := e.w.b
	e.w.b = nil
	msgpackEncoders.Put(e)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func (s msgpackSerializer) Unmarshal(data []byte, v any) error {
	return s.decodeBounded(data, v, AllocBound(len(data)), false)
}

// decodeBounded checks data with checkMsgPack under limit, then decodes
// it (strictly: see UnmarshalStrict).
func (msgpackSerializer) decodeBounded(data []byte, v any, limit uint64, strict bool) error {
	if err := checkMsgPack(data, limit); err != nil {
		return err
	}
	return msgpackDecode(data, v, strict)
}

type jsonSerializer struct{}

func (jsonSerializer) ID() byte     { return IDJSON }
func (jsonSerializer) Name() string { return "json" }

func (jsonSerializer) Marshal(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

func (jsonSerializer) Unmarshal(data []byte, v any) error {
	return json.Unmarshal(data, v)
}

type rawSerializer struct{}

func (rawSerializer) ID() byte     { return IDRaw }
func (rawSerializer) Name() string { return "raw" }

func (rawSerializer) Marshal(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case []byte:
		return append(dst, v...), nil
	case string:
		return append(dst, v...), nil
	case *[]byte:
		if v != nil {
			return append(dst, *v...), nil
		}
	case *string:
		if v != nil {
			return append(dst, *v...), nil
		}
	case json.RawMessage:
		return append(dst, v...), nil
	}
	return dst, fmt.Errorf("%w: raw serializer takes []byte, string or a pointer to one, not %T", ErrUnsupportedType, v)
}

func (rawSerializer) Unmarshal(data []byte, v any) error {
	switch v := v.(type) {
	case *[]byte:
		if v != nil {
			// Copy: data belongs to the Codec and is reused.
			*v = append([]byte(nil), data...)
			return nil
		}
	case *string:
		if v != nil {
			*v = string(data)
			return nil
		}
	case *json.RawMessage:
		if v != nil {
			*v = append(json.RawMessage(nil), data...)
			return nil
		}
	}
	return fmt.Errorf("%w: raw serializer decodes into *[]byte or *string, not %T", ErrUnsupportedType, v)
}
