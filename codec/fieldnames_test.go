package codec

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

const fieldNamesFile = "../testdata/format/field-names.json"

// The Go types of testdata/format/field-names.json (docs/FORMAT.md,
// "Field names"): one per clause of the rule.
type (
	fnJSON struct {
		ID    int     `json:"id"`
		Name  string  `json:"name"`
		Price float64 `json:"price"`
	}
	fnMsgPack struct {
		ID    int     `msgpack:"id"`
		Name  string  `msgpack:"name"`
		Price float64 `msgpack:"price"`
	}
	fnUntagged struct {
		ID    int
		Name  string
		Price float64
	}
	fnBoth struct {
		ID    int     `msgpack:"id" json:"productId"`
		Name  string  `json:"title"`
		Price float64 `msgpack:"price,omitempty" json:"cost"`
	}
	fnLeftOut struct {
		ID     int    `json:"id,omitempty"`
		Secret string `json:"-"`
		note   string
		Price  float64 `json:",omitempty"`
	}
	fnBase struct {
		ID int `json:"id"`
	}
	fnEmbedded struct {
		fnBase
		Name string `json:"name"`
	}
)

type fieldNameVector struct {
	Name        string         `json:"name"`
	Go          string         `json:"go"`
	Fields      []string       `json:"fields"`
	Description string         `json:"description"`
	Fingerprint string         `json:"fingerprint"`
	Value       map[string]any `json:"value"`
	MsgPack     string         `json:"msgpack"`
}

type fieldNamesFileT struct {
	Comment string            `json:"comment"`
	Rule    string            `json:"rule"`
	Vectors []fieldNameVector `json:"vectors"`
}

func fieldNameInputs() []struct {
	name, decl string
	v          any
} {
	return []struct {
		name, decl string
		v          any
	}{
		{"json tags", "struct { ID int `json:\"id\"`; Name string `json:\"name\"`; Price float64 `json:\"price\"` }", fnJSON{1, "lamp", 9.5}},
		{"msgpack tags", "struct { ID int `msgpack:\"id\"`; Name string `msgpack:\"name\"`; Price float64 `msgpack:\"price\"` }", fnMsgPack{1, "lamp", 9.5}},
		{"untagged", "struct { ID int; Name string; Price float64 }", fnUntagged{1, "lamp", 9.5}},
		{"msgpack tag first", "struct { ID int `msgpack:\"id\" json:\"productId\"`; Name string `json:\"title\"`; Price float64 `msgpack:\"price,omitempty\" json:\"cost\"` }", fnBoth{1, "lamp", 9.5}},
		{"left out", "struct { ID int `json:\"id,omitempty\"`; Secret string `json:\"-\"`; note string; Price float64 `json:\",omitempty\"` }", fnLeftOut{ID: 1, Secret: "s", note: "n", Price: 9.5}},
		{"embedded", "struct { Base; Name string `json:\"name\"` } with Base struct { ID int `json:\"id\"` }", fnEmbedded{fnBase{1}, "lamp"}},
	}
}

