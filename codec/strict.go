package codec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// ErrSchemaMismatch reports a value that was written for another Go type:
// its schema fingerprint differs from the reader's (or it has none) and a
// strict decode failed, because the value has a field the reader's type
// does not have or a value of another kind. It matches ErrDeserialize and
// so ErrMalformed.
var ErrSchemaMismatch = fmt.Errorf("%w: written for another type (schema fingerprint differs and a strict decode failed)", ErrDeserialize)

// StrictUnmarshaler is implemented by serializers that can decode in a
// strict mode: a field in the data that the destination struct does not
// have, a value of a kind the destination cannot hold, or bytes after the
// value are errors instead of being skipped. DecodeStrict uses it; for
// serializers without it, DecodeStrict decodes as Decode does. MsgPack and
// JSON implement it.
type StrictUnmarshaler interface {
	UnmarshalStrict(data []byte, v any) error
}

var (
	_ StrictUnmarshaler = msgpackSerializer{}
	_ StrictUnmarshaler = jsonSerializer{}
)

// strictDest carries a destination through Decode to unmarshal, asking
// for the serializer's strict mode.
type strictDest struct{ v any }

// unmarshal is the serializer call of Decode: strict when DecodeStrict
// asked for it and the serializer has a strict mode. stored is the size
// of the whole entry: msgpack's allocation bound is that of the smaller
// of the payload and the stored bytes, so a compressed payload cannot
// multiply the decompression ratio by the per-byte bound.
func unmarshal(ser Serializer, data []byte, v any, stored int) error {
	if _, ok := ser.(msgpackArraySerializer); ok {
		if _, strict := v.(strictDest); strict {
			return errPositional
		}
		return msgpackSerializer{}.decodeBounded(data, v, AllocBound(min(len(data), stored)), false)
	}
	if ms, ok := ser.(msgpackSerializer); ok {
		sd, strict := v.(strictDest)
		if strict {
			v = sd.v
		}
		return ms.decodeBounded(data, v, AllocBound(min(len(data), stored)), strict)
	}
	if _, ok := ser.(jsonSerializer); ok && len(data) > stored {
		// Compressed JSON: its decode is bound by the bytes stored too.
		if err := checkJSON(data, AllocBound(stored)); err != nil {
			return err
		}
	}
	if sd, ok := v.(strictDest); ok {
		if su, ok := ser.(StrictUnmarshaler); ok {
			return su.UnmarshalStrict(data, sd.v)
		}
		return ser.Unmarshal(data, sd.v)
	}
	return ser.Unmarshal(data, v)
}

// DecodeStrict is Decode with the serializer's strict mode (see
// StrictUnmarshaler): it fails where Decode would silently drop fields
// the destination does not have. Use it for values whose schema
// fingerprint differs from the reader's.
func (c *Codec) DecodeStrict(data []byte, v any) (Header, error) {
	return c.Decode(data, strictDest{v})
}

// msgpackDecoder is a pooled decoder reading from a reusable
// bytes.Reader (msgpack.Unmarshal allocates one per call).
type msgpackDecoder struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

var msgpackDecoders = sync.Pool{New: func() any {
	d := &msgpackDecoder{}
	d.dec = msgpack.NewDecoder(&d.r)
	return d
}}

func (s msgpackSerializer) UnmarshalStrict(data []byte, v any) error {
	return s.decodeBounded(data, v, AllocBound(len(data)), true)
}

// msgpackDecode decodes data, already checked, as msgpack.Unmarshal does;
// strict, it rejects unknown fields and bytes after the value.
func msgpackDecode(data []byte, v any, strict bool) error {
	err := msgpackDecodeOnce(data, v, strict)
	if err == nil || !strict || !strings.HasPrefix(err.Error(), "msgpack: unknown field ") {
		return err
	}
	// A key that names a field only without case (docs/FORMAT.md, "Field
	// names"): decode again with the field's own names, into a fresh value.
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return err
	}
	folded, changed := foldKeys(data, rv.Type().Elem())
	if !changed {
		return err
	}
	rv.Elem().SetZero()
	return msgpackDecodeOnce(folded, v, strict)
}

func msgpackDecodeOnce(data []byte, v any, strict bool) error {
	d := msgpackDecoders.Get().(*msgpackDecoder)
	defer msgpackDecoders.Put(d)
	d.r.Reset(data)
	d.dec.Reset(&d.r) // clears the flags, so set them each time
	d.dec.DisallowUnknownFields(strict)
	d.dec.SetCustomStructTag(fallbackTag)
	// As msgpack.Unmarshal does: CheckMsgPack has bounded every length
	// claim by the bytes that remain, so preallocating is safe.
	d.dec.UsePreallocateValues(true)
	err := d.dec.Decode(v)
	rest := d.r.Len()
	d.r.Reset(nil)
	if err != nil {
		return err
	}
	if strict && rest != 0 {
		return fmt.Errorf("msgpack: %d bytes after the value", rest)
	}
	return nil
}

