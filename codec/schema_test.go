package codec

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/hexfile"
)

type schemaPerson struct {
	Name string
	Age  int
}

type schemaArticle struct {
	Title string
	Body  string
}

type schemaNode struct {
	Val  int
	Next *schemaNode
	Kids []schemaNode
}

type schemaA struct{ B *schemaB }
type schemaB struct{ A *schemaA }

type schemaBase struct {
	ID      int64 `msgpack:"id" json:"id"`
	Created time.Time
}

type schemaTagged struct {
	schemaBase
	Name    string            `msgpack:"name" json:"full_name,omitempty"`
	Hidden  string            `msgpack:"-" json:"-"`
	private int               // unexported: not encoded
	Tags    []string          `msgpack:"tags,omitempty"`
	Attrs   map[string]any    `msgpack:"attrs"`
	Raw     []byte            `msgpack:"raw"`
	Ptr     *float32          `msgpack:"ptr"`
	Fixed   [4]byte           `msgpack:"fixed"`
	Counts  map[int32][]uint8 `msgpack:"counts"`
}

// TestSchemaOf pins the description of each kind of type (docs/FORMAT.md,
// "Schema evolution").
func TestSchemaOf(t *testing.T) {
	_ = schemaTagged{private: 1} // an unexported field, left out of the description
	for _, tc := range []struct {
		typ  reflect.Type
		tag  string
		want string
	}{
		{reflect.TypeFor[int](), "msgpack", "int"},
		{reflect.TypeFor[uint8](), "msgpack", "int"},
		{reflect.TypeFor[*float32](), "msgpack", "float"},
		{reflect.TypeFor[string](), "msgpack", "string"},
		{reflect.TypeFor[[]byte](), "msgpack", "bytes"},
		{reflect.TypeFor[any](), "msgpack", "any"},
		{reflect.TypeFor[error](), "msgpack", "any"},
		{reflect.TypeFor[[]int](), "msgpack", "[]int"},
		{reflect.TypeFor[map[string]any](), "msgpack", "map[string]any"},
		{reflect.TypeFor[time.Time](), "msgpack", "custom(time.Time)"},
		{reflect.TypeFor[chan int](), "msgpack", "invalid(chan)"},
		{reflect.TypeFor[schemaPerson](), "msgpack", `{"Name":string,"Age":int}`},
		{reflect.TypeFor[*schemaPerson](), "json", `{"Name":string,"Age":int}`},
		{reflect.TypeFor[schemaNode](), "msgpack", `{"Val":int,"Next":@0,"Kids":[]@0}`},
		{reflect.TypeFor[schemaA](), "msgpack", `{"B":{"A":@0}}`},
		{reflect.TypeFor[schemaTagged](), "msgpack",
			`{"id":int,"Created":custom(time.Time),"name":string,"tags":[]string,"attrs":map[string]any,"raw":bytes,"ptr":float,"fixed":bytes,"counts":map[int]bytes}`},
		{reflect.TypeFor[schemaTagged](), "json",
			`{"id":int,"Created":custom(time.Time),"full_name":string,"Tags":[]string,"Attrs":map[string]any,"Raw":bytes,"Ptr":float,"Fixed":bytes,"Counts":map[int]bytes}`},
		{reflect.TypeFor[schemaTagged](), "",
			`{"ID":int,"Created":custom(time.Time),"Name":string,"Hidden":string,"Tags":[]string,"Attrs":map[string]any,"Raw":bytes,"Ptr":float,"Fixed":bytes,"Counts":map[int]bytes}`},
	} {
		if got := SchemaOf(tc.typ, tc.tag); got != tc.want {
			t.Errorf("SchemaOf(%v, %q)\n got %s\nwant %s", tc.typ, tc.tag, got, tc.want)
		}
	}
	if got := SchemaOf(nil, "msgpack"); got != "any" {
		t.Errorf("SchemaOf(nil) = %s", got)
	}
}

