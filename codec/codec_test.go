package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	rediscache "github.com/go-redis/cache/v9"
	"github.com/golang/snappy"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/kuracache/kura/internal/harness/corpus"
)

func mustNew(t testing.TB, o Options) *Codec {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testDict(t testing.TB) []byte {
	t.Helper()
	var samples [][]byte
	for _, a := range corpus.Articles(99, 60) {
		b, err := MsgPack().Marshal(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, b)
	}
	d, err := TrainDictionary(samples, 7, 32<<10)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRoundTrip(t *testing.T) {
	article := corpus.NewArticle(1, 0)
	dict := testDict(t)
	configs := map[string]Options{
		"default":       {},
		"json":          {Serializer: JSON()},
		"none":          {Compressor: None()},
		"s2better":      {Compressor: S2Better()},
		"zstd1":         {Compressor: Zstd(1)},
		"zstd3":         {Compressor: Zstd(3)},
		"zstd19":        {Compressor: Zstd(19)},
		"zstd-dict":     {Compressor: Zstd(3), Dictionaries: map[uint32][]byte{7: dict}, Dictionary: 7},
		"zstd-raw-dict": {Compressor: Zstd(3), Dictionaries: map[uint32][]byte{9: []byte(strings.Repeat("金利の見通し rates and yields ", 200))}, Dictionary: 9},
		"always":        {MinCompressSize: -1, MinSavings: -1},
	}
	for name, o := range configs {
		t.Run(name, func(t *testing.T) {
			c := mustNew(t, o)
			for _, in := range []corpus.Article{article, {ID: 1, Title: "短い"}} {
				prefix := []byte("prefix")
				b, h, err := c.Encode(prefix, in)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(b, []byte("prefix")) {
					t.Fatal("Encode did not append to dst")
				}
				b = b[len(prefix):]
				ph, err := ParseHeader(b)
				if err != nil {
					t.Fatal(err)
				}
				if ph != h {
					t.Fatalf("Encode header %+v, ParseHeader %+v", h, ph)
				}
				var out corpus.Article
				if _, err := c.Decode(b, &out); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(normalise(in), normalise(out)) {
					t.Fatalf("round trip changed the value")
				}
				// Any default reader decodes what this writer stored,
				// given its dictionaries.
				r := mustNew(t, Options{Dictionaries: o.Dictionaries})
				var out2 corpus.Article
				if _, err := r.Decode(b, &out2); err != nil {
					t.Fatalf("default reader: %v", err)
				}
			}
		})
	}
}

// normalise drops the monotonic clock and location so DeepEqual compares
// instants.
func normalise(a corpus.Article) corpus.Article {
	a.PublishedAt = a.PublishedAt.UTC()
	a.UpdatedAt = a.UpdatedAt.UTC()
	return a
}

func TestCompressionDecisions(t *testing.T) {
	c := mustNew(t, Options{})
	_, h, _ := c.Encode(nil, "tiny")
	if h.Compressor != IDNone {
		t.Errorf("4-byte value compressed with %d", h.Compressor)
	}
	_, h, _ = c.Encode(nil, strings.Repeat("abc", 1000))
	if h.Compressor != IDS2 {
		t.Errorf("compressible value stored with compressor %d", h.Compressor)
	}
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(i*7919 + i*i*31 + i>>3)
	}
	s2r := s2.Encode(nil, random)
	_, h, _ = c.Encode(nil, random)
	if saved := 1 - float64(len(s2r))/float64(len(random)); saved < DefaultMinSavings && h.Compressor != IDNone {
		t.Errorf("value compression saves %.0f%% of was kept compressed", saved*100)
	}
	c = mustNew(t, Options{MinCompressSize: 10_000})
	_, h, _ = c.Encode(nil, strings.Repeat("abc", 1000))
	if h.Compressor != IDNone {
		t.Errorf("value below MinCompressSize compressed")
	}
}

func TestNegative(t *testing.T) {
	c := mustNew(t, Options{})
	b := c.EncodeNegative([]byte("x"))
	if !bytes.Equal(b, []byte{'x', Magic0, Magic1, Version, byte(KindNegative), 0}) {
		t.Fatalf("negative entry % x", b)
	}
	v := "untouched"
	h, err := c.Decode(b[1:], &v)
	if err != nil || !h.Negative || h.Kind != KindNegative || v != "untouched" || h.Len != 5 {
		t.Fatalf("Decode(negative) = %+v, %v, v=%q", h, err, v)
	}
	// Version 1's three-byte negative entry still reads as one.
	h, err = c.Decode([]byte{Magic0, Magic1, Version1 | FlagNegative}, &v)
	if err != nil || !h.Negative || h.Kind != KindNegative || v != "untouched" || h.Len != 3 {
		t.Fatalf("Decode(v1 negative) = %+v, %v, v=%q", h, err, v)
	}
}

func TestRaw(t *testing.T) {
	c := mustNew(t, Options{Serializer: Raw()})
	for _, in := range []any{[]byte("bytes"), "string", new([]byte), ptr("p")} {
		b, _, err := c.Encode(nil, in)
		if err != nil {
			t.Fatalf("%T: %v", in, err)
		}
		var s string
		if _, err := c.Decode(b, &s); err != nil {
			t.Fatal(err)
		}
		var bs []byte
		if _, err := c.Decode(b, &bs); err != nil || string(bs) != s {
			t.Fatal(err, bs, s)
		}
	}
	if _, _, err := c.Encode(nil, 42); !errors.Is(err, ErrUnsupportedType) {
		t.Fatalf("Raw of an int: %v", err)
	}
	b, _, _ := c.Encode(nil, "x")
	var n int
	if _, err := c.Decode(b, &n); !errors.Is(err, ErrDeserialize) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("Raw into *int: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestValueTooLarge(t *testing.T) {
	c := mustNew(t, Options{MaxDecodedSize: 100})
	dst := []byte("keep")
	out, _, err := c.Encode(dst, strings.Repeat("x", 200))
	if !errors.Is(err, ErrValueTooLarge) || string(out) != "keep" {
		t.Fatalf("got %q, %v", out, err)
	}
}

// envelope builds an envelope by hand.
func envelope(ser, comp byte, dict uint32, rawLen int, payload []byte) []byte {
	b := []byte{Magic0, Magic1, Version1, ser, comp}
	b = binary.AppendUvarint(b, uint64(dict))
	b = binary.AppendUvarint(b, uint64(rawLen))
	return append(b, payload...)
}

func TestMalformed(t *testing.T) {
	c := mustNew(t, Options{MaxDecodedSize: 1 << 20})
	good, _, err := c.Encode(nil, corpus.NewArticle(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	goodHdr, _ := ParseHeader(good)
	small, _, _ := c.Encode(nil, "short")

	// go-redis/cache v9 writes msgpack (+ s2 over 64 bytes) with a
	// trailing 1-byte marker.
	gr := rediscache.New(&rediscache.Options{})
	grBig, err := gr.Marshal(corpus.NewArticle(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	grSmall, _ := gr.Marshal(map[string]int{"a": 1})
	var gobBuf bytes.Buffer
	_ = gob.NewEncoder(&gobBuf).Encode(corpus.NewArticle(1, 1))
	jsonDoc, _ := json.Marshal(corpus.NewArticle(1, 1))

	bomb := make([]byte, 1<<21)
	s2Bomb := s2.Encode(nil, bomb)
	zstdBomb := func() []byte {
		var buf bytes.Buffer
		w, _ := zstd.NewWriter(&buf) // streaming: no content size in the frame
		_, _ = w.Write(bomb)
		_ = w.Close()
		return buf.Bytes()
	}()
	zstdFCS := func() []byte {
		e, _ := zstd.NewWriter(nil)
		return e.EncodeAll(bomb, nil)
	}()

	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"plain string", []byte("hello, world"), ErrNotKura},
		{"json", jsonDoc, ErrNotKura},
		{"gob", gobBuf.Bytes(), ErrNotKura},
		{"go-redis/cache s2", grBig, ErrNotKura},
		{"go-redis/cache small", grSmall, ErrNotKura},
		{"raw snappy", snappy.Encode(nil, []byte(strings.Repeat("a", 100))), ErrNotKura},
		{"wrong second magic byte", []byte{Magic0, 'X', Version1, 1, 0, 0, 0}, ErrNotKura},
		{"magic only", []byte{Magic0}, ErrTruncated},
		{"magic two bytes", []byte{Magic0, Magic1}, ErrTruncated},
		{"negative with trailing bytes", []byte{Magic0, Magic1, Version1 | FlagNegative, 0}, ErrCorrupt},
		{"header cut in ids", good[:4], ErrTruncated},
		{"header cut in length", good[:goodHdr.Len-1], ErrTruncated},
		{"dictionary id overflows", []byte{Magic0, Magic1, Version1, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x7f, 0}, ErrCorrupt},
		{"length overflows", append([]byte{Magic0, Magic1, Version1, 1, 0, 0}, bytes.Repeat([]byte{0xff}, 11)...), ErrCorrupt},
		{"serializer 0", envelope(0, 0, 0, 1, []byte{0xc0}), ErrUnknownSerializer},
		{"unknown serializer", envelope(200, 0, 0, 1, []byte{0xc0}), ErrUnknownSerializer},
		{"unknown compressor", envelope(1, 99, 0, 1, []byte{0xc0}), ErrUnknownCompressor},
		{"unknown dictionary", envelope(1, IDZstd, 42, 1, []byte{0xc0}), ErrUnknownDictionary},
		{"dictionary with s2", envelope(1, IDS2, 42, 1, []byte{0xc0}), ErrUnknownDictionary},
		{"dictionary without compressor", envelope(1, 0, 42, 1, []byte{0xc0}), ErrCorrupt},
		{"truncated compressed payload", good[:len(good)-10], ErrCorrupt},
		{"truncated raw payload", small[:len(small)-1], ErrTruncated},
		{"trailing bytes", append(append([]byte{}, small...), 0), ErrCorrupt},
		{"length lies (short)", envelope(1, IDS2, 0, 10, s2.Encode(nil, []byte(strings.Repeat("x", 500)))), ErrCorrupt},
		{"length lies (long)", envelope(1, IDS2, 0, 5000, s2.Encode(nil, []byte(strings.Repeat("x", 500)))), ErrCorrupt},
		{"bomb: header over limit", envelope(1, IDS2, 0, 1<<30, s2Bomb), ErrTooLarge},
		{"bomb: huge uncompressed claim", envelope(1, 0, 0, 1<<40, nil), ErrTooLarge},
		{"bomb: s2 under a small header", envelope(1, IDS2, 0, 1000, s2Bomb), ErrCorrupt},
		{"bomb: zstd without content size", envelope(1, IDZstd, 0, 1000, zstdBomb), ErrCorrupt},
		{"bomb: zstd with content size", envelope(1, IDZstd, 0, 1000, zstdFCS), ErrCorrupt},
		{"garbage zstd", envelope(1, IDZstd, 0, 10, []byte("not zstd at all")), ErrCorrupt},
		{"garbage s2", envelope(1, IDS2, 0, 10, []byte{10, 0xff, 0xff, 0xff}), ErrCorrupt},
		{"msgpack into wrong type", small, ErrDeserialize},
		{"invalid msgpack", envelope(1, 0, 0, 1, []byte{0xc1}), ErrDeserialize},
		{"invalid json", envelope(IDJSON, 0, 0, 2, []byte("{x")), ErrDeserialize},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var dst corpus.Article
			_, err := c.Decode(tc.data, &dst)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode = %v, want %v", err, tc.want)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%v does not match ErrMalformed", err)
			}
		})
	}
	// Entries from a newer writer are not malformed: a reader must not
	// overwrite them.
	for name, data := range map[string][]byte{
		"future version": {Magic0, Magic1, 4, 0, 0, 1, 0, 0, 1, 0xc0},
		"version 0":      {Magic0, Magic1, 0, 1, 0, 0, 0},
		"unknown flag":   {Magic0, Magic1, Version1 | 0x20, 1, 0, 0, 0},
		"unknown kind":   {Magic0, Magic1, Version, 0x7f, 0},
	} {
		var dst corpus.Article
		_, err := c.Decode(data, &dst)
		if !errors.Is(err, ErrNotUnderstood) || errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Decode = %v, want ErrNotUnderstood only", name, err)
		}
	}
}

