package codec

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/vmihailenco/msgpack/v5"
)

type namedInner struct {
	A int
	B []string
}

type namedEmbedded struct {
	E string `msgpack:"e"`
}

type namedRec struct {
	ID    int64  `msgpack:"id"`
	Name  string `msgpack:"name"`
	Qty   int
	In    namedInner
	Ptr   *namedInner
	List  []namedInner
	Map   map[string]namedInner
	When  time.Time
	Bin   []byte
	Fix   [3]byte
	Score float64
	namedEmbedded
	Next *namedRec
	//lint:ignore U1000 an unexported field is not in the value: what the test checks
	skip int
	Dash int `msgpack:"-"`
}

// namedLike decodes v's map form (msgpack/v5 default: field names) into
// an any, the reference Named must reproduce from the array form.
func namedLike(t *testing.T, v any) any {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := msgpack.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkNamed round-trips v: SchemaOf, ParseSchema, the array form decoded
// into an any, Named; the result must equal the map form's decode.
func checkNamed(t *testing.T, v any) {
	t.Helper()
	desc, err := PublishableSchema(reflect.TypeOf(v), "msgpack")
	if err != nil {
		t.Fatal(err)
	}
	if desc != SchemaOf(reflect.TypeOf(v), "msgpack") || SchemaFingerprint(desc) != Fingerprint(reflect.TypeOf(v), "msgpack") {
		t.Fatal("PublishableSchema is not SchemaOf, or its fingerprint differs")
	}
	s, err := ParseSchema(desc)
	if err != nil {
		t.Fatalf("ParseSchema(%s): %v", desc, err)
	}
	p, err := MsgPackArray().Marshal(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	var arr any
	if err := msgpack.Unmarshal(p, &arr); err != nil {
		t.Fatal(err)
	}
	got, err := s.Named(arr)
	if err != nil {
		t.Fatalf("Named: %v (schema %s)", err, desc)
	}
	want := namedLike(t, v)
	dropOmitted(got, want)
	if g, w := jsonOf(t, got), jsonOf(t, want); g != w {
		t.Fatalf("Named:\n got %.300s\nwant %.300s", g, w)
	}
}

// dropOmitted removes from got the zero fields the map form left out
// (omitempty: the array form writes every field).
func dropOmitted(got, want any) {
	switch g := got.(type) {
	case map[string]any:
		w, _ := want.(map[string]any)
		for k, x := range g {
			wx, ok := w[k]
			if !ok && (x == nil || reflect.ValueOf(x).IsZero()) {
				delete(g, k)
				continue
			}
			dropOmitted(x, wx)
		}
	case []any:
		w, _ := want.([]any)
		for i := range g {
			if i < len(w) {
				dropOmitted(g[i], w[i])
			}
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSchemaNamed(t *testing.T) {
	rec := namedRec{ID: 42, Name: "apple", Qty: 3, In: namedInner{1, []string{"x"}}, Ptr: &namedInner{2, nil},
		List: []namedInner{{3, nil}, {4, []string{"y", "z"}}}, Map: map[string]namedInner{"k": {5, nil}},
		When: time.Unix(1795000000, 0).UTC(), Bin: []byte{1, 2}, Fix: [3]byte{7, 8, 9}, Score: 1.5,
		namedEmbedded: namedEmbedded{"emb"}, Next: &namedRec{ID: 43, Name: "pear"}}
	checkNamed(t, rec)
	checkNamed(t, []namedRec{rec, {}})
	checkNamed(t, map[string]*namedRec{"a": &rec, "b": nil})
	for _, it := range corpus.Inventory(3, 1, 20) {
		checkNamed(t, it)
	}
	for _, a := range corpus.Articles(3, 3) {
		checkNamed(t, a)
	}
	checkNamed(t, corpus.Stocks(3, 5))
}

type inlinedSelf struct {
	Self *inlinedSelf
	N    int
}

type holdsInlinedSelf struct {
	inlinedSelf
	X int
}

func TestPublishableSchemaRefusesInlinedRecursion(t *testing.T) {
	if _, err := PublishableSchema(reflect.TypeFor[holdsInlinedSelf](), "msgpack"); err == nil {
		t.Fatal("a recursive reference to an inlined struct was published")
	}
	if _, err := PublishableSchema(reflect.TypeFor[inlinedSelf](), "msgpack"); err != nil {
		t.Fatalf("plain recursion refused: %v", err)
	}
}

// TestSchemaNamedMismatch: a value of another shape than the schema is an
// error, never a guess.
func TestSchemaNamedMismatch(t *testing.T) {
	s, err := ParseSchema(`{"a":int,"b":[]{"c":string}}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{
		[]any{int8(1)},                             // too few fields
		[]any{int8(1), []any{}, "x"},               // too many
		[]any{"s", []any{}},                        // int is a string
		[]any{int8(1), map[string]any{}},           // slice is a map
		[]any{int8(1), []any{[]any{int8(2)}}},      // string is an int
		[]any{int8(1), []any{[]any{"x", "y"}}},     // inner struct too long
		map[string]any{"a": int8(1), "b": []any{}}, // map form where an array is
		"a string",
	} {
		if _, err := s.Named(v); !errors.Is(err, ErrSchemaDescription) {
			t.Errorf("Named(%#v): %v, want ErrSchemaDescription", v, err)
		}
	}
	if got, err := s.Named([]any{int8(1), nil}); err != nil || jsonOf(t, got) != `{"a":1,"b":null}` {
		t.Errorf("nil slice: %s, %v", jsonOf(t, got), err)
	}
}

func TestParseSchemaRefuses(t *testing.T) {
	for _, d := range []string{
		"", "in", "int ", "[]", "map[string]", "map[string", "{", `{"a"}`, `{"a":}`, `{a:int}`,
		`{"a":int"b":int}`, `{"a":int,}`, "@0", `{"a":@1}`, "@", "custom(x", "invalid(chan",
		`{"a\q":int}`, strings.Repeat("[]", MaxSchemaDepth+2) + "int", strings.Repeat("x", MaxSchemaLen+1),
	} {
		if _, err := ParseSchema(d); !errors.Is(err, ErrSchemaDescription) {
			t.Errorf("ParseSchema(%.40q): %v, want ErrSchemaDescription", d, err)
		}
	}
	for _, d := range []string{"int", "any", `{}`, `{"a":@0}`, "custom(time.Time)", "custom(p.G[func()])", "invalid(chan)", `map[int][]{"x":bytes}`} {
		if _, err := ParseSchema(d); err != nil {
			t.Errorf("ParseSchema(%q): %v", d, err)
		}
	}
}

// FuzzParseSchema: any text parses or fails with ErrSchemaDescription,
// never a panic; what parses names any decoded msgpack value or fails
// with ErrSchemaDescription.
func FuzzParseSchema(f *testing.F) {
	f.Add(SchemaOf(reflect.TypeFor[namedRec](), "msgpack"), []byte{0x92, 0x01, 0xa1, 'x'})
	f.Add(`{"a":int,"b":[]{"c":string}}`, []byte{0x92, 0x01, 0x91, 0x91, 0xa1, 'x'})
	f.Add(`{"n":@0}`, []byte{0x91, 0x91, 0x91, 0xc0})
	f.Fuzz(func(t *testing.T, desc string, value []byte) {
		s, err := ParseSchema(desc)
		if err != nil {
			if !errors.Is(err, ErrSchemaDescription) {
				t.Fatalf("ParseSchema: %v", err)
			}
			return
		}
		if checkMsgPack(value, AllocBound(len(value))) != nil {
			return
		}
		var v any
		if msgpack.Unmarshal(value, &v) != nil {
			return
		}
		if _, err := s.Named(v); err != nil && !errors.Is(err, ErrSchemaDescription) {
			t.Fatalf("Named: %v", err)
		}
	})
}

// TestHostileSchemas reads testdata/hostile/schema-descriptions.json (the
// Node test reads it too): descriptions to refuse and values to refuse to
// name.
func TestHostileSchemas(t *testing.T) {
	raw, err := os.ReadFile("../testdata/hostile/schema-descriptions.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Refuse []string `json:"refuse_descriptions"`
		Name   []struct {
			Description, Payload string
		} `json:"refuse_to_name"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Refuse {
		if _, err := ParseSchema(d); !errors.Is(err, ErrSchemaDescription) {
			t.Errorf("ParseSchema(%.60q): %v, want ErrSchemaDescription", d, err)
		}
	}
	for _, n := range f.Name {
		s, err := ParseSchema(n.Description)
		if err != nil {
			t.Fatal(err)
		}
		p, err := hex.DecodeString(n.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := MsgPack().Unmarshal(p, &v); err != nil {
			t.Fatalf("%s: %v", n.Payload, err)
		}
		if _, err := s.Named(v); !errors.Is(err, ErrSchemaDescription) {
			t.Errorf("Named(%s, %s): %v, want ErrSchemaDescription", n.Description, n.Payload, err)
		}
	}
}
