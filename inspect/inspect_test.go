package inspect_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/s2"
	"github.com/redis/rueidis"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/inspect"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/storeurl"
)

type article struct {
	ID    int    `msgpack:"id" json:"id"`
	Title string `msgpack:"title" json:"title"`
	Email string `msgpack:"email" json:"email"`
	Body  string `msgpack:"body" json:"body"`
}

// samples writes one value of every format under its own key and returns
// the format inspect must report for each.
func samples(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	ctx := context.Background()
	a := article{ID: 7, Title: "寿司の話", Email: "someone@example.com", Body: strings.Repeat("cache me ", 100)}
	c, err := kura.New[article](st, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "kura:article", a, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "kura:small", article{ID: 1}, kura.NoExpiry); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(a)
	mp, _ := msgpack.Marshal(a)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(js)
	zw.Close()
	raw := map[string][]byte{
		"json":           js,
		"text":           []byte("plain text value"),
		"snappy":         snappy.Encode(nil, js),
		"gzip":           gz.Bytes(),
		"go-redis/cache": append(s2.EncodeSnappy(nil, mp), 1),
		"unknown":        {0xff, 0x00, 0xfe, 0x01, 0x02},
	}
	want := map[string]string{"kura:article": "kura", "kura:small": "kura"}
	for format, b := range raw {
		if err := st.Set(ctx, "foreign:"+format, b, time.Hour); err != nil {
			t.Fatal(err)
		}
		want["foreign:"+format] = format
	}
	return want
}

func TestInspectOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	cl := servertest.RedisCluster(t)
	mc := servertest.MemcachedPool(t, 3, servers.MemcachedConfig{})
	for name, url := range map[string]string{
		"redis":     r.URL(),
		"cluster":   "redis://" + cl.Nodes[0].Addr + "," + cl.Nodes[1].Addr + "," + cl.Nodes[2].Addr,
		"memcached": "memcached://" + mc[0].Addr + "," + mc[1].Addr + "," + mc[2].Addr,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := storeurl.Open(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			want := samples(t, st)
			for key, format := range want {
				rep, err := inspect.Key(ctx, st, key, inspect.Options{Mask: []string{"email"}})
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				if !rep.Found || rep.Format != format {
					t.Errorf("%s: format %q (found %v), want %q; note %q", key, rep.Format, rep.Found, format, rep.Note)
				}
				if rep.Node == "" {
					t.Errorf("%s: no node reported", key)
				}
				if name == "cluster" {
					// The node named must own the key's slot: it answers
					// the GET itself instead of redirecting (MOVED).
					nc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rep.Node}, ForceSingleClient: true, DisableCache: true})
					if err != nil {
						t.Fatal(err)
					}
					if err := nc.Do(ctx, nc.B().Get().Key(key).Build()).Error(); err != nil {
						t.Errorf("%s: node %s does not own the key: %v", key, rep.Node, err)
					}
					nc.Close()
				}
				if key == "kura:small" && !rep.NoTTL {
					t.Errorf("%s: a key without expiry reported TTL %v", key, rep.TTLSeconds)
				}
				if key == "kura:article" && (rep.TTLSeconds == nil || *rep.TTLSeconds <= 0 || *rep.TTLSeconds > 3600) {
					t.Errorf("%s: TTL %v, want (0, 3600]", key, rep.TTLSeconds)
				}
				if strings.HasPrefix(key, "kura:") && (rep.Kura == nil || len(rep.Kura.Schema) != 8 || rep.Kura.Written == nil) {
					t.Errorf("%s: the writer's schema fingerprint and write time are not shown: %+v", key, rep.Kura)
				}
				if strings.Contains(string(rep.Value), "someone@example.com") {
					t.Errorf("%s: masked field shown: %s", key, rep.Value)
				}
				if format != "unknown" && format != "text" && !strings.Contains(string(rep.Value), "cache me") && key != "kura:small" {
					t.Errorf("%s: value not decoded: %s (note %q)", key, rep.Value, rep.Note)
				}
			}
			if rep, err := inspect.Key(ctx, st, "no-such-key", inspect.Options{}); err != nil || rep.Found {
				t.Fatalf("missing key: %+v, %v", rep, err)
			}
		})
	}
}

