// Package inspect describes what is stored under a cache key for a person:
// the kura envelope header, the TTL left, the server's own size for the
// key, and the value decoded as JSON. Values kura did not write are
// recognised where possible (plain JSON or text, a Snappy block, zlib or
// gzip, go-redis/cache's msgpack with its trailing compression byte) and
// otherwise described honestly as unknown bytes. It is the library behind
// `kura inspect` and the key page of `kura ui`.
//
// Decoding goes through the codec's limits and hostile-input checks: a
// value built to exhaust memory is reported as malformed, never decoded.
package inspect

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/s2"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// DefaultMaxDecoded is Options.MaxDecoded when left at zero.
const DefaultMaxDecoded = 16 << 20

// Options configures Key and Bytes. The zero value works.
type Options struct {
	// Codec decodes kura envelopes (give it the dictionaries your writers
	// use). If nil, codec.New(codec.Options{DictionarySource:
	// Dictionaries}).
	Codec *codec.Codec
	// Dictionaries finds the dictionary a value was compressed with, by
	// the id and digest its header names, when Codec is nil (with a
	// Codec, give the Codec its codec.Options.DictionarySource instead).
	// dictstore.Registry is one: it reads the dictionaries writers
	// published. A dictionary is used only if its bytes hash to the
	// value's digest. If nil, a value written with a dictionary is not
	// decoded, and the Report says which dictionary it needs.
	Dictionaries codec.DictionarySource
	// MaxDecoded bounds the bytes a foreign value may decompress to. If
	// zero, DefaultMaxDecoded (16 MiB).
	MaxDecoded int
	// Mask lists field names (at any depth of a decoded map) whose values
	// are replaced by "***" in Value: personal data stays hidden. Names
	// match case-insensitively ("email" masks a Go struct's Email);
	// Report.MaskUnmatched lists those that matched no field.
	Mask []string
	// MaxStored bounds the bytes of a value Key reads, when the store can
	// read part of a value (store.PrefixReader: Redis, memcached). A
	// longer value is not decoded: the Report says so (Truncated) and
	// carries its first bytes (Prefix) and, for a kura value, its header.
	// If 0, Key reads the whole value.
	MaxStored int
	// Schemas finds the published schema of a struct stored without its
	// field names (serializer msgpack-array, the compact envelope) by
	// the fingerprint the entry carries: the Report then shows the
	// fields by name (and Mask applies to them). dictstore.Registry is
	// one. If nil, or the schema is not published, such a value is shown
	// as the arrays it holds.
	Schemas SchemaSource

	ctx context.Context // Key's, for the Schemas lookup
}

// SchemaSource finds a published schema by its fingerprint
// (dictstore.Registry.Schema).
type SchemaSource interface {
	Schema(ctx context.Context, fingerprint uint32) (*codec.Schema, error)
}

// PrefixLen is how many bytes of a value over Options.MaxStored a Report
// carries in Prefix.
const PrefixLen = 4 << 10

// Report describes one key.
type Report struct {
	Key   string `json:"key"`
	Found bool   `json:"found"`
	// Type is the key's type on a Redis server ("string", "hash",
	// "list", "set", "zset", "stream"), Encoding the server's encoding of
	// it (OBJECT ENCODING), and Length a collection's number of elements;
	// empty when the store cannot tell (memcached holds strings only).
	Type     string `json:"type,omitempty"`
	Encoding string `json:"encoding,omitempty"`
	Length   int64  `json:"length,omitempty"`
	// Error is why the key could not be read (a caller describing many
	// keys reports it and goes on; Key itself returns it as its error).
	Error string `json:"error,omitempty"`
	// Format is "kura", "json", "text", "snappy", "zlib", "gzip",
	// "go-redis/cache", "redis-collection" (a hash, list, set, sorted set
	// or stream: Value holds its first elements) or "unknown".
	Format string `json:"format,omitempty"`
	// Kura is the envelope header of a kura value.
	Kura *Header `json:"kura,omitempty"`
	// StoredBytes is the length of the bytes under the key; RawBytes the
	// length after decompression.
	StoredBytes int `json:"stored_bytes"`
	RawBytes    int `json:"raw_bytes,omitempty"`
	// Meta from the store, when it can tell.
	TTLSeconds  *float64 `json:"ttl_seconds,omitempty"`
	NoTTL       bool     `json:"no_ttl,omitempty"`
	ServerBytes int64    `json:"server_bytes,omitempty"`
	Node        string   `json:"node,omitempty"`
	// Value is the decoded value as JSON (masked per Options.Mask).
	Value json.RawMessage `json:"value,omitempty"`
	// Note says what could not be decoded, and why.
	Note string `json:"note,omitempty"`
	// Truncated reports a value longer than Options.MaxStored: it was
	// not decoded, and Prefix holds its first bytes (at most PrefixLen).
	Truncated bool   `json:"truncated,omitempty"`
	Prefix    []byte `json:"prefix,omitempty"`
	// MaskUnmatched lists the Options.Mask names that matched no field of
	// a value that has named fields (a typo, or a value without them).
	MaskUnmatched []string `json:"mask_unmatched,omitempty"`
}

