package codec

import (
	"errors"
	"reflect"
	"testing"
)

type foldInner struct {
	SKU string
	Qty int
}

type foldOrder struct {
	ID    int
	Name  string
	Items []foldInner
	ByKey map[string]foldInner
	Note  *foldInner
}

// TestFoldedNames: a value written with another writer's spelling of an
// untagged struct's names ({id, name} as Node writes them) reads as a
// hit through DecodeSchema, nested structs included; a key that names no
// field in any case stays a schema mismatch.
func TestFoldedNames(t *testing.T) {
	c := mustNew(t, Options{})
	node := map[string]any{
		"id": 7, "name": "lamp",
		"items": []any{map[string]any{"sku": "a-1", "qty": 2}, map[string]any{"Sku": "b-2", "QTY": 3}},
		"bykey": map[string]any{"x": map[string]any{"sku": "x-9", "qty": 1}},
		"note":  map[string]any{"sku": "n", "qty": 0},
	}
	b, _, err := c.EncodeWith(nil, node, Fields{})
	if err != nil {
		t.Fatal(err)
	}
	var got foldOrder
	if _, err := c.DecodeSchema(b, &got, c.Fingerprint(reflect.TypeFor[foldOrder]())); err != nil {
		t.Fatalf("Node's spelling: %v", err)
	}
	want := foldOrder{ID: 7, Name: "lamp", Items: []foldInner{{"a-1", 2}, {"b-2", 3}},
		ByKey: map[string]foldInner{"x": {"x-9", 1}}, Note: &foldInner{"n", 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v, want %+v", got, want)
	}

	// The compact envelope and the exact names take the same path.
	cc := mustNew(t, Options{Compact: true})
	b, _, err = cc.EncodeWith(nil, map[string]any{"ID": 1, "name": "x"}, Fields{})
	if err != nil {
		t.Fatal(err)
	}
	got = foldOrder{Name: "stale"}
	if _, err := cc.DecodeSchema(b, &got, 1); err != nil || got.ID != 1 || got.Name != "x" || got.Items != nil {
		t.Errorf("mixed spelling: %+v, %v", got, err)
	}

	// A key that is no field in any case: still a mismatch.
	b, _, err = c.EncodeWith(nil, map[string]any{"id": 1, "title": "x"}, Fields{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DecodeSchema(b, new(foldOrder), 1); !errors.Is(err, ErrSchemaMismatch) {
		t.Errorf("unknown field title: %v, want ErrSchemaMismatch", err)
	}
}

// FuzzFoldKeys: foldKeys never panics, and what it returns is msgpack
// the checker accepts whenever its input was.
func FuzzFoldKeys(f *testing.F) {
	c := mustNew(f, Options{})
	for _, v := range []any{
		map[string]any{"id": 1, "items": []any{map[string]any{"sku": "a"}}},
		map[string]any{"NOTE": map[string]any{"qty": 1.5}},
		[]any{1, "x", nil, true},
	} {
		b, err := c.Serializer().Marshal(nil, v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if CheckMsgPack(data) != nil {
			return
		}
		out, _ := foldKeys(data, reflect.TypeFor[foldOrder]())
		if err := CheckMsgPack(out); err != nil {
			t.Fatalf("foldKeys(%x) = %x: %v", data, out, err)
		}
		_ = msgpackDecode(data, new(foldOrder), true)
	})
}