func TestOptionsErrors(t *testing.T) {
	dict := testDict(t)
	cases := []struct {
		field string
		o     Options
	}{
		{"MinSavings", Options{MinSavings: 1}},
		{"MaxDecodedSize", Options{MaxDecodedSize: -1}},
		{"Serializer", Options{Serializer: fakeSer{id: 0}}},
		{"Serializer", Options{Serializer: fakeSer{id: 50}}},
		{"Serializers", Options{Serializers: []Serializer{fakeSer{id: 200}, fakeSer{id: 200}}}},
		{"Compressor", Options{Compressor: fakeComp{id: 0}}},
		{"Compressors", Options{Compressors: []Compressor{fakeComp{id: 60}}}},
		{"Dictionary", Options{Dictionary: 3}},
		{"Dictionary", Options{Dictionaries: map[uint32][]byte{7: dict}, Dictionary: 7}}, // S2 takes no dictionary
		{"Dictionaries", Options{Dictionaries: map[uint32][]byte{0: []byte("x")}}},
		{"Dictionaries", Options{Dictionaries: map[uint32][]byte{8: dict}}}, // embeds id 7
		{"Dictionaries", Options{Dictionaries: map[uint32][]byte{8: {}}}},
	}
	for _, tc := range cases {
		_, err := New(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.o, err, tc.field)
		}
	}
	// A user serializer with a user id is fine, and decodes.
	c := mustNew(t, Options{Serializer: fakeSer{id: 200}})
	b, h, err := c.Encode(nil, "v")
	if err != nil || h.Serializer != 200 {
		t.Fatal(err, h)
	}
	if _, err := mustNew(t, Options{}).Decode(b, new(string)); !errors.Is(err, ErrUnknownSerializer) {
		t.Fatalf("reader without the user serializer: %v", err)
	}
	if _, err := mustNew(t, Options{Serializers: []Serializer{fakeSer{id: 200}}}).Decode(b, new(string)); err != nil {
		t.Fatalf("reader with Serializers: %v", err)
	}
}