// Header is the envelope header, with names instead of ids.
type Header struct {
	Version int `json:"version"`
	// Kind is "value", "absent" (negative caching), "lease" (one caller
	// is loading the value) or "tombstone" (invalidated).
	Kind       string `json:"kind"`
	Serializer string `json:"serializer,omitempty"`
	Compressor string `json:"compressor,omitempty"`
	Dictionary uint32 `json:"dictionary,omitempty"`
	HeaderLen  int    `json:"header_bytes"`
	// The optional fields of a version 2 envelope, when present.
	Schema  string     `json:"schema,omitempty"` // the writer's type fingerprint, hex
	Written *time.Time `json:"written,omitempty"`
	// TTLSeconds is the TTL the writer set (the logical expiry is
	// Written + TTL), CostSeconds how long its loader took.
	TTLSeconds  float64 `json:"writer_ttl_seconds,omitempty"`
	CostSeconds float64 `json:"loader_cost_seconds,omitempty"`
	// Lease reports a lease token (never shown: it lets its holder
	// write).
	Lease bool `json:"lease_token,omitempty"`
}

// Key reads key from st and describes it. A missing key is a Report with
// Found false, not an error; store failures are errors.
func Key(ctx context.Context, st store.Store, key string, opts Options) (Report, error) {
	var (
		raw  []byte
		size int64
		err  error
	)
	pr, bounded := store.Find[store.PrefixReader](st)
	bounded = bounded && opts.MaxStored > 0
	if bounded {
		raw, size, err = pr.GetPrefix(ctx, key, opts.MaxStored)
	} else {
		raw, err = st.Get(ctx, key)
		size = int64(len(raw))
	}
	if errors.Is(err, store.ErrNotFound) {
		return Report{Key: key}, nil
	}
	if wrongType(err) {
		// A hash, list, set, sorted set or stream: GET cannot read it,
		// but what it is, how long, and its first elements can be shown.
		if r, ok := collection(ctx, st, key); ok {
			addMeta(ctx, st, &r)
			return r, nil
		}
		return Report{Key: key, Found: true, Format: "redis-collection",
			Note: "the key holds a Redis collection (a hash, list, set, sorted set or stream), which GET cannot read"}, nil
	}
	if err != nil {
		return Report{Key: key}, err
	}
	var r Report
	opts.ctx = ctx
	if bounded && size > int64(opts.MaxStored) {
		r = truncated(key, raw, size, opts.MaxStored)
	} else {
		r = Bytes(key, raw, opts)
	}
	r.Type, r.Encoding = keyType(ctx, st, key)
	addMeta(ctx, st, &r)
	return r, nil
}

// addMeta adds the TTL, the server's size and the node from a store that
// can tell.
func addMeta(ctx context.Context, st store.Store, r *Report) {
	if mr, ok := store.Find[store.MetaReader](st); ok {
		if m, err := mr.KeyMeta(ctx, r.Key); err == nil {
			if m.NoTTL {
				r.NoTTL = true
			} else {
				s := m.TTL.Seconds()
				r.TTLSeconds = &s
			}
			r.ServerBytes, r.Node = m.ServerBytes, m.Node
		}
	}
}