func (jsonSerializer) UnmarshalStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("json: data after the value")
	}
	return nil
}

// DecodeSchema decodes data into v for a reader whose type has the
// schema fingerprint schema (Codec.Fingerprint). A value written with the
// same fingerprint decodes as with Decode, at the same cost. A value
// written with another fingerprint, or with none (written before
// fingerprints, or by a writer that does not set them), decodes with
// DecodeStrict: if that succeeds the value is compatible (for example, the
// reader's type has a field the writer's did not), and if it fails the
// error matches ErrSchemaMismatch.
func (c *Codec) DecodeSchema(data []byte, v any, schema uint32) (Header, error) {
	return c.DecodeSchemaContext(context.Background(), data, v, schema)
}

// DecodeSchemaContext is DecodeSchema whose dictionary lookup ends when
// ctx is done (see DecodeContext).
func (c *Codec) DecodeSchemaContext(ctx context.Context, data []byte, v any, schema uint32) (Header, error) {
	h, err := ParseHeader(data)
	if err != nil || h.Kind != KindValue {
		return h, err
	}
	if h.Fields.HasSchema && h.Fields.Schema == schema {
		return c.decodeValue(ctx, h, data, v) // the honest path: Decode's cost and a compare
	}
	h, err = c.decodeValue(ctx, h, data, strictDest{v})
	if err != nil && errors.Is(err, ErrDeserialize) {
		err = fmt.Errorf("%w: %w", ErrSchemaMismatch, err)
	}
	return h, err
}

// DecodeBytesOwned is DecodeSchemaContext into a []byte, for bytes the
// caller gives away (a read's own buffer, used for nothing else
// afterwards): a value stored uncompressed under MsgPack is returned as a
// slice of data (its capacity ends with the value, so an append copies)
// instead of a copy. Anything else decodes as DecodeSchemaContext does.
func (c *Codec) DecodeBytesOwned(ctx context.Context, data []byte, schema uint32) ([]byte, Header, error) {
	var h Header
	if err := parseHeader(data, &h); err == nil && c.plainMsgPack(&h, len(data), schema) {
		if b, ok := msgpackBytes(data[h.Len:]); ok {
			return b, h, nil
		}
	}
	b := new([]byte)
	h, err := c.DecodeSchemaContext(ctx, data, b, schema)
	return *b, h, err
}

// plainMsgPack reports an honest value entry of n bytes whose payload
// (after h.Len) is MsgPack as stored: no compressor, no dictionary, the
// reader's schema, within the decode limit.
func (c *Codec) plainMsgPack(h *Header, n int, schema uint32) bool {
	if h.Kind != KindValue || !h.Fields.HasSchema || h.Fields.Schema != schema ||
		h.Compressor != IDNone || h.Dict != 0 || h.RawLen > c.maxDecoded || n-h.Len != h.RawLen {
		return false
	}
	_, ok := c.sers[h.Serializer].(msgpackSerializer)
	return ok
}

// msgpackBytes returns the bytes of p when p is exactly one MsgPack bin
// or str value (or nil), as a slice of p: what msgpack decodes into a
// []byte, without the copy. ok is false for anything else (the caller
// decodes it the usual way).
func msgpackBytes(p []byte) (b []byte, ok bool) {
	if len(p) == 0 {
		return nil, false
	}
	c, off, n := p[0], 1, 0
	switch {
	case c == 0xc0: // nil
		return nil, len(p) == 1
	case c >= 0xa0 && c <= 0xbf: // fixstr
		n = int(c & 0x1f)
	case c == 0xc4 || c == 0xd9 || c == 0xc5 || c == 0xda || c == 0xc6 || c == 0xdb:
		l, ok := readLen(p, &off, int(lenWidth[c]))
		if !ok || l > uint64(len(p)) {
			return nil, false
		}
		n = int(l)
	default:
		return nil, false
	}
	if len(p)-off != n {
		return nil, false
	}
	return p[off:len(p):len(p)], true
}

// readable reports whether readers accept payload stored compressed in
// an entry of stored bytes: a msgpack or JSON payload so compressible
// that its decode would exceed the allocation bound of the stored size is
// written uncompressed instead (readers refuse what would cost more).
func readable(ser Serializer, payload []byte, stored int) bool {
	if stored >= len(payload) {
		return true
	}
	switch ser.(type) {
	case msgpackSerializer, msgpackArraySerializer:
		if uint64(len(payload))*msgpackMaxCostPerByte <= AllocBound(stored) {
			// No msgpack of this length can exceed the bound: skip the
			// walk (every payload under about 2.3 KB).
			return true
		}
		return checkMsgPack(payload, AllocBound(stored)) == nil
	case jsonSerializer:
		return checkJSON(payload, AllocBound(stored)) == nil
	}
	return true
}