// TestFieldNameVectors: the Go side of the field-name rule. MsgPack names
// each field as the file says, the fingerprint describes those names, and
// the bytes decode back into the type.
func TestFieldNameVectors(t *testing.T) {
	c := mustNew(t, Options{})
	var f fieldNamesFileT
	f.Comment = "kura field-name rule vectors; see docs/FORMAT.md, \"Field names\". Regenerate with: go test ./codec -run TestFieldNameVectors -update"
	f.Rule = "a struct field is named by its msgpack tag; without one, by its json tag; without either, by its Go name. Fields tagged \"-\" and unexported fields are left out; untagged embedded structs are inlined. A Go reader matches a key to a field name exactly, else case-insensitively."
	for _, in := range fieldNameInputs() {
		typ := reflect.TypeOf(in.v)
		payload, err := c.Serializer().Marshal(nil, in.v)
		if err != nil {
			t.Fatal(err)
		}
		var generic map[string]any
		if err := c.Serializer().Unmarshal(payload, &generic); err != nil {
			t.Fatal(err)
		}
		v := fieldNameVector{
			Name: in.name, Go: in.decl,
			Description: SchemaOf(typ, "msgpack"),
			Fingerprint: hex.EncodeToString(be32(Fingerprint(typ, "msgpack"))),
			Value:       generic,
			MsgPack:     hex.EncodeToString(payload),
		}
		v.Fields = msgpackMapKeys(t, payload)
		f.Vectors = append(f.Vectors, v)

		// The decode side: the bytes come back into the type.
		dst := reflect.New(typ)
		if err := c.Serializer().Unmarshal(payload, dst.Interface()); err != nil {
			t.Fatalf("%s: %v", in.name, err)
		}
		want := reflect.ValueOf(in.v)
		if in.name == "left out" {
			want = reflect.ValueOf(fnLeftOut{ID: 1, Price: 9.5})
		}
		if !reflect.DeepEqual(dst.Elem().Interface(), want.Interface()) {
			t.Errorf("%s: decoded %+v, want %+v", in.name, dst.Elem().Interface(), want.Interface())
		}
	}
	want := map[string][]string{
		"json tags":         {"id", "name", "price"},
		"msgpack tags":      {"id", "name", "price"},
		"untagged":          {"ID", "Name", "Price"},
		"msgpack tag first": {"id", "title", "price"},
		"left out":          {"id", "Price"},
		"embedded":          {"id", "name"},
	}
	for _, v := range f.Vectors {
		if !reflect.DeepEqual(v.Fields, want[v.Name]) {
			t.Errorf("%s: fields %q, want %q", v.Name, v.Fields, want[v.Name])
		}
		// The description names the same fields, in the same order.
		if d, err := ParseSchema(v.Description); err != nil {
			t.Errorf("%s: description %s: %v", v.Name, v.Description, err)
		} else if got := schemaFieldNames(d); !reflect.DeepEqual(got, v.Fields) {
			t.Errorf("%s: description names %q, payload %q", v.Name, got, v.Fields)
		}
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	if *update {
		if err := os.WriteFile(fieldNamesFile, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(fieldNamesFile)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(old) != string(out) {
		t.Errorf("%s differs from what the codec writes; run go test ./codec -run TestFieldNameVectors -update and review the diff", fieldNamesFile)
	}
}

func schemaFieldNames(s *Schema) []string {
	var names []string
	for _, f := range s.Fields {
		names = append(names, f.Name)
	}
	return names
}

func be32(x uint32) []byte { return []byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)} }

// msgpackMapKeys returns the keys of the msgpack map p in the order
// written (the struct's declaration order).
func msgpackMapKeys(t *testing.T, p []byte) []string {
	t.Helper()
	var keys []string
	n, off := 0, 1
	switch c := p[0]; {
	case c >= 0x80 && c <= 0x8f:
		n = int(c & 0x0f)
	default:
		t.Fatalf("payload %x is not a fixmap", p)
	}
	for range n {
		// keys are fixstr; values are skipped by decoding one value
		c := p[off]
		if c < 0xa0 || c > 0xbf {
			t.Fatalf("key at %d of %x is not a fixstr", off, p)
		}
		l := int(c & 0x1f)
		keys = append(keys, string(p[off+1:off+1+l]))
		off += 1 + l
		off += msgpackValueLen(t, p[off:])
	}
	return keys
}

// msgpackValueLen is the length of the scalar msgpack value at the start
// of p (the vectors hold ints, floats, strings).
func msgpackValueLen(t *testing.T, p []byte) int {
	t.Helper()
	switch c := p[0]; {
	case c <= 0x7f, c >= 0xe0:
		return 1
	case c >= 0xa0 && c <= 0xbf:
		return 1 + int(c&0x1f)
	case c == 0xcb:
		return 9
	case c == 0xca:
		return 5
	case c == 0xcc, c == 0xd0:
		return 2
	case c == 0xcd, c == 0xd1:
		return 3
	case c == 0xce, c == 0xd2:
		return 5
	case c == 0xcf, c == 0xd3:
		return 9
	}
	t.Fatalf("value %x: not a scalar the vectors use", p)
	return 0
}