// truncated describes a value too long to decode from its first bytes.
func truncated(key string, prefix []byte, size int64, limit int) Report {
	r := Report{Key: key, Found: true, StoredBytes: int(size), Truncated: true, Prefix: prefix[:min(len(prefix), PrefixLen)]}
	r.Note = fmt.Sprintf("%d bytes stored, over the limit of %d this reader decodes: not decoded; its first %d bytes are shown as stored", size, limit, len(r.Prefix))
	if h, err := codec.ParseHeader(prefix); err == nil || !errors.Is(err, codec.ErrNotKura) {
		r.Format = "kura"
		if err == nil && h.Kind == codec.KindValue {
			r.Kura = &Header{Version: int(h.Version), Kind: "value", HeaderLen: h.Len, Dictionary: h.Dict,
				Serializer: serializerName(h.Serializer), Compressor: compressorName(h.Compressor)}
			r.RawBytes = h.RawLen
		}
	} else {
		r.Format = "unknown"
	}
	return r
}

// Bytes describes raw bytes read under key.
func Bytes(key string, raw []byte, opts Options) Report {
	if opts.Codec == nil {
		opts.Codec, _ = codec.New(codec.Options{DictionarySource: opts.Dictionaries})
	}
	if opts.MaxDecoded <= 0 {
		opts.MaxDecoded = DefaultMaxDecoded
	}
	r := Report{Key: key, Found: true, StoredBytes: len(raw)}
	m := newMasker(opts.Mask)
	if h, err := codec.ParseHeader(raw); err == nil || !errors.Is(err, codec.ErrNotKura) {
		r.Format = "kura"
		describeKura(&r, raw, h, err, opts, m)
	} else {
		describeForeign(&r, raw, opts, m, 0)
	}
	if m.fields && len(opts.Mask) > 0 {
		r.MaskUnmatched = m.unmatched(opts.Mask)
	}
	return r
}

// masker replaces the values of fields named in a mask, matching names
// case-insensitively, and remembers which names matched.
type masker struct {
	names  []string
	hit    []bool
	fields bool // the value had named fields to match
}

func newMasker(names []string) *masker {
	m := &masker{hit: make([]bool, len(names))}
	for _, n := range names {
		m.names = append(m.names, strings.ToLower(strings.TrimSpace(n)))
	}
	return m
}

func (m *masker) match(k string) bool {
	if m == nil {
		return false
	}
	m.fields = true
	matched := false
	for i, n := range m.names {
		if n != "" && strings.EqualFold(n, k) {
			m.hit[i], matched = true, true
		}
	}
	return matched
}

// unmatched returns the mask names (as given) that matched no field.
func (m *masker) unmatched(given []string) []string {
	var out []string
	for i, h := range m.hit {
		if !h {
			out = append(out, given[i])
		}
	}
	return out
}

func describeKura(r *Report, raw []byte, h codec.Header, perr error, opts Options, m *masker) {
	if perr != nil {
		if errors.Is(perr, codec.ErrNotUnderstood) {
			r.Note = "kura envelope from a newer writer (this kura cannot read it; readers leave it alone): " + perr.Error()
			return
		}
		r.Note = "kura envelope that does not parse: " + perr.Error()
		return
	}
	kh := &Header{Version: int(h.Version), Kind: "value", HeaderLen: h.Len, Dictionary: h.Dict}
	f := h.Fields
	if f.HasSchema {
		kh.Schema = fmt.Sprintf("%08x", f.Schema)
	}
	if !f.Written.IsZero() {
		w := f.Written.UTC()
		kh.Written = &w
	}
	kh.TTLSeconds, kh.CostSeconds, kh.Lease = f.TTL.Seconds(), f.Cost.Seconds(), f.Token != ""
	r.Kura = kh
	switch h.Kind {
	case codec.KindNegative:
		kh.Kind = "absent"
		r.Value = json.RawMessage("null")
		r.Note = "cached \"not found\" (negative caching)"
		return
	case codec.KindLease:
		kh.Kind = "lease"
		r.Note = "a lease: one caller is loading this key's value; others wait or read through"
		return
	case codec.KindTombstone:
		kh.Kind = "tombstone"
		r.Note = "a tombstone: the key was invalidated; a fill that started before it will not overwrite it"
		return
	}
	kh.Serializer = serializerName(h.Serializer)
	kh.Compressor = compressorName(h.Compressor)
	r.RawBytes = h.RawLen
	ctx := opts.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var v any
	if _, err := opts.Codec.DecodeContext(ctx, raw, &v); err != nil {
		if h.Serializer == codec.IDIDList {
			var ids []int64
			if _, err2 := opts.Codec.DecodeContext(ctx, raw, &ids); err2 == nil {
				r.Value = toJSON(ids, m)
				return
			}
		}
		r.Note = err.Error()
		if h.Dict != 0 && errors.Is(err, codec.ErrUnknownDictionary) {
			r.Note = fmt.Sprintf("compressed with dictionary %d, which this reader could not use (writers publish their dictionaries with dictstore; kura inspect and kura ui read them from the same servers): %v", h.Dict, err)
		}
		return
	}
	if h.Dict != 0 && f.DictDigest.IsZero() {
		r.Note = join(r.Note, fmt.Sprintf("compressed with dictionary %d but carries no digest (written before digests existed): the dictionary was matched by its 28-bit id only, which a forged dictionary can match in minutes; rewrite such values, then set codec.Options.RequireDictionaryDigest", h.Dict))
	}
	if h.Serializer == codec.IDMsgPackArray {
		var named bool
		var note string
		v, note, named = nameFields(v, h, opts)
		r.Note = join(r.Note, note)
		if !named && len(opts.Mask) > 0 {
			// No names to match the mask against: a field it names may be
			// anywhere, so no field value is shown.
			v = maskLeaves(v, 0)
			r.Note += "; the mask cannot be matched without field names, so every field value is shown as *** (publish the schema to see the others)"
		}
	}
	r.Value = toJSON(v, m)
}

