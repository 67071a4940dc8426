package codec

import (
	"encoding/binary"
	"reflect"
	"strings"
	"sync"
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
	w := folder{p: data}
	if _, ok := w.value(0, t, 0); !ok || len(w.edits) == 0 {
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

type folder struct {
	p     []byte
	edits []foldEdit
}

// value walks the value at off as type t (nil: skip it) and returns the
// offset after it.
func (w *folder) value(off int, t reflect.Type, depth int) (int, bool) {
	if depth > DefaultMaxDepth {
		return 0, false
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	kind, n, next, ok := msgpackHead(w.p, off)
	if !ok {
		return 0, false
	}
	var elem reflect.Type
	switch {
	case t == nil || encodesItself(t):
	case t.Kind() == reflect.Struct && kind == 'm':
		fs := foldInfo(t)
		for range n {
			kk, kn, kv, ok := msgpackHead(w.p, next)
			if !ok {
				return 0, false
			}
			var ft reflect.Type
			if kk == 's' {
				key := string(w.p[kv : kv+kn])
				if typ, hit := fs.exact[key]; hit {
					ft = typ
				} else if f, hit := fs.lower[strings.ToLower(key)]; hit && strings.EqualFold(f.name, key) {
					w.edits = append(w.edits, foldEdit{next, kv + kn, f.name})
					ft = f.typ
				}
				next = kv + kn
			} else if next, ok = w.value(next, nil, depth+1); !ok {
				return 0, false
			}
			if next, ok = w.value(next, ft, depth+1); !ok {
				return 0, false
			}
		}
		return next, true
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && kind == 'a':
		elem = t.Elem()
		for range n {
			if next, ok = w.value(next, elem, depth+1); !ok {
				return 0, false
			}
		}
		return next, true
	case t.Kind() == reflect.Map && kind == 'm':
		elem = t.Elem()
		for range n {
			if next, ok = w.value(next, nil, depth+1); !ok {
				return 0, false
			}
			if next, ok = w.value(next, elem, depth+1); !ok {
				return 0, false
			}
		}
		return next, true
	}
	// Skip: a container's members, or the value itself.
	switch kind {
	case 'm':
		n *= 2
		fallthrough
	case 'a':
		for range n {
			if next, ok = w.value(next, nil, depth+1); !ok {
				return 0, false
			}
		}
		return next, true
	case 's':
		return next + n, true
	}
	return next, true
}

// msgpackHead reads the header of the msgpack value at p[off]: kind 'm'
// (map, n pairs), 'a' (array, n elements) or 's' (string, n bytes) with
// next the offset after the header, or 'x' with next the offset after the
// whole value.
func msgpackHead(p []byte, off int) (kind byte, n, next int, ok bool) {
	if off >= len(p) {
		return 0, 0, 0, false
	}
	c := p[off]
	off++
	size := func(w int) (int, bool) {
		if off+w > len(p) {
			return 0, false
		}
		var v uint64
		switch w {
		case 1:
			v = uint64(p[off])
		case 2:
			v = uint64(binary.BigEndian.Uint16(p[off:]))
		case 4:
			v = uint64(binary.BigEndian.Uint32(p[off:]))
		}
		off += w
		return int(v), v <= uint64(len(p))
	}
	fixed := func(w int) (byte, int, int, bool) { return 'x', 0, off + w, off+w <= len(p) }
	ext := func(w int) (byte, int, int, bool) {
		l, ok := size(w)
		return 'x', 0, off + 1 + l, ok && off+1+l <= len(p)
	}
	sized := func(kind byte, w int) (byte, int, int, bool) {
		l, ok := size(w)
		if kind == 'x' {
			return 'x', 0, off + l, ok && off+l <= len(p)
		}
		return kind, l, off, ok && (kind != 's' || off+l <= len(p))
	}
	switch {
	case c <= 0x7f || c >= 0xe0:
		return 'x', 0, off, true
	case c <= 0x8f:
		return 'm', int(c & 0x0f), off, true
	case c <= 0x9f:
		return 'a', int(c & 0x0f), off, true
	case c <= 0xbf:
		l := int(c & 0x1f)
		return 's', l, off, off+l <= len(p)
	}
	switch c {
	case 0xc0, 0xc2, 0xc3:
		return 'x', 0, off, true
	case 0xcc, 0xd0:
		return fixed(1)
	case 0xcd, 0xd1:
		return fixed(2)
	case 0xca, 0xce, 0xd2:
		return fixed(4)
	case 0xcb, 0xcf, 0xd3:
		return fixed(8)
	case 0xd4:
		return fixed(2)
	case 0xd5:
		return fixed(3)
	case 0xd6:
		return fixed(5)
	case 0xd7:
		return fixed(9)
	case 0xd8:
		return fixed(17)
	case 0xc7:
		return ext(1)
	case 0xc8:
		return ext(2)
	case 0xc9:
		return ext(4)
	case 0xc4:
		return sized('x', 1)
	case 0xc5:
		return sized('x', 2)
	case 0xc6:
		return sized('x', 4)
	case 0xd9:
		return sized('s', 1)
	case 0xda:
		return sized('s', 2)
	case 0xdb:
		return sized('s', 4)
	case 0xdc:
		return sized('a', 2)
	case 0xdd:
		return sized('a', 4)
	case 0xde:
		return sized('m', 2)
	case 0xdf:
		return sized('m', 4)
	}
	return 0, 0, 0, false // 0xc1
}
