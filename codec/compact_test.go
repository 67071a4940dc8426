package codec

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/corpus"
)

type fruit struct {
	ID   int
	Name string
	Qty  int
}

type color string

// TestCompactSizes pins the two sizes of issue 24: a 17-character string
// and the struct {42, "apple", 3}, each with a write time (and the struct
// with its schema fingerprint), as a Cache writes them.
func TestCompactSizes(t *testing.T) {
	now := time.Now()
	fp := Fingerprint(reflect.TypeFor[fruit](), "msgpack")
	for _, tc := range []struct {
		name       string
		v          any
		f          Fields
		v2, max    int
		serializer byte
	}{
		{"17-char string", "user:42 logged in", Fields{Schema: Fingerprint(reflect.TypeFor[string](), "msgpack"), HasSchema: true, Written: now}, 41, 25, IDString},
		{"{42, apple, 3}", fruit{42, "apple", 3}, Fields{Schema: fp, HasSchema: true, Written: now}, 44, 24, IDMsgPackArray},
	} {
		old, _, err := mustNew(t, Options{}).EncodeWith(nil, tc.v, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		b, h, err := mustNew(t, Options{Compact: true, PositionalStructs: true}).EncodeWith(nil, tc.v, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if len(old) != tc.v2 || len(b) > tc.max || h.Serializer != tc.serializer || h.Version != VersionCompact {
			t.Errorf("%s: version 2 %d B (want %d), compact %d B (want <= %d), serializer %d", tc.name, len(old), tc.v2, len(b), tc.max, h.Serializer)
		}
		t.Logf("%s: %d B -> %d B", tc.name, len(old), len(b))
	}
}

// TestCompactRoundTrip: every kind of value a Cache stores comes back
// from a compact entry, with its fields, through Decode and DecodeSchema.
func TestCompactRoundTrip(t *testing.T) {
	for _, positional := range []bool{false, true} {
		t.Run(fmt.Sprintf("positional=%v", positional), func(t *testing.T) { compactRoundTrip(t, positional) })
	}
}

func compactRoundTrip(t *testing.T, positional bool) {
	c := mustNew(t, Options{Compact: true, PositionalStructs: positional})
	written := time.Date(2026, 11, 24, 23, 0, 0, 0, time.UTC)
	arts := corpus.Articles(3, 2)
	items := corpus.Inventory(3, 9, 20)
	name := "x"
	for _, tc := range []struct {
		name string
		v    any
		dst  func() any
		ser  byte
	}{
		{"string", "user:42 logged in", func() any { return new(string) }, IDString},
		{"*string", &name, func() any { return new(string) }, IDString},
		{"named string", color("red"), func() any { return new(color) }, IDString},
		{"empty string", "", func() any { return new(string) }, IDString},
		{"invalid UTF-8 stays msgpack", "\xff\xfe", func() any { return new(string) }, IDMsgPack},
		{"struct", fruit{42, "apple", 3}, func() any { return new(fruit) }, IDMsgPackArray},
		{"*struct", &fruit{1, "pear", 2}, func() any { return new(fruit) }, IDMsgPackArray},
		{"article (compressed)", arts[0], func() any { return new(corpus.Article) }, IDMsgPackArray},
		{"item", items[0], func() any { return new(corpus.Item) }, IDMsgPackArray},
		{"[]Item", items, func() any { return new([]corpus.Item) }, IDMsgPackArray},
		{"map of structs", map[string]fruit{"a": {1, "x", 2}}, func() any { return new(map[string]fruit) }, IDMsgPackArray},
		{"struct with an any field stays a map", withAny{A: fruit{1, "x", 2}, S: []int{1}}, func() any { return new(withAny) }, IDMsgPack},
		{"[]string stays msgpack", []string{"a", "b"}, func() any { return new([]string) }, IDMsgPack},
		{"time.Time encodes itself", written, func() any { return new(time.Time) }, IDMsgPack},
		{"map", map[string]any{"a": 1.5, "b": "c"}, func() any { return new(map[string]any) }, IDMsgPack},
		{"int", 7, func() any { return new(int) }, IDMsgPack},
		{"[]byte", []byte{0, 1, 2}, func() any { return new([]byte) }, IDMsgPack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := Fingerprint(reflect.TypeOf(tc.dst()).Elem(), "msgpack")
			f := Fields{Schema: fp, HasSchema: true, Written: written.Add(1500 * time.Millisecond), TTL: time.Hour, Cost: 3 * time.Millisecond}
			b, h, err := c.EncodeWith(nil, tc.v, f)
			if err != nil {
				t.Fatal(err)
			}
			wantSer := tc.ser
			if wantSer == IDMsgPackArray && !positional {
				wantSer = IDMsgPack // structs keep their names by default
			}
			if h.Serializer != wantSer {
				t.Fatalf("serializer %d, want %d", h.Serializer, wantSer)
			}
			dst := tc.dst()
			dh, err := c.DecodeSchema(b, dst, fp)
			if err != nil {
				t.Fatal(err)
			}
			want := reflect.ValueOf(tc.v)
			for want.Kind() == reflect.Pointer {
				want = want.Elem()
			}
			got := reflect.ValueOf(dst).Elem().Interface()
			if normalize(got) != normalize(want.Interface()) {
				t.Fatalf("decoded %#v, want %#v", got, want.Interface())
			}
			// Seconds: the compact write time drops the milliseconds.
			if !dh.Fields.Written.Equal(written.Add(time.Second)) || dh.Fields.TTL != time.Hour || dh.Fields.Cost != 3*time.Millisecond {
				t.Fatalf("fields %+v", dh.Fields)
			}
			if dh.Fields.HasSchema != (tc.ser != IDString) {
				t.Fatalf("schema field %v for serializer %d", dh.Fields.HasSchema, tc.ser)
			}
			// A version 2 writer's entry of the same value reads the same.
			v2, _, err := mustNew(t, Options{}).EncodeWith(nil, tc.v, f)
			if err != nil {
				t.Fatal(err)
			}
			dst2 := tc.dst()
			if _, err := c.DecodeSchema(v2, dst2, fp); err != nil || normalize(reflect.ValueOf(dst2).Elem().Interface()) != normalize(got) {
				t.Fatalf("version 2: %#v, %v", dst2, err)
			}
		})
	}
}

// normalize makes values comparable across a round trip, which keeps
// instants but not time zones: their JSON.
func normalize(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestCompactSchemaMismatch: a struct stored as an array decodes only into
// the writer's type (its fingerprint); another type with the same number
// and kinds of fields is a schema mismatch, never a positional guess, and
// a string entry is a mismatch for a reader of a struct.
func TestCompactSchemaMismatch(t *testing.T) {
	c := mustNew(t, Options{Compact: true})
	type lookalike struct {
		Code  int
		Label string
		Count int
	}
	fp := Fingerprint(reflect.TypeFor[fruit](), "msgpack")
	b, _, err := c.EncodeWith(nil, fruit{42, "apple", 3}, Fields{Schema: fp, HasSchema: true, Written: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var l lookalike
	if _, err := c.DecodeSchema(b, &l, Fingerprint(reflect.TypeFor[lookalike](), "msgpack")); !errors.Is(err, ErrSchemaMismatch) || l != (lookalike{}) {
		t.Fatalf("lookalike: %+v, %v; want ErrSchemaMismatch and nothing decoded", l, err)
	}
	if _, err := c.DecodeStrict(b, &l); !errors.Is(err, ErrDeserialize) {
		t.Fatalf("DecodeStrict: %v", err)
	}
	// Without a fingerprint a struct is written as a map: still checked by name.
	m, h, err := c.EncodeWith(nil, fruit{42, "apple", 3}, Fields{Written: time.Now()})
	if err != nil || h.Serializer != IDMsgPack {
		t.Fatalf("no schema: serializer %d, %v", h.Serializer, err)
	}
	if _, err := c.DecodeSchema(m, &l, 1); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("map into lookalike: %v", err)
	}
	s, _, err := c.EncodeWith(nil, "apple", Fields{Schema: 5, HasSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	var f fruit
	if _, err := c.DecodeSchema(s, &f, fp); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("string into a struct: %v", err)
	}
	var n int
	if _, err := c.DecodeSchema(s, &n, 9); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("string into an int: %v", err)
	}
}

// TestCompactOffByDefault: without Options.Compact a Codec writes version
// 2, so an upgraded process writes what every older reader reads until the
// option is set (readers first).
func TestCompactOffByDefault(t *testing.T) {
	b, h, err := mustNew(t, Options{}).EncodeWith(nil, "x", Fields{Written: time.Now()})
	if err != nil || h.Version != Version || b[2] != Version {
		t.Fatalf("default writes version %d, %v", h.Version, err)
	}
	if mustNew(t, Options{}).Compact() || !mustNew(t, Options{Compact: true}).Compact() {
		t.Fatal("Compact() does not report the option")
	}
}

// TestCompactWriteTime: write times before the epoch or too far after it
// are left out rather than stored wrong; in range they keep their second.
func TestCompactWriteTime(t *testing.T) {
	c := mustNew(t, Options{Compact: true})
	for _, tc := range []struct {
		at   time.Time
		kept bool
	}{
		{CompactEpoch.Add(-time.Second), false},
		{CompactEpoch, true},
		{time.Date(2034, 6, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC), false},
	} {
		b, _, err := c.EncodeWith(nil, "v", Fields{Written: tc.at})
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if tc.kept != !h.Fields.Written.IsZero() || (tc.kept && !h.Fields.Written.Equal(tc.at)) {
			t.Errorf("%v: decoded %v", tc.at, h.Fields.Written)
		}
	}
}
