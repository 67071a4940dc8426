package codec

import (
	"encoding"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// Schema fingerprints let a reader tell a value written for its own Go
// type from one written for another (a field renamed or retyped in a
// deploy) without decoding it: the writer stores the fingerprint of its
// type in the envelope (Fields.Schema) and a reader compares it with its
// own. docs/FORMAT.md ("Schema evolution") specifies the description that
// is hashed, with test vectors.

// SchemaOf returns the canonical description of the shape of values of
// type t as a serializer that names struct fields by the struct tag tag
// encodes them: "msgpack" is MsgPack's field-name rule (docs/FORMAT.md,
// "Field names": the `msgpack` tag, else the `json` tag, else the Go
// name), "json" the `json` tag, "" Go field names. Only what the
// encoded form depends on is described: field names as encoded, in
// declaration order, and the kind of each value. Go type names, unexported
// fields, fields tagged "-", omitempty and pointer indirections are left
// out, so renaming a type or turning a field into a pointer keeps the
// description; all integer kinds are "int" and all floats "float", since a
// decoder converts between them.
//
// Grammar: bool, int, float, complex, string, bytes ([]byte and [N]byte),
// any (every interface type), []E (slices and arrays), map[K]E,
// {name:T,name:T} (structs; untagged embedded structs are inlined as the
// encoders do), custom(pkg/path.Name) (a type that encodes itself:
// msgpack.CustomEncoder, msgpack.Marshaler, json.Marshaler,
// encoding.BinaryMarshaler or encoding.TextMarshaler, such as time.Time),
// @N (a reference to the struct N levels up the walk's stack, counted from
// the outermost as 0, for recursive types) and invalid(kind) for kinds no
// serializer encodes (chan, func, unsafe.Pointer).
func SchemaOf(t reflect.Type, tag string) string {
	w := schemaWalk{tag: tag}
	if t == nil {
		return "any"
	}
	w.walk(t)
	return w.b.String()
}

// Fingerprint returns the 32-bit FNV-1a hash of SchemaOf(t, tag): the
// value writers store in Fields.Schema.
func Fingerprint(t reflect.Type, tag string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(SchemaOf(t, tag)))
	return h.Sum32()
}

// Fingerprint returns the schema fingerprint of values of type t as this
// Codec's serializer encodes them (struct fields named by their msgpack
// tag for MsgPack, json tag for JSON, Go names otherwise).
func (c *Codec) Fingerprint(t reflect.Type) uint32 {
	return Fingerprint(t, structTag(c.ser))
}

// structTag is the struct tag the serializer names fields by.
func structTag(s Serializer) string {
	switch s.(type) {
	case msgpackSerializer:
		return "msgpack"
	case jsonSerializer:
		return "json"
	}
	return ""
}

type schemaWalk struct {
	tag   string
	b     strings.Builder
	stack []reflect.Type // structs being described, outermost first
	// inlined marks the stack's embedded structs whose fields are
	// written inline; inlinedRef is set when an @N names one of them
	// (the description then has no struct N levels down to name).
	inlined    []bool
	inlinedRef bool
}

// PublishableSchema returns SchemaOf(t, tag) if a reader can give values
// of t their field names from it alone (ParseSchema, Schema.Named), or an
// error: a recursive reference to an embedded struct whose fields are
// inlined names a struct the description does not write out.
func PublishableSchema(t reflect.Type, tag string) (string, error) {
	w := schemaWalk{tag: tag}
	if t == nil {
		return "any", nil
	}
	w.walk(t)
	if w.inlinedRef {
		return "", fmt.Errorf("kura: codec: schema of %v: a recursive reference to an inlined embedded struct; readers could not name its fields", t)
	}
	return w.b.String(), nil
}