// maskLeaves replaces every value in v that is not a map or an array
// (nil aside) with "***", keeping the shape.
func maskLeaves(v any, depth int) any {
	if depth > maxDepth {
		return "***"
	}
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = maskLeaves(e, depth+1)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = maskLeaves(e, depth+1)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = maskLeaves(e, depth+1)
		}
		return out
	}
	return "***"
}

// nameFields gives a msgpack-array value its field names from the
// schema published under its fingerprint, and says where they came from;
// named reports whether it did.
func nameFields(v any, h codec.Header, opts Options) (_ any, note string, named bool) {
	fp := fmt.Sprintf("%08x", h.Fields.Schema)
	arrays := "a struct stored as the array of its field values in declaration order (compact envelope); the field names are those of the Go type with schema fingerprint " + fp
	if opts.Schemas == nil || !h.Fields.HasSchema {
		return v, arrays, false
	}
	ctx := opts.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	s, err := opts.Schemas.Schema(ctx, h.Fields.Schema)
	if err != nil {
		return v, arrays + ": " + err.Error(), false
	}
	nv, err := s.Named(v)
	if err != nil {
		return v, arrays + "; the schema published under it does not fit this value, shown as stored: " + err.Error(), false
	}
	return nv, "a struct stored as the array of its field values (compact envelope), shown with the field names of the schema published under its fingerprint " + fp, true
}

func serializerName(id byte) string {
	switch id {
	case codec.IDMsgPack:
		return "msgpack"
	case codec.IDJSON:
		return "json"
	case codec.IDRaw:
		return "raw"
	case codec.IDIDList:
		return "idlist"
	case codec.IDString:
		return "string"
	case codec.IDMsgPackArray:
		return "msgpack-array"
	}
	return fmt.Sprintf("id %d", id)
}

func compressorName(id byte) string {
	switch id {
	case codec.IDNone:
		return "none"
	case codec.IDS2:
		return "s2"
	case codec.IDZstd:
		return "zstd"
	case codec.IDS2Dict:
		return "s2-dict"
	}
	return fmt.Sprintf("id %d", id)
}