type fakeSer struct{ id byte }

func (f fakeSer) ID() byte                                  { return f.id }
func (f fakeSer) Name() string                              { return "fake" }
func (f fakeSer) Marshal(dst []byte, v any) ([]byte, error) { return Raw().Marshal(dst, v) }
func (f fakeSer) Unmarshal(data []byte, v any) error        { return Raw().Unmarshal(data, v) }

type fakeComp struct{ id byte }

func (f fakeComp) ID() byte                                 { return f.id }
func (f fakeComp) Name() string                             { return "fakec" }
func (f fakeComp) Compress(dst, src []byte) ([]byte, error) { return append(dst, src...), nil }
func (f fakeComp) Decompress(dst, src []byte, n int) ([]byte, error) {
	return append(dst, src...), nil
}

func TestUserCompressor(t *testing.T) {
	// A user compressor that "compresses" by dropping nothing never saves
	// enough, so the value is stored uncompressed.
	c := mustNew(t, Options{Compressor: fakeComp{id: 130}, MinCompressSize: -1})
	_, h, err := c.Encode(nil, strings.Repeat("x", 300))
	if err != nil || h.Compressor != IDNone {
		t.Fatal(err, h)
	}
}

func TestConcurrent(t *testing.T) {
	c := mustNew(t, Options{Compressor: Zstd(3)})
	arts := corpus.Articles(3, 8)
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func() {
			var err error
			var buf []byte
			for i := 0; i < 20 && err == nil; i++ {
				buf, _, err = c.Encode(buf[:0], arts[(g+i)%len(arts)])
				var out corpus.Article
				if err == nil {
					_, err = c.Decode(buf, &out)
				}
				if err == nil && out.ID != arts[(g+i)%len(arts)].ID {
					err = errors.New("wrong article")
				}
			}
			done <- err
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
