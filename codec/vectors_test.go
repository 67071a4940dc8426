package codec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
)

var update = flag.Bool("update", false, "rewrite testdata/format/vectors.json from the codec")

const vectorsFile = "../testdata/format/vectors.json"

// vectorRecord is the record type of the "record" vectors. Other
// implementations encode it as a msgpack map (or JSON object) with these
// keys in this order.
type vectorRecord struct {
	ID   int      `json:"id" msgpack:"id"`
	Name string   `json:"name" msgpack:"name"`
	Tags []string `json:"tags" msgpack:"tags"`
	Body string   `json:"body" msgpack:"body"`
}

type vectorOptions struct {
	Serializer      string  `json:"serializer"`        // msgpack, json, raw
	Compressor      string  `json:"compressor"`        // none, s2, s2-better, zstd, s2-dict
	Level           int     `json:"level,omitempty"`   // zstd level
	MinCompressSize int     `json:"min_compress_size"` // as in Options
	MinSavings      float64 `json:"min_savings"`       // as in Options
	Dictionary      uint32  `json:"dictionary,omitempty"`
	DictionaryHex   string  `json:"dictionary_hex,omitempty"` // raw-content zstd dictionary, or an S2 dictionary (s2-dict)
	Compact         bool    `json:"compact,omitempty"`        // Options.Compact: version 3
	Positional      bool    `json:"positional,omitempty"`     // Options.PositionalStructs: structs as arrays
}

type vector struct {
	Name    string          `json:"name"`
	Note    string          `json:"note,omitempty"`
	Kind    string          `json:"kind"`  // negative, lease, tombstone, string, bytes, record
	Value   json.RawMessage `json:"value"` // string, hex string (bytes), or record object
	Options vectorOptions   `json:"options"`
	// Fields are the version 2 header fields the writer set.
	Fields Fields `json:"fields"`
	Header Header `json:"header"`
	Hex    string `json:"hex"`
	// ExactPayload is false when the payload bytes are one valid
	// compression among many: another encoder must decode Hex to Value,
	// and must match the header bytes, but may compress differently.
	ExactPayload bool `json:"exact_payload"`
}

// forgedVector is a value written with dictionary Real and a forgery of
// it with the same 28-bit content id (testdata/hostile/forged-dictionary.json).
type forgedVector struct {
	Name       string          `json:"name"`
	Note       string          `json:"note"`
	Dictionary uint32          `json:"dictionary"`
	RealHex    string          `json:"real_dictionary_hex"`
	ForgedHex  string          `json:"forged_dictionary_hex"`
	Digest     DictDigest      `json:"digest"` // of the real dictionary
	Value      json.RawMessage `json:"value"`  // Hex decoded with the real dictionary
	Hex        string          `json:"hex"`    // written with the real dictionary, with its digest
	// Error is what decoding Hex with the forged dictionary gives.
	Error string `json:"error"`
	// PreDigestHex is Hex without the digest field, as a writer from
	// before digests wrote it; with the forged dictionary it decodes to
	// ForgedValue: the attack the digest stops.
	PreDigestHex string          `json:"pre_digest_hex"`
	ForgedValue  json.RawMessage `json:"forged_value"`
}

type malformedVector struct {
	Name  string `json:"name"`
	Hex   string `json:"hex"`
	Error string `json:"error"` // the sentinel's name
}

type vectorFile struct {
	Comment string   `json:"comment"`
	Vectors []vector `json:"vectors"`
	// Version1 are entries written by format version 1, which every
	// reader keeps decoding.
	Version1 []vector `json:"version1"`
	// PreDigest are dictionary values written before the dictionary
	// digest field (tag 0x06), which every reader keeps decoding.
	PreDigest []vector          `json:"pre_digest"`
	Forged    []forgedVector    `json:"forged_dictionary"`
	Malformed []malformedVector `json:"malformed"`
	// NotUnderstood are well-formed entries a reader of this version must
	// treat as a miss and not overwrite (ErrNotUnderstood).
	NotUnderstood []malformedVector `json:"not_understood"`
}

var vectorRaw = []byte(strings.Repeat("kura news 金利と為替 rates and yields ", 8))