// TestInspectHostile: bytes built to exhaust a decoder are described, not
// decoded, and never crash the tool.
func TestInspectHostile(t *testing.T) {
	cd, _ := codec.New(codec.Options{})
	for name, b := range map[string][]byte{
		"msgpack array32 bomb": {0xC1, 0x4B, 0x01, 0x01, 0x00, 0x00, 0x05, 0xDD, 0xFF, 0xFF, 0xFF, 0xFF},
		"go-redis/cache bomb":  {0xDD, 0xFF, 0xFF, 0xFF, 0xFF, 0x00},
		"snappy length claim":  {0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x00},
		"gzip garbage":         {0x1f, 0x8b, 0x08, 0x00, 0x01},
		"empty":                {},
	} {
		rep := inspect.Bytes(name, b, inspect.Options{Codec: cd})
		if rep.Value != nil && !json.Valid(rep.Value) {
			t.Errorf("%s: invalid JSON value %q", name, rep.Value)
		}
	}
}

// TestInspectEnvelopeV2: the kinds and optional fields of a version 2
// envelope are shown; a lease token never is.
func TestInspectEnvelopeV2(t *testing.T) {
	cd, _ := codec.New(codec.Options{})
	written := time.Date(2026, 11, 23, 17, 0, 0, 0, time.UTC)
	val, _, err := cd.EncodeWith(nil, map[string]any{"name": "寿司"}, codec.Fields{Schema: 0xabcd1234, HasSchema: true, Written: written, TTL: time.Hour, Cost: 12 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rep := inspect.Bytes("v2", val, inspect.Options{Codec: cd})
	h := rep.Kura
	if rep.Format != "kura" || h == nil || h.Version != 2 || h.Kind != "value" || h.Schema != "abcd1234" || h.Written == nil || !h.Written.Equal(written) ||
		h.TTLSeconds != 3600 || h.CostSeconds != 0.012 || !strings.Contains(string(rep.Value), "寿司") {
		t.Fatalf("v2 value: %+v %+v", rep, h)
	}
	for kind, name := range map[codec.Kind]string{codec.KindNegative: "absent", codec.KindLease: "lease", codec.KindTombstone: "tombstone"} {
		b := codec.AppendEntry(nil, kind, codec.Fields{Token: "holder-secret-token", Written: written})
		rep := inspect.Bytes("k", b, inspect.Options{Codec: cd})
		if rep.Kura == nil || rep.Kura.Kind != name || rep.Note == "" {
			t.Errorf("%s: %+v", name, rep)
		}
		out, _ := json.Marshal(rep)
		if strings.Contains(string(out), "holder-secret-token") {
			t.Errorf("%s: lease token shown: %s", name, out)
		}
	}
	// A newer version: described, not decoded.
	newer := append([]byte{0xC1, 0x4B, 0x04}, val[3:]...)
	if rep := inspect.Bytes("k", newer, inspect.Options{Codec: cd}); rep.Format != "kura" || !strings.Contains(rep.Note, "newer writer") {
		t.Errorf("newer version: %+v", rep)
	}
}

// TestInspectZlib: a zlib-compressed JSON value is recognised.
func TestInspectZlib(t *testing.T) {
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	zw.Write([]byte(`{"greeting":"hello from zlib"}`))
	zw.Close()
	rep := inspect.Bytes("z", b.Bytes(), inspect.Options{})
	if rep.Format != "zlib" || !strings.Contains(string(rep.Value), "hello from zlib") || rep.RawBytes != 30 {
		t.Fatalf("%+v", rep)
	}
}

// TestCompactEntries: kura inspect (and the UI, which shows its reports)
// describes compact (version 3) entries: the string serializer, a struct
// stored as an array with its fingerprint, the write time in seconds.
func TestCompactEntries(t *testing.T) {
	cd, err := codec.New(codec.Options{Compact: true, PositionalStructs: true})
	if err != nil {
		t.Fatal(err)
	}
	type fruit struct {
		ID   int
		Name string
		Qty  int
	}
	written := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	str, _, err := cd.EncodeWith(nil, "user:42 logged in", codec.Fields{Written: written})
	if err != nil {
		t.Fatal(err)
	}
	rep := inspect.Bytes("s", str, inspect.Options{})
	if rep.Format != "kura" || rep.Kura.Version != 3 || rep.Kura.Serializer != "string" || string(rep.Value) != `"user:42 logged in"` ||
		rep.Kura.Written == nil || !rep.Kura.Written.Equal(written) || rep.StoredBytes != 25 {
		t.Fatalf("string: %+v %+v", rep, rep.Kura)
	}
	rec, _, err := cd.EncodeWith(nil, fruit{42, "apple", 3}, codec.Fields{Schema: 0xabcdef01, HasSchema: true, Written: written})
	if err != nil {
		t.Fatal(err)
	}
	rep = inspect.Bytes("r", rec, inspect.Options{})
	if rep.Kura.Serializer != "msgpack-array" || rep.Kura.Schema != "abcdef01" || string(rep.Value) != `[42,"apple",3]` || !strings.Contains(rep.Note, "abcdef01") {
		t.Fatalf("struct: %+v %+v", rep, rep.Kura)
	}
}

// FuzzBytes: any bytes are described (valid JSON value or none), never a
// panic, whatever format they pretend to be.
func FuzzBytes(f *testing.F) {
	cd, _ := codec.New(codec.Options{})
	val, _, _ := cd.Encode(nil, map[string]any{"a": 1, "b": strings.Repeat("x", 300)})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"a":1}`))
	zw.Close()
	cc, _ := codec.New(codec.Options{Compact: true})
	cval, _, _ := cc.EncodeWith(nil, struct{ A, B int }{1, 2}, codec.Fields{HasSchema: true, Schema: 7, Written: time.Now()})
	cstr, _, _ := cc.EncodeWith(nil, "compact", codec.Fields{Written: time.Now()})
	for _, s := range [][]byte{cval, cstr, {0xC1, 0x4B, 0x03, 0x81}, val, gz.Bytes(), append(s2.EncodeSnappy(nil, []byte{0x81, 0xa1, 'a', 1}), 1), []byte(`{"a":[1,2]}`), {0x78, 0x9c, 0x01}, {0xC1, 0x4B, 0x02, 0x03, 0x00}, {}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rep := inspect.Bytes("k", b, inspect.Options{Codec: cd, MaxDecoded: 1 << 20})
		if rep.Value != nil && !json.Valid(rep.Value) {
			t.Fatalf("invalid JSON %q", rep.Value)
		}
		if rep.Format == "" {
			t.Fatal("no format")
		}
	})
}

// fruitRec is {42, "apple", 3}'s type.
type fruitRec struct {
	ID   int
	Name string
	Qty  int
}

// schemaMap is a SchemaSource over descriptions by fingerprint.
type schemaMap map[uint32]string

func (m schemaMap) Schema(_ context.Context, fp uint32) (*codec.Schema, error) {
	d, ok := m[fp]
	if !ok {
		return nil, errors.New("not published")
	}
	return codec.ParseSchema(d)
}

// TestCompactStructNamedFromPublishedSchema: with the schema of the
// entry's fingerprint, a struct stored as an array is shown with its field
// names (and Mask applies to them); a schema of another shape or none
// leaves the arrays, and the note says why.
func TestCompactStructNamedFromPublishedSchema(t *testing.T) {
	cd, err := codec.New(codec.Options{Compact: true, PositionalStructs: true})
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeFor[fruitRec]()
	fp := codec.Fingerprint(typ, "msgpack")
	rec, _, err := cd.EncodeWith(nil, fruitRec{42, "apple", 3}, codec.Fields{Schema: fp, HasSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	desc := codec.SchemaOf(typ, "msgpack")
	rep := inspect.Bytes("r", rec, inspect.Options{Schemas: schemaMap{fp: desc}, Mask: []string{"name"}})
	var got map[string]any
	if err := json.Unmarshal(rep.Value, &got); err != nil || len(got) != 3 || got[fieldName(typ, 1)] != "***" || !strings.Contains(rep.Note, "published") {
		t.Fatalf("named: %s (%v), note %q", rep.Value, err, rep.Note)
	}
	rep = inspect.Bytes("r", rec, inspect.Options{Schemas: schemaMap{fp: `{"a":int,"b":int}`}})
	if string(rep.Value) != `[42,"apple",3]` || !strings.Contains(rep.Note, "does not fit") {
		t.Fatalf("another shape: %s, note %q", rep.Value, rep.Note)
	}
	rep = inspect.Bytes("r", rec, inspect.Options{Schemas: schemaMap{}})
	if string(rep.Value) != `[42,"apple",3]` || !strings.Contains(rep.Note, "not published") {
		t.Fatalf("unpublished: %s, note %q", rep.Value, rep.Note)
	}
}

// fieldName is the msgpack name of t's field i.
func fieldName(t reflect.Type, i int) string {
	f := t.Field(i)
	if n, _, _ := strings.Cut(f.Tag.Get("msgpack"), ","); n != "" {
		return n
	}
	return f.Name
}
