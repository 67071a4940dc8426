package codec

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

const namedVectorsFile = "../testdata/format/named.json"

// namedVectors is testdata/format/named.json: compact entries of structs
// stored as arrays, their published schema description and the value with
// field names every reader (Go's Schema.Named, the Node package's named)
// must give; descriptions both parsers refuse; and values of another
// shape than their schema, which both refuse to name.
type namedVectors struct {
	Comment string `json:"comment"`
	Named   []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Fingerprint string          `json:"fingerprint"`
		Entry       string          `json:"entry"`
		Value       json.RawMessage `json:"value"`
	} `json:"named"`
	Refused    []string `json:"refused_descriptions"`
	Mismatches []struct {
		Description string `json:"description"`
		Payload     string `json:"payload"`
	} `json:"mismatches"`
}

type namedVecItem struct {
	ID    int64    `msgpack:"id"`
	Name  string   `msgpack:"name"`
	Qty   int      `msgpack:"qty"`
	Tags  []string `msgpack:"tags"`
	Price float64  `msgpack:"price"`
	OK    bool     `msgpack:"ok"`
}

type namedVecNode struct {
	Label    string          `msgpack:"label"`
	Children []*namedVecNode `msgpack:"children"`
	Meta     map[string]namedVecItem
}

func TestNamedVectors(t *testing.T) {
	c, err := New(Options{Compact: true, PositionalStructs: true})
	if err != nil {
		t.Fatal(err)
	}
	written := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	var f namedVectors
	f.Comment = "published schemas: compact entries, their schema description and the value with field names; descriptions to refuse; values of another shape to refuse. See docs/FORMAT.md, \"Published schemas\". Regenerate with: go test ./codec -run TestNamedVectors -update"
	item := namedVecItem{42, "apple", 3, []string{"fruit", "red"}, 1.5, true}
	for _, v := range []struct {
		name string
		v    any
	}{
		{"struct", item},
		{"slice of structs", []namedVecItem{item, {ID: 7, Name: "pear"}}},
		{"recursive tree, map of structs", namedVecNode{Label: "root", Children: []*namedVecNode{{Label: "leaf"}, nil},
			Meta: map[string]namedVecItem{"k": {ID: 1}}}},
	} {
		typ := reflect.TypeOf(v.v)
		desc, err := PublishableSchema(typ, "msgpack")
		if err != nil {
			t.Fatal(err)
		}
		fp := SchemaFingerprint(desc)
		entry, h, err := c.EncodeWith(nil, v.v, Fields{Schema: fp, HasSchema: true, Written: written})
		if err != nil || h.Serializer != IDMsgPackArray {
			t.Fatalf("%s: %v, serializer %d", v.name, err, h.Serializer)
		}
		s, err := ParseSchema(desc)
		if err != nil {
			t.Fatal(err)
		}
		var arr any
		if _, err := c.Decode(entry, &arr); err != nil {
			t.Fatal(err)
		}
		named, err := s.Named(arr)
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(named)
		if err != nil {
			t.Fatal(err)
		}
		f.Named = append(f.Named, struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Fingerprint string          `json:"fingerprint"`
			Entry       string          `json:"entry"`
			Value       json.RawMessage `json:"value"`
		}{v.name, desc, hex.EncodeToString([]byte{byte(fp >> 24), byte(fp >> 16), byte(fp >> 8), byte(fp)}), hex.EncodeToString(entry), j})
	}
	f.Refused = []string{"", "in", "int ", "[]", "map[string]", "{", `{"a"}`, `{"a":}`, `{a:int}`, `{"a":int"b":int}`,
		`{"a":int,}`, "@0", `{"a":@1}`, "custom(x", "invalid(chan", `{"a\q":int}`, "{\"a\nb\":int}",
		strings.Repeat("[]", MaxSchemaDepth+2) + "int"}
	for _, d := range f.Refused {
		if _, err := ParseSchema(d); err == nil {
			t.Fatalf("ParseSchema(%q) accepted", d)
		}
	}
	for _, m := range []struct{ desc, payload string }{
		{`{"a":int,"b":string}`, "9101"},       // [1]: too few fields
		{`{"a":int,"b":string}`, "9301a17801"}, // [1,"x",1]: too many
		{`{"a":int,"b":string}`, "92a17801"},   // ["x",1]: int is a string
		{`{"a":[]{"c":string}}`, "9181a16301"}, // [{"c":1}]: a map where a slice is
		{`{"a":[]{"c":string}}`, "91919101"},   // [[[1]]]: string is an int
		{`{"a":int}`, "81a16101"},              // {"a":1}: the map form
		{`{"n":@0,"v":int}`, "9293c0010101"},   // [[nil,1,1],1]: the inner struct too long
	} {
		p, _ := hex.DecodeString(m.payload)
		s, err := ParseSchema(m.desc)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := MsgPack().Unmarshal(p, &v); err != nil {
			t.Fatalf("%s: %v", m.payload, err)
		}
		if _, err := s.Named(v); err == nil {
			t.Fatalf("Named(%s, %s) accepted", m.desc, m.payload)
		}
		f.Mismatches = append(f.Mismatches, struct {
			Description string `json:"description"`
			Payload     string `json:"payload"`
		}{m.desc, m.payload})
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	if *update {
		if err := os.WriteFile(namedVectorsFile, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(namedVectorsFile)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(old) != string(out) {
		t.Fatal("testdata/format/named.json differs from what the codec writes: run go test ./codec -run TestNamedVectors -update and review the diff")
	}
}