// describeForeign recognises bytes kura did not write. depth bounds the
// nesting of compressed-inside-compressed.
func describeForeign(r *Report, raw []byte, opts Options, m *masker, depth int) {
	switch {
	case json.Valid(raw):
		if r.Format == "" {
			r.Format = "json"
		}
		if len(m.names) == 0 {
			// Nothing to mask: the text as stored, compacted, without
			// building the value (a deep, wide value built as Go values
			// costs some 80 times its size).
			var b bytes.Buffer
			b.Grow(len(raw))
			if json.Compact(&b, raw) == nil {
				r.Value = b.Bytes()
			}
			return
		}
		var v any
		if err := json.Unmarshal(raw, &v); err == nil {
			r.Value = toJSON(v, m)
		}
		return
	case len(raw) >= 2 && raw[0] == 0x1f && raw[1] == 0x8b && depth < 2:
		if out, err := inflate(gzipReader, raw, opts.MaxDecoded); err == nil {
			r.Format, r.RawBytes = "gzip", len(out)
			describeForeign(r, out, opts, m, depth+1)
			return
		}
	case len(raw) >= 2 && raw[0] == 0x78 && (uint16(raw[0])<<8|uint16(raw[1]))%31 == 0 && depth < 2:
		if out, err := inflate(zlibReader, raw, opts.MaxDecoded); err == nil {
			r.Format, r.RawBytes = "zlib", len(out)
			describeForeign(r, out, opts, m, depth+1)
			return
		}
	}
	if depth == 0 {
		if v, ok := goRedisCache(opts.Codec, raw, opts.MaxDecoded); ok {
			r.Format = "go-redis/cache"
			r.Value = toJSON(v, m)
			return
		}
		if n, err := s2.DecodedLen(raw); err == nil && n <= opts.MaxDecoded && n > 0 {
			if out, err := s2.Decode(nil, raw); err == nil {
				r.Format, r.RawBytes = "snappy", len(out)
				describeForeign(r, out, opts, m, depth+1)
				if r.Value != nil {
					return
				}
			}
		}
	}
	if utf8.Valid(raw) && !bytes.ContainsFunc(raw, func(c rune) bool { return c < 0x20 && c != '\n' && c != '\r' && c != '\t' }) {
		if r.Format == "" {
			r.Format = "text"
		}
		r.Value = toJSON(string(raw), nil)
		return
	}
	if r.Format == "" {
		r.Format = "unknown"
	}
	r.Note = fmt.Sprintf("%d bytes in no format kura recognises", len(raw))
	r.Value = toJSON(map[string]any{"base64": base64.StdEncoding.EncodeToString(raw[:min(len(raw), 256)]), "truncated": len(raw) > 256}, nil)
}

// goRedisCache decodes go-redis/cache's format: msgpack followed by one
// byte, 0 (as is) or 1 (the msgpack is an S2 block).
func goRedisCache(c *codec.Codec, raw []byte, limit int) (any, bool) {
	if len(raw) < 2 {
		return nil, false
	}
	body := raw[:len(raw)-1]
	switch raw[len(raw)-1] {
	case 0:
	case 1:
		n, err := s2.DecodedLen(body)
		if err != nil || n > limit {
			return nil, false
		}
		if body, err = s2.Decode(nil, body); err != nil {
			return nil, false
		}
	default:
		return nil, false
	}
	// Decode through kura's own codec, so its limits and hostile-input
	// checks apply to this foreign value too.
	env := codec.AppendHeader(nil, codec.Header{Version: 1, Serializer: codec.IDMsgPack, RawLen: len(body)})
	var v any
	if _, err := c.Decode(append(env, body...), &v); err != nil {
		return nil, false
	}
	return v, true
}

type readerFn func(io.Reader) (io.Reader, error)

func gzipReader(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
func zlibReader(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }

// inflate decompresses at most limit bytes; more is an error.
func inflate(open readerFn, raw []byte, limit int) ([]byte, error) {
	zr, err := open(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, fmt.Errorf("decompresses past %d bytes", limit)
	}
	return out, nil
}

// toJSON renders a decoded value as JSON: maps with non-string keys get
// string keys, bytes become base64, masked fields "***".
func toJSON(v any, mask *masker) json.RawMessage {
	b, err := json.Marshal(jsonable(v, mask, 0))
	if err != nil {
		b, _ = json.Marshal(fmt.Sprintf("(not representable as JSON: %v)", err))
	}
	return b
}

const maxDepth = 64

func jsonable(v any, mask *masker, depth int) any {
	if depth > maxDepth {
		return "(nested too deep)"
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = maskOr(k, e, mask, depth)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks := fmt.Sprint(k)
			out[ks] = maskOr(ks, e, mask, depth)
		}
		return out
	case []any:
		// In place: the decoded value is this package's own, and a copy
		// doubled the cost of a wide one.
		for i, e := range x {
			x[i] = jsonable(e, mask, depth+1)
		}
		return x
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return v
}

func maskOr(k string, e any, mask *masker, depth int) any {
	if mask.match(k) {
		return "***"
	}
	return jsonable(e, mask, depth+1)
}

// join joins two notes with "; ".
func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