// TestFingerprintEvolution: the fingerprint follows what the encoded form
// depends on. Renaming a Go field whose tag keeps the encoded name, or
// the type itself, or widening an int keeps it; adding, renaming or
// retyping an encoded field changes it.
func TestFingerprintEvolution(t *testing.T) {
	type v1 struct {
		Name string `msgpack:"name"`
		Age  int    `msgpack:"age"`
	}
	type v1GoRename struct {
		FullName string `msgpack:"name"`
		Years    int64  `msgpack:"age"`
	}
	type v1Pointer struct {
		Name *string `msgpack:"name"`
		Age  *uint16 `msgpack:"age"`
	}
	type added struct {
		Name  string `msgpack:"name"`
		Age   int    `msgpack:"age"`
		Email string `msgpack:"email"`
	}
	type renamed struct {
		Name  string `msgpack:"name"`
		Years int    `msgpack:"years"`
	}
	type retyped struct {
		Name string `msgpack:"name"`
		Age  string `msgpack:"age"`
	}
	fp := func(v any) uint32 { return Fingerprint(reflect.TypeOf(v), "msgpack") }
	base := fp(v1{})
	for name, v := range map[string]any{"go-rename": v1GoRename{}, "pointers": v1Pointer{}} {
		if fp(v) != base {
			t.Errorf("%s changed the fingerprint: %s vs %s", name, SchemaOf(reflect.TypeOf(v), "msgpack"), SchemaOf(reflect.TypeOf(v1{}), "msgpack"))
		}
	}
	for name, v := range map[string]any{"added": added{}, "renamed": renamed{}, "retyped": retyped{}} {
		if fp(v) == base {
			t.Errorf("%s kept the fingerprint", name)
		}
	}
	c, _ := New(Options{})
	if c.Fingerprint(reflect.TypeFor[v1]()) != base {
		t.Error("Codec.Fingerprint does not name fields by the msgpack tag")
	}
	j, _ := New(Options{Serializer: JSON()})
	if j.Fingerprint(reflect.TypeFor[v1]()) != Fingerprint(reflect.TypeFor[v1](), "json") {
		t.Error("JSON Codec.Fingerprint does not name fields by the json tag")
	}
}

// TestDecodeStrict: a value written for {Name, Age} decodes silently into
// an Article with Decode (the bug) and fails with DecodeStrict; a value
// missing a field the reader has (a field added since) decodes; a
// retyped field fails; hostile bytes are still refused before the
// serializer runs.
func TestDecodeStrict(t *testing.T) {
	type withEmail struct {
		Name  string
		Age   int
		Email string
	}
	type ageString struct {
		Name string
		Age  string
	}
	type nested struct {
		Who schemaPerson
	}
	type nestedRenamed struct {
		Who struct{ FullName string }
	}
	for _, ser := range []Serializer{MsgPack(), JSON()} {
		c, err := New(Options{Serializer: ser, MinCompressSize: -1, MinSavings: -1})
		if err != nil {
			t.Fatal(err)
		}
		person, _, err := c.Encode(nil, schemaPerson{Name: "ann", Age: 40})
		if err != nil {
			t.Fatal(err)
		}
		var art schemaArticle
		if _, err := c.Decode(person, &art); err != nil {
			t.Fatalf("%s: Decode no longer decodes silently (%v): update this test", ser.Name(), err)
		}
		if _, err := c.DecodeStrict(person, &art); !errors.Is(err, ErrDeserialize) {
			t.Errorf("%s: DecodeStrict(person -> article) = %v, want ErrDeserialize", ser.Name(), err)
		}
		var we withEmail
		if _, err := c.DecodeStrict(person, &we); err != nil || we.Name != "ann" || we.Age != 40 {
			t.Errorf("%s: DecodeStrict into a type with an added field = %+v, %v", ser.Name(), we, err)
		}
		var as ageString
		if _, err := c.DecodeStrict(person, &as); !errors.Is(err, ErrDeserialize) {
			t.Errorf("%s: DecodeStrict of a retyped field = %+v, %v; want ErrDeserialize", ser.Name(), as, err)
		}
		var p schemaPerson
		if _, err := c.DecodeStrict(person, &p); err != nil || p != (schemaPerson{"ann", 40}) {
			t.Errorf("%s: DecodeStrict into the same type = %+v, %v", ser.Name(), p, err)
		}
		n, _, _ := c.Encode(nil, nested{Who: schemaPerson{Name: "bo"}})
		var nr nestedRenamed
		if _, err := c.DecodeStrict(n, &nr); !errors.Is(err, ErrDeserialize) {
			t.Errorf("%s: DecodeStrict of a field renamed in a nested struct = %+v, %v", ser.Name(), nr, err)
		}
		var m map[string]any
		if _, err := c.DecodeStrict(person, &m); err != nil || m["Name"] != "ann" {
			t.Errorf("%s: DecodeStrict into a map = %v, %v", ser.Name(), m, err)
		}
		if _, err := c.DecodeStrict(c.EncodeNegative(nil), &p); err != nil {
			t.Errorf("%s: DecodeStrict of a negative entry = %v", ser.Name(), err)
		}
	}

	// Bytes after the value are an error only in strict mode.
	c, _ := New(Options{})
	b := AppendHeader(nil, Header{Serializer: IDMsgPack, RawLen: 2})
	b = append(b, 0x01, 0x02)
	var i int
	if _, err := c.Decode(b, &i); err != nil {
		t.Fatalf("Decode with a trailing byte = %v", err)
	}
	if _, err := c.DecodeStrict(b, &i); !errors.Is(err, ErrDeserialize) {
		t.Fatalf("DecodeStrict with a trailing byte = %v", err)
	}

	// Raw has no strict mode: DecodeStrict decodes as Decode.
	raw, _, _ := c.Encode(nil, "x")
	rc, _ := New(Options{Serializer: Raw()})
	rb, _, _ := rc.Encode(nil, "hello")
	var s string
	if _, err := rc.DecodeStrict(rb, &s); err != nil || s != "hello" {
		t.Fatalf("Raw DecodeStrict = %q, %v", s, err)
	}
	if _, err := rc.DecodeStrict(raw, &s); err != nil || s != "x" {
		t.Fatalf("msgpack string DecodeStrict = %q, %v", s, err)
	}

	// A user's serializer with a strict mode gets the strict call.
	uc, err := New(Options{Serializer: &strictCounting{}})
	if err != nil {
		t.Fatal(err)
	}
	ub, _, _ := uc.Encode(nil, "v")
	if _, err := uc.DecodeStrict(ub, &s); err != nil || s != "v" {
		t.Fatalf("user serializer DecodeStrict = %q, %v", s, err)
	}
	if _, err := uc.Decode(ub, &s); err != nil {
		t.Fatal(err)
	}
	if us := uc.ser.(*strictCounting); us.strict != 1 || us.plain != 1 {
		t.Fatalf("user serializer: %d strict and %d plain calls; want 1 and 1", us.strict, us.plain)
	}

	// Hostile values: refused as bombs, not decoded.
	files, _ := filepath.Glob("../testdata/hostile/*-bomb.hex")
	if len(files) == 0 {
		t.Fatal("no hostile corpus")
	}
	for _, f := range files {
		hb, err := hexfile.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, dst := range []any{new(any), new(map[string]any), new([]int), new(struct{ X any })} {
			if _, err := c.DecodeStrict(hb, dst); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s into %T: DecodeStrict = %v, want ErrMalformed", filepath.Base(f), dst, err)
			}
		}
	}
}