func vectorInputs() []vector {
	rec := vectorRecord{ID: 42, Name: "記事 article", Tags: []string{"金利", "yen"}, Body: strings.Repeat("日銀は金利を据え置いた。The yen weakened. ", 12)}
	small := vectorRecord{ID: 1, Name: "short", Tags: []string{}, Body: "tiny"}
	recJSON, _ := json.Marshal(rec)
	smallJSON, _ := json.Marshal(small)
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	hx := func(b []byte) json.RawMessage { return str(hex.EncodeToString(b)) }
	noise := make([]byte, 200)
	x := uint32(1)
	for i := range noise {
		x = x*1664525 + 1013904223
		noise[i] = byte(x >> 24)
	}
	dict := hex.EncodeToString(vectorRaw)
	s2dict := s2.MakeDict(vectorRaw, nil).Bytes()
	var long strings.Builder
	for i := range 60 {
		fmt.Fprintf(&long, "%d: kura news 金利と為替 rates and yields %d. ", i, i*i)
	}
	big := vectorRecord{ID: 43, Name: "記事 long", Tags: []string{"金利"}, Body: long.String()}
	bigJSON, _ := json.Marshal(big)
	def := vectorOptions{Serializer: "msgpack", Compressor: "s2"}
	with := func(f func(*vectorOptions)) vectorOptions { o := def; f(&o); return o }
	pos := with(func(o *vectorOptions) { o.Compact, o.Positional = true, true })
	cmp := with(func(o *vectorOptions) { o.Compact = true })
	sec := time.Unix(1795000000, 0).UTC()
	return []vector{
		{Name: "negative", Kind: "negative", Value: json.RawMessage("null"), Options: def, Note: "a cached \"not found\""},
		{Name: "negative-with-fields", Kind: "negative", Value: json.RawMessage("null"), Options: def, Fields: Fields{Written: time.UnixMilli(1795000000123).UTC(), TTL: 30 * time.Second}, Note: "fields on an entry that holds no value"},
		{Name: "lease", Kind: "lease", Value: json.RawMessage("null"), Options: def, Fields: Fields{Token: "7f3a9c0e5b12d4e6", Written: time.UnixMilli(1795000000123).UTC()}, Note: "a placeholder while one caller loads; never a value"},
		{Name: "tombstone", Kind: "tombstone", Value: json.RawMessage("null"), Options: def, Fields: Fields{Token: "7f3a9c0e5b12d4e7"}, Note: "an invalidated key"},
		{Name: "msgpack-record-s2-fields", Kind: "record", Value: recJSON, Options: def, Fields: Fields{Schema: 0x9e3779b9, HasSchema: true, Written: time.UnixMilli(1795000000123).UTC(), TTL: time.Hour, Cost: 4500 * time.Microsecond}, Note: "schema fingerprint, write time, TTL and load cost (early refresh)"},
		{Name: "msgpack-string-small", Kind: "string", Value: str("hello"), Options: def, Note: "below MinCompressSize: stored uncompressed"},
		{Name: "msgpack-record-small", Kind: "record", Value: smallJSON, Options: def},
		{Name: "msgpack-record-s2", Kind: "record", Value: recJSON, Options: def, Note: "the default configuration"},
		{Name: "msgpack-record-s2better", Kind: "record", Value: recJSON, Options: with(func(o *vectorOptions) { o.Compressor = "s2-better" }), Note: "same id as s2: another Snappy-compatible block"},
		{Name: "msgpack-record-zstd3", Kind: "record", Value: recJSON, Options: with(func(o *vectorOptions) { o.Compressor, o.Level = "zstd", 3 })},
		{Name: "msgpack-record-zstd-dict5", Kind: "record", Value: recJSON, Options: with(func(o *vectorOptions) {
			o.Compressor, o.Level, o.Dictionary, o.DictionaryHex = "zstd", 3, 5, dict
		}), Note: "raw-content dictionary id 5 (the zstd frame names none: raw dictionaries are written as zstd id 0); the digest field names the dictionary's content"},
		{Name: "msgpack-record-zstd-dict300", Kind: "record", Value: recJSON, Options: with(func(o *vectorOptions) {
			o.Compressor, o.Level, o.Dictionary, o.DictionaryHex = "zstd", 3, 300, dict
		}), Note: "dictionary id 300 takes a two-byte uvarint"},
		{Name: "msgpack-record-zstd-content-dict", Kind: "record", Value: recJSON, Options: with(func(o *vectorOptions) {
			o.Compressor, o.Level, o.Dictionary, o.DictionaryHex = "zstd", 3, DictionaryID(vectorRaw), dict
		}), Note: "content-derived dictionary id (28 bits of the SHA-256, 4 bytes of uvarint) and the dictionary's 128-bit digest in field 0x06, as dictstore readers and writers use them"},
		{Name: "json-record-none", Kind: "record", Value: recJSON, Options: with(func(o *vectorOptions) { o.Serializer, o.Compressor = "json", "none" })},
		{Name: "json-record-s2", Kind: "record", Value: recJSON, Options: with(func(o *vectorOptions) { o.Serializer = "json" })},
		{Name: "raw-string-none", Kind: "string", Value: str("user:42 → 東京"), Options: with(func(o *vectorOptions) { o.Serializer, o.Compressor = "raw", "none" })},
		{Name: "raw-empty", Kind: "bytes", Value: hx(nil), Options: with(func(o *vectorOptions) { o.Serializer = "raw" })},
		{Name: "raw-bytes-300-none", Kind: "bytes", Value: hx(bytes.Repeat([]byte{0xAB}, 300)), Options: with(func(o *vectorOptions) { o.Serializer, o.Compressor = "raw", "none" }), Note: "uncompressed length 300 takes a two-byte uvarint"},
		{Name: "raw-incompressible", Kind: "bytes", Value: hx(noise), Options: with(func(o *vectorOptions) { o.Serializer = "raw" }), Note: "s2 saves less than MinSavings: stored uncompressed"},
		{Name: "raw-always-compress", Kind: "string", Value: str("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), Options: with(func(o *vectorOptions) { o.Serializer, o.MinCompressSize, o.MinSavings = "raw", -1, -1 })},
		// Version 3 (Options.Compact). Write times are whole seconds: the
		// compact form stores seconds.
		{Name: "compact-string-17", Kind: "string", Value: str("user:42 logged in"), Options: cmp, Fields: Fields{Schema: 0x6d1d4e1b, HasSchema: true, Written: sec}, Note: "a string under msgpack: serializer 5 (string), no fingerprint (the serializer says it is a string), write time in seconds; 25 bytes"},
		{Name: "compact-string-utf8", Kind: "string", Value: str("user:42 → 東京"), Options: cmp, Fields: Fields{Written: sec}},
		{Name: "compact-record-named", Kind: "record", Value: smallJSON, Options: cmp, Fields: Fields{Schema: 0x9e3779b9, HasSchema: true, Written: sec}, Note: "a struct with a fingerprint under msgpack, as kura.New's default writes it: serializer 1, a map keyed by field name (the field-name rule)"},
		{Name: "compact-record-small", Kind: "record", Value: smallJSON, Options: pos, Fields: Fields{Schema: 0x9e3779b9, HasSchema: true, Written: sec}, Note: "a struct with a fingerprint under msgpack and PositionalStructs: serializer 6, a msgpack array of the field values in declaration order"},
		{Name: "compact-record-no-schema", Kind: "record", Value: smallJSON, Options: cmp, Fields: Fields{Written: sec}, Note: "without a fingerprint a struct stays a msgpack map (serializer 1)"},
		{Name: "compact-record-s2-fields", Kind: "record", Value: recJSON, Options: pos, Fields: Fields{Schema: 0x9e3779b9, HasSchema: true, Written: sec, TTL: time.Hour, Cost: 4500 * time.Microsecond}, Note: "compressed with s2 (byte 2 bit 0x10: the block carries its length), TTL in seconds and cost in µs after the write time (byte 2 bit 0x20)"},
		{Name: "compact-record-fetch-ms-ttl", Kind: "record", Value: smallJSON, Options: pos, Fields: Fields{Schema: 0x9e3779b9, HasSchema: true, Written: sec, TTL: 1500 * time.Millisecond, Cost: 250 * time.Microsecond}, Note: "a TTL that is not whole seconds stays in a version 2 field section (layout bit 0x40), exact"},
		{Name: "compact-record-zstd-content-dict", Kind: "record", Value: recJSON, Options: with(func(o *vectorOptions) {
			o.Compressor, o.Level, o.Dictionary, o.DictionaryHex, o.Compact, o.Positional = "zstd", 3, DictionaryID(vectorRaw), dict, true, true
		}), Fields: Fields{Schema: 0x9e3779b9, HasSchema: true, Written: sec}, Note: "a dictionary value: the digest travels in the field section"},
		{Name: "compact-record-s2-dict", Kind: "record", Value: recJSON, Options: with(func(o *vectorOptions) {
			o.Compressor, o.Dictionary, o.DictionaryHex, o.Compact, o.Positional = "s2-dict", DictionaryID(s2dict), hex.EncodeToString(s2dict), true, true
		}), Fields: Fields{Schema: 0x9e3779b9, HasSchema: true, Written: sec}, Note: "S2 with a dictionary (compressor 3; the dictionary in S2's form: a uvarint repeat offset, then the content): a block under 2 KiB, as kura's own encoder writes it"},
		{Name: "compact-record-s2-dict-large", Kind: "record", Value: bigJSON, Options: with(func(o *vectorOptions) {
			o.Compressor, o.Dictionary, o.DictionaryHex, o.Compact, o.Positional = "s2-dict", DictionaryID(s2dict), hex.EncodeToString(s2dict), true, true
		}), Fields: Fields{Schema: 0x9e3779b9, HasSchema: true, Written: sec}, Note: "a block of 2 KiB or more, as s2.Dict.Encode writes it (it may start with a repeat of the dictionary's own repeat offset)"},
		{Name: "compact-json-record", Kind: "record", Value: smallJSON, Options: with(func(o *vectorOptions) { o.Serializer, o.Compact = "json", true }), Fields: Fields{Schema: 0x9e3779b9, HasSchema: true, Written: sec}, Note: "other serializers are written as they are; the layout byte names them"},
		{Name: "compact-raw-bytes", Kind: "bytes", Value: hx([]byte{0, 1, 2, 0xfe, 0xff}), Options: with(func(o *vectorOptions) { o.Serializer, o.Compact = "raw", true })},
		{Name: "compact-msgpack-bytes", Kind: "bytes", Value: hx([]byte("not a string")), Options: cmp, Fields: Fields{Written: sec}, Note: "a []byte under msgpack stays msgpack (bin)"},
	}
}

func malformedVectors() []malformedVector {
	return []malformedVector{
		{"empty", "", "ErrTruncated"},
		{"plain text", hex.EncodeToString([]byte("hello")), "ErrNotKura"},
		{"json", hex.EncodeToString([]byte(`{"a":1}`)), "ErrNotKura"},
		{"go-redis/cache small value (msgpack + 0x00 marker)", "81a16101" + "00", "ErrNotKura"},
		{"truncated header", "c14b0101", "ErrTruncated"},
		{"v2 truncated header", "c14b0200", "ErrTruncated"},
		{"v2 field section longer than the entry", "c14b020005" + "0104", "ErrTruncated"},
		{"v2 field section over MaxFieldsLen", "c14b0200" + "8180" + "01", "ErrCorrupt"},
		{"v2 field longer than its section", "c14b020003" + "0105000000" + "0100" + "0001c0", "ErrCorrupt"},
		{"v2 schema field of 3 bytes", "c14b020005" + "0103000000" + "01000001c0", "ErrCorrupt"},
		{"v2 ttl field not one uvarint", "c14b020004" + "03020101" + "01000001c0", "ErrCorrupt"},
		{"v2 same field twice", "c14b020006" + "030101" + "030102" + "01000001c0", "ErrCorrupt"},
		{"v2 negative with trailing bytes", "c14b020100" + "00", "ErrCorrupt"},
		{"v2 serializer 0", "c14b020000" + "00000001c0", "ErrUnknownSerializer"},
		{"unknown serializer", "c14b01fa000001c0", "ErrUnknownSerializer"},
		{"unknown compressor", "c14b01016300" + "01c0", "ErrUnknownCompressor"},
		{"unknown dictionary", "c14b0101022a" + "01c0", "ErrUnknownDictionary"},
		{"payload shorter than length", "c14b0101000005" + "c0", "ErrTruncated"},
		{"payload longer than length", "c14b0101000001" + "c0c0", "ErrCorrupt"},
		{"length over MaxDecodedSize (8 GiB)", "c14b01010100" + "8080808080" + "20", "ErrTooLarge"},
		{"s2 block longer than length", "c14b0101010001" + "0a" + "24" + "61616161616161616161", "ErrCorrupt"},
		{"v3 no layout byte", "c14b03", "ErrTruncated"},
		{"v3 schema cut short", "c14b0311" + "1234", "ErrTruncated"},
		{"v3 write time cut short", "c14b0325" + "b4cc", "ErrTruncated"},
		{"v3 write time over 2^33 s", "c14b0325" + "8180808020" + "61", "ErrCorrupt"},
		{"v3 small serializer id written as a byte", "c14b0300" + "01" + "c0", "ErrCorrupt"},
		{"v3 serializer byte missing", "c14b0300", "ErrTruncated"},
		{"v3 unknown serializer", "c14b0300" + "fa" + "c0", "ErrUnknownSerializer"},
		{"v3 compressed with compressor 0", "c14b0309" + "00" + "00" + "01" + "c0", "ErrCorrupt"},
		{"v3 compressor byte 1 (s2 is a bit of byte 2)", "c14b0309" + "01" + "01" + "c0", "ErrCorrupt"},
		{"v3 s2 bit and a compressor byte", "c14b1309" + "02" + "00" + "01" + "c0", "ErrCorrupt"},
		{"v3 compressed without a length", "c14b0309" + "02" + "00", "ErrTruncated"},
		{"v3 s2 block without its length", "c14b1301", "ErrTruncated"},
		{"v3 s2 block claiming 8 GiB", "c14b1301" + "8080808020", "ErrTooLarge"},
		{"v3 ttl of 0 s", "c14b2301" + "00" + "00" + "c0", "ErrCorrupt"},
		{"v3 load cost cut short", "c14b2301" + "3c", "ErrTruncated"},
		{"v3 ttl twice (slot and field section)", "c14b2341" + "3c" + "00" + "04" + "0302ea60" + "c0", "ErrCorrupt"},
		{"v3 schema inside the field section", "c14b0341" + "06" + "010412345678" + "c0", "ErrCorrupt"},
		{"v3 field section longer than the entry", "c14b0341" + "09" + "0301", "ErrTruncated"},
		{"v3 string that is not UTF-8", "c14b0305" + "ff", "ErrDeserialize"},
		{"v3 length over MaxDecodedSize (8 GiB)", "c14b0309" + "02" + "00" + "8080808020", "ErrTooLarge"},
	}
}

// notUnderstoodVectors are well-formed entries from a newer writer.
func notUnderstoodVectors() []malformedVector {
	return []malformedVector{
		{"future version 4", "c14b04000001000001c0", "ErrUnsupportedVersion"},
		{"version 3 with a reserved bit of byte 2", "c14b4301c0", "ErrUnsupportedVersion"},
		{"version 3 with the reserved layout bit", "c14b0381c0", "ErrNotUnderstood"},
		{"version 2 with a flag bit", "c14b12000001000001c0", "ErrUnsupportedVersion"},
		{"version 1 with an unknown flag", "c14b21010000" + "00", "ErrUnsupportedVersion"},
		{"unknown entry kind 9", "c14b020900", "ErrNotUnderstood"},
		{"unknown critical field 0x90", "c14b020003" + "900100" + "01000001c0", "ErrNotUnderstood"},
	}
}

func vectorCodec(t *testing.T, o vectorOptions) *Codec {
	t.Helper()
	opts := Options{MinCompressSize: o.MinCompressSize, MinSavings: o.MinSavings, Dictionary: o.Dictionary, Compact: o.Compact, PositionalStructs: o.Positional}
	opts.Serializer = map[string]Serializer{"msgpack": MsgPack(), "json": JSON(), "raw": Raw()}[o.Serializer]
	switch o.Compressor {
	case "none":
		opts.Compressor = None()
	case "s2-better":
		opts.Compressor = S2Better()
	case "s2":
		opts.Compressor = S2()
	case "zstd":
		opts.Compressor = Zstd(o.Level)
	case "s2-dict":
		opts.Compressor = S2()
	default:
		t.Fatalf("unknown compressor %q", o.Compressor)
	}
	if o.DictionaryHex != "" {
		d, err := hex.DecodeString(o.DictionaryHex)
		if err != nil {
			t.Fatal(err)
		}
		opts.Dictionaries = map[uint32][]byte{o.Dictionary: d}
	}
	return mustNew(t, opts)
}

// vectorValue returns the Go value of a vector and a pointer to decode into.
func vectorValue(t *testing.T, v vector) (in any, out func() (any, any)) {
	t.Helper()
	switch v.Kind {
	case "negative", "lease", "tombstone":
		return nil, func() (any, any) { p := new(string); return p, func() any { return *p } }
	case "string":
		var s string
		if err := json.Unmarshal(v.Value, &s); err != nil {
			t.Fatal(err)
		}
		return s, func() (any, any) { p := new(string); return p, s }
	case "bytes":
		var h string
		_ = json.Unmarshal(v.Value, &h)
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		return b, func() (any, any) { p := new([]byte); return p, b }
	case "record":
		var r vectorRecord
		if err := json.Unmarshal(v.Value, &r); err != nil {
			t.Fatal(err)
		}
		return r, func() (any, any) { p := new(vectorRecord); return p, r }
	}
	t.Fatalf("unknown kind %q", v.Kind)
	return nil, nil
}

func encodeVector(t *testing.T, v vector) ([]byte, Header) {
	c := vectorCodec(t, v.Options)
	if k, ok := map[string]Kind{"negative": KindNegative, "lease": KindLease, "tombstone": KindTombstone}[v.Kind]; ok {
		b := AppendEntry(nil, k, v.Fields)
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		return b, h
	}
	in, _ := vectorValue(t, v)
	b, h, err := c.EncodeWith(nil, in, v.Fields)
	if err != nil {
		t.Fatal(err)
	}
	return b, h
}

// version1Vectors returns the version 1 vectors to keep in the file: the
// ones already there, or (once, when the file predates version 2) its
// value vectors, which were written by version 1.
func version1Vectors(t *testing.T) []vector {
	raw, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var old vectorFile
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	if len(old.Version1) > 0 {
		return old.Version1
	}
	var v1 []vector
	for _, v := range old.Vectors {
		b, err := hex.DecodeString(v.Hex)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ParseHeader(b)
		if err != nil || h.Version != Version1 {
			continue
		}
		v.Header = h
		v1 = append(v1, v)
	}
	return v1
}

// preDigestVectors returns the dictionary values written before the
// digest field to keep in the file: the ones already there, or (once)
// the file's dictionary vectors, which were written without it.
func preDigestVectors(t *testing.T) []vector {
	raw, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var old vectorFile
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	if len(old.PreDigest) > 0 {
		return old.PreDigest
	}
	var pre []vector
	for _, v := range old.Vectors {
		if v.Header.Dict != 0 && v.Header.Fields.DictDigest.IsZero() {
			pre = append(pre, v)
		}
	}
	return pre
}

func forgedVectors(t *testing.T) []forgedVector {
	p := loadForgery(t)
	honest := adminUser{Name: "alice", Email: "alice@example.com", Note: "n"}
	val, _, err := dictWriter(t, p.Real).Encode(nil, honest)
	if err != nil {
		t.Fatal(err)
	}
	pre := stripDigest(t, val)
	var forged adminUser
	if _, err := mustNew(t, Options{Dictionaries: map[uint32][]byte{p.ID: p.Forged}}).Decode(pre, &forged); err != nil || !forged.Admin {
		t.Fatalf("forgery: %+v, %v", forged, err)
	}
	hv, _ := json.Marshal(honest)
	fv, _ := json.Marshal(forged)
	return []forgedVector{{
		Name: "admin-false-forged-true", Dictionary: p.ID, Digest: DigestOf(p.Real),
		Note:    "a msgpack map {Name, Email, Admin, Note} (Go struct field order) compressed with zstd and a raw-content dictionary; the forgery has the same 28-bit id and turns Admin false into true. A reader holding the forgery under the id must refuse Hex (the digest differs) and would decode PreDigestHex to ForgedValue.",
		RealHex: hex.EncodeToString(p.Real), ForgedHex: hex.EncodeToString(p.Forged),
		Value: hv, Hex: hex.EncodeToString(val), Error: "ErrUnknownDictionary",
		PreDigestHex: hex.EncodeToString(pre), ForgedValue: fv,
	}}
}

func TestVectors(t *testing.T) {
	if *update {
		f := vectorFile{
			Comment:       "kura envelope test vectors; see docs/FORMAT.md. Regenerate with: go test ./codec -run TestVectors -update",
			Malformed:     malformedVectors(),
			NotUnderstood: notUnderstoodVectors(),
			Version1:      version1Vectors(t),
			PreDigest:     preDigestVectors(t),
			Forged:        forgedVectors(t),
		}
		for _, v := range vectorInputs() {
			b, h := encodeVector(t, v)
			v.Hex, v.Header = hex.EncodeToString(b), h
			v.ExactPayload = h.Compressor == IDNone || h.Kind != KindValue
			f.Vectors = append(f.Vectors, v)
		}
		out, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll("../testdata/format", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsFile, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	var f vectorFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < len(vectorInputs()) {
		t.Fatalf("%d vectors in the file, %d defined; run with -update", len(f.Vectors), len(vectorInputs()))
	}
	for _, v := range f.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			want, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			// Encoding must reproduce the header exactly, and the whole
			// value where the payload is not a compressor's choice.
			got, h := encodeVector(t, v)
			if h != v.Header {
				t.Errorf("header %+v, vector says %+v", h, v.Header)
			}
			if !bytes.Equal(got[:h.Len], want[:min(h.Len, len(want))]) {
				t.Errorf("header bytes % x, vector % x", got[:h.Len], want[:min(h.Len, len(want))])
			}
			if v.ExactPayload && !bytes.Equal(got, want) {
				t.Errorf("encoded\n%x\nvector\n%x", got, want)
			}
			// Decoding the vector's bytes must give the value back.
			c := vectorCodec(t, v.Options)
			_, mk := vectorValue(t, v)
			dst, wantV := mk()
			dh, err := c.Decode(want, dst)
			if err != nil {
				t.Fatal(err)
			}
			if dh != v.Header {
				t.Errorf("decoded header %+v, vector says %+v", dh, v.Header)
			}
			if dh.Kind == KindValue {
				gotV := reflect.ValueOf(dst).Elem().Interface()
				if b, ok := gotV.([]byte); ok && len(b) == 0 {
					gotV = wantV
				}
				if !reflect.DeepEqual(gotV, wantV) {
					t.Errorf("decoded %#v, want %#v", gotV, wantV)
				}
			}
		})
	}
	if len(f.Version1) == 0 {
		t.Fatal("no version 1 vectors")
	}
	for _, v := range f.Version1 {
		t.Run("v1/"+v.Name, func(t *testing.T) {
			b, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			c := vectorCodec(t, v.Options)
			_, mk := vectorValue(t, v)
			dst, wantV := mk()
			h, err := c.Decode(b, dst)
			if err != nil || h.Version != Version1 || h != v.Header {
				t.Fatalf("Decode = %+v, %v; vector header %+v", h, err, v.Header)
			}
			if h.Kind == KindValue {
				gotV := reflect.ValueOf(dst).Elem().Interface()
				if bb, ok := gotV.([]byte); ok && len(bb) == 0 {
					gotV = wantV
				}
				if !reflect.DeepEqual(gotV, wantV) {
					t.Errorf("decoded %#v, want %#v", gotV, wantV)
				}
			}
			// A version 1 header is still what AppendHeader writes for
			// Version1, byte for byte.
			if got := AppendHeader(nil, h); !bytes.Equal(got, b[:h.Len]) {
				t.Errorf("AppendHeader(v1) = % x, want % x", got, b[:h.Len])
			}
		})
	}
	if len(f.PreDigest) == 0 || len(f.Forged) == 0 {
		t.Fatal("no pre-digest or forged-dictionary vectors")
	}
	for _, v := range f.PreDigest {
		t.Run("pre-digest/"+v.Name, func(t *testing.T) {
			b, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			_, mk := vectorValue(t, v)
			dst, wantV := mk()
			h, err := vectorCodec(t, v.Options).Decode(b, dst)
			if err != nil || h.Dict == 0 || !h.Fields.DictDigest.IsZero() {
				t.Fatalf("Decode = %+v, %v", h, err)
			}
			if got := reflect.ValueOf(dst).Elem().Interface(); !reflect.DeepEqual(got, wantV) {
				t.Errorf("decoded %#v, want %#v", got, wantV)
			}
		})
	}
	for _, v := range f.Forged {
		t.Run("forged/"+v.Name, func(t *testing.T) {
			real, _ := hex.DecodeString(v.RealHex)
			forged, _ := hex.DecodeString(v.ForgedHex)
			val, _ := hex.DecodeString(v.Hex)
			pre, _ := hex.DecodeString(v.PreDigestHex)
			if DictionaryID(real) != v.Dictionary || DictionaryID(forged) != v.Dictionary || DigestOf(real) != v.Digest {
				t.Fatal("the vector's dictionaries do not have its id and digest")
			}
			var want, wantForged, got adminUser
			_ = json.Unmarshal(v.Value, &want)
			_ = json.Unmarshal(v.ForgedValue, &wantForged)
			if _, err := mustNew(t, Options{Dictionaries: map[uint32][]byte{v.Dictionary: real}}).Decode(val, &got); err != nil || got != want {
				t.Fatalf("with the real dictionary: %+v, %v", got, err)
			}
			withForged := mustNew(t, Options{Dictionaries: map[uint32][]byte{v.Dictionary: forged}})
			if _, err := withForged.Decode(val, new(adminUser)); !errors.Is(err, ErrDictionaryMismatch) || v.Error != "ErrUnknownDictionary" {
				t.Fatalf("with the forged dictionary: %v, want ErrDictionaryMismatch", err)
			}
			got = adminUser{}
			if _, err := withForged.Decode(pre, &got); err != nil || got != wantForged {
				t.Fatalf("pre-digest value with the forged dictionary: %+v, %v; want %+v", got, err, wantForged)
			}
		})
	}
	for _, m := range f.NotUnderstood {
		t.Run("not-understood/"+m.Name, func(t *testing.T) {
			b, err := hex.DecodeString(m.Hex)
			if err != nil {
				t.Fatal(err)
			}
			_, err = mustNew(t, Options{}).Decode(b, new(any))
			if !errors.Is(err, ErrNotUnderstood) || errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode = %v, want ErrNotUnderstood and not ErrMalformed", err)
			}
			if m.Error == "ErrUnsupportedVersion" && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("Decode = %v, want ErrUnsupportedVersion", err)
			}
		})
	}
	sentinels := map[string]error{
		"ErrNotKura": ErrNotKura, "ErrTruncated": ErrTruncated,
		"ErrUnknownSerializer": ErrUnknownSerializer, "ErrUnknownCompressor": ErrUnknownCompressor,
		"ErrUnknownDictionary": ErrUnknownDictionary, "ErrCorrupt": ErrCorrupt, "ErrTooLarge": ErrTooLarge,
		"ErrDeserialize": ErrDeserialize,
	}
	c := mustNew(t, Options{})
	for _, m := range f.Malformed {
		t.Run("malformed/"+m.Name, func(t *testing.T) {
			b, err := hex.DecodeString(m.Hex)
			if err != nil {
				t.Fatal(err)
			}
			want := sentinels[m.Error]
			if want == nil {
				t.Fatalf("unknown error name %q", m.Error)
			}
			_, err = c.Decode(b, new(any))
			if !errors.Is(err, want) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode = %v, want %s", err, m.Error)
			}
		})
	}
}