var (
	typCustomEncoder = reflect.TypeFor[msgpack.CustomEncoder]()
	typMsgMarshaler  = reflect.TypeFor[msgpack.Marshaler]()
	typJSONMarshaler = reflect.TypeFor[json.Marshaler]()
	typBinMarshaler  = reflect.TypeFor[encoding.BinaryMarshaler]()
	typTextMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	typBytes         = reflect.TypeFor[[]byte]()
)

// encodesItself reports a type whose encoding its own methods choose, so
// its fields say nothing about the bytes.
func encodesItself(t reflect.Type) bool {
	if t.Kind() == reflect.Interface {
		return false
	}
	pt := reflect.PointerTo(t)
	for _, it := range []reflect.Type{typCustomEncoder, typMsgMarshaler, typJSONMarshaler, typBinMarshaler, typTextMarshaler} {
		if t.Implements(it) || pt.Implements(it) {
			return true
		}
	}
	return false
}

func (w *schemaWalk) walk(t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() != "" && encodesItself(t) {
		w.b.WriteString("custom(")
		w.b.WriteString(t.PkgPath())
		w.b.WriteByte('.')
		w.b.WriteString(t.Name())
		w.b.WriteByte(')')
		return
	}
	switch t.Kind() {
	case reflect.Bool:
		w.b.WriteString("bool")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		w.b.WriteString("int")
	case reflect.Float32, reflect.Float64:
		w.b.WriteString("float")
	case reflect.Complex64, reflect.Complex128:
		w.b.WriteString("complex")
	case reflect.String:
		w.b.WriteString("string")
	case reflect.Interface:
		w.b.WriteString("any")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && (t.Kind() == reflect.Array || t.ConvertibleTo(typBytes)) {
			w.b.WriteString("bytes")
			return
		}
		w.b.WriteString("[]")
		w.walk(t.Elem())
	case reflect.Map:
		w.b.WriteString("map[")
		w.walk(t.Key())
		w.b.WriteByte(']')
		w.walk(t.Elem())
	case reflect.Struct:
		for i, s := range w.stack {
			if s == t {
				w.inlinedRef = w.inlinedRef || w.inlined[i]
				w.b.WriteByte('@')
				w.b.WriteString(strconv.Itoa(i))
				return
			}
		}
		w.stack, w.inlined = append(w.stack, t), append(w.inlined, false)
		w.b.WriteByte('{')
		w.fields(t, true)
		w.b.WriteByte('}')
		w.stack, w.inlined = w.stack[:len(w.stack)-1], w.inlined[:len(w.inlined)-1]
	default:
		w.b.WriteString("invalid(")
		w.b.WriteString(t.Kind().String())
		w.b.WriteByte(')')
	}
}

// fields writes the fields of struct t, comma-separated, and reports
// whether the next one is the first written.
func (w *schemaWalk) fields(t reflect.Type, first bool) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get(w.tag)
		if tag == "" && w.tag == "msgpack" {
			tag = f.Tag.Get(fallbackTag) // as msgpack's SetCustomStructTag
		}
		name, opts, _ := strings.Cut(tag, ",")
		if w.tag == "" {
			name, opts = "", ""
		}
		if name == "-" && (opts == "" || w.tag == "msgpack") {
			continue // msgpack leaves out "-,..." too; encoding/json names it "-"
		}
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct && !encodesItself(ft) && !strings.Contains(opts, "noinline") {
			// Encoders inline an untagged embedded struct's fields.
			if !w.onStack(ft) {
				w.stack, w.inlined = append(w.stack, ft), append(w.inlined, true)
				first = w.fields(ft, first)
				w.stack, w.inlined = w.stack[:len(w.stack)-1], w.inlined[:len(w.inlined)-1]
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if !first {
			w.b.WriteByte(',')
		}
		first = false
		w.b.WriteString(strconv.Quote(name))
		w.b.WriteByte(':')
		w.walk(f.Type)
	}
	return first
}

func (w *schemaWalk) onStack(t reflect.Type) bool {
	for _, s := range w.stack {
		if s == t {
			return true
		}
	}
	return false
}