// FuzzDecodeStrict: the strict decode path never panics, every failure
// matches ErrMalformed, and a value it accepts decodes with Decode too
// (strict is only ever stricter).
func FuzzDecodeStrict(f *testing.F) {
	c, err := New(Options{MaxDecodedSize: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	j, _ := New(Options{Serializer: JSON(), MaxDecodedSize: 1 << 20})
	for _, v := range []any{schemaPerson{"ann", 40}, schemaNode{Val: 1, Next: &schemaNode{Val: 2}}, map[string]any{"k": []any{1, "x"}}} {
		b, _, _ := c.Encode(nil, v)
		f.Add(b)
		b, _, _ = j.Encode(nil, v)
		f.Add(b)
	}
	files, _ := filepath.Glob("../testdata/hostile/*.hex")
	for _, p := range files {
		if b, err := hexfile.Read(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dst := range []func() any{
			func() any { return new(schemaPerson) },
			func() any { return new(schemaNode) },
			func() any { return new(any) },
			func() any { return new(map[string]any) },
		} {
			_, err := c.DecodeStrict(data, dst())
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not match ErrMalformed: %v", err)
			}
			if err == nil {
				if _, err := c.Decode(data, dst()); err != nil {
					t.Fatalf("DecodeStrict accepted what Decode refuses: %v", err)
				}
			}
		}
	})
}

// strictCounting is a user serializer with a strict mode that counts its
// calls.
type strictCounting struct{ strict, plain int }

func (*strictCounting) ID() byte     { return 200 }
func (*strictCounting) Name() string { return "strict-counting" }
func (*strictCounting) Marshal(dst []byte, v any) ([]byte, error) {
	return Raw().Marshal(dst, v)
}
func (s *strictCounting) Unmarshal(data []byte, v any) error {
	s.plain++
	return Raw().Unmarshal(data, v)
}
func (s *strictCounting) UnmarshalStrict(data []byte, v any) error {
	s.strict++
	return Raw().Unmarshal(data, v)
}
