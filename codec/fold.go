package codec

import (
	"bytes"
	"reflect"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Field names that differ only in case (docs/FORMAT.md, "Field names"): a
// Go reader matches a stored key to a struct field exactly first, then
// case-insensitively, as encoding/json does, so an untagged
// `struct{ ID int; Name string }` reads the {id, name} a Node or Ruby
// developer writes. msgpack/v5 matches names exactly; foldKeys rewrites
// the keys that match only without case to the field's own name before a
// second decode. It runs only after a strict decode failed on an unknown
// field (a value from another writer), never on the honest path.

// foldField is a struct field as the field-name rule names it.
type foldField struct {
	name string
	typ  reflect.Type
}

// foldStruct is what foldKeys needs of a struct type: its fields by name,
// and by lower-case name for the keys that match only without case.
type foldStruct struct {
	exact map[string]reflect.Type
	lower map[string]foldField // the first field declared wins
}

var foldStructs sync.Map // reflect.Type -> *foldStruct

func foldInfo(t reflect.Type) *foldStruct {
	if fs, ok := foldStructs.Load(t); ok {
		return fs.(*foldStruct)
	}
	fs := &foldStruct{exact: map[string]reflect.Type{}, lower: map[string]foldField{}}
	var add func(t reflect.Type, seen []reflect.Type)
	add = func(t reflect.Type, seen []reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("msgpack")
			if tag == "" {
				tag = f.Tag.Get(fallbackTag)
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct && !encodesItself(ft) && !strings.Contains(opts, "noinline") {
				inner := false
				for _, s := range seen {
					inner = inner || s == ft
				}
				if !inner {
					add(ft, append(seen, ft))
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := fs.exact[name]; !dup {
				fs.exact[name] = f.Type
			}
			if _, dup := fs.lower[strings.ToLower(name)]; !dup {
				fs.lower[strings.ToLower(name)] = foldField{name, f.Type}
			}
		}
	}
	add(t, []reflect.Type{t})
	actual, _ := foldStructs.LoadOrStore(t, fs)
	return actual.(*foldStruct)
}

// foldKeys returns data with every map key that names a field of a struct
// in t only case-insensitively replaced by the field's name, and whether
// anything changed. data has passed checkMsgPack; anything unexpected
// leaves it as it is (the decode reports it).
func foldKeys(data []byte, t reflect.Type) ([]byte, bool) {
	w := folder{n: len(data)}
	w.r.Reset(data)
	// A bytes.Reader is an io.ByteScanner, so the decoder reads it
	// without buffering and w.off() is where the decoder stands.
	w.d = msgpack.NewDecoder(&w.r)
	if !w.value(t, 0) || len(w.edits) == 0 {
		return data, false
	}
	out := make([]byte, 0, len(data)+8*len(w.edits))
	last := 0
	for _, e := range w.edits {
		out = append(out, data[last:e.start]...)
		out = appendMsgpackString(out, e.name)
		last = e.end
	}
	return append(out, data[last:]...), true
}

type foldEdit struct {
	start, end int
	name       string
}

// folder walks msgpack with msgpack/v5's Decoder, noting the keys to
// rewrite.
type folder struct {
	r     bytes.Reader
	d     *msgpack.Decoder
	n     int // len(data)
	edits []foldEdit
}

// off is the offset of the next byte the decoder reads.
func (w *folder) off() int { return w.n - w.r.Len() }

// value walks the next value as type t (nil: skips it).
func (w *folder) value(t reflect.Type, depth int) bool {
	if depth > DefaultMaxDepth {
		return false
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	c, err := w.d.PeekCode()
	if err != nil {
		return false
	}
	isMap := msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
	isArr := msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
	switch {
	case t == nil || encodesItself(t):
	case t.Kind() == reflect.Struct && isMap:
		n, err := w.d.DecodeMapLen()
		if err != nil {
			return false
		}
		fs := foldInfo(t)
		for range n {
			start := w.off()
			kc, err := w.d.PeekCode()
			if err != nil {
				return false
			}
			var ft reflect.Type
			if msgpcode.IsString(kc) {
				key, err := w.d.DecodeString()
				if err != nil {
					return false
				}
				if typ, hit := fs.exact[key]; hit {
					ft = typ
				} else if f, hit := fs.lower[strings.ToLower(key)]; hit && strings.EqualFold(f.name, key) {
					w.edits = append(w.edits, foldEdit{start, w.off(), f.name})
					ft = f.typ
				}
			} else if w.d.Skip() != nil {
				return false
			}
			if !w.value(ft, depth+1) {
				return false
			}
		}
		return true
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && isArr:
		n, err := w.d.DecodeArrayLen()
		if err != nil {
			return false
		}
		for range n {
			if !w.value(t.Elem(), depth+1) {
				return false
			}
		}
		return true
	case t.Kind() == reflect.Map && isMap:
		n, err := w.d.DecodeMapLen()
		if err != nil {
			return false
		}
		for range n {
			if w.d.Skip() != nil || !w.value(t.Elem(), depth+1) {
				return false
			}
		}
		return true
	}
	return w.d.Skip() == nil
}
