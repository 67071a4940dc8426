package codec

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// Defaults chosen by measurement; docs/benchmarks/codec.md has the numbers.
const (
	// DefaultMinCompressSize is the payload size below which values are
	// stored uncompressed when Options.MinCompressSize is 0.
	DefaultMinCompressSize = 256
	// DefaultMinSavings is the fraction of the payload compression must
	// save to be kept when Options.MinSavings is 0.
	DefaultMinSavings = 0.1
	// DefaultMaxDecodedSize is the largest uncompressed payload a Codec
	// accepts when Options.MaxDecodedSize is 0.
	DefaultMaxDecodedSize = 64 << 20
	// MaxRatio is the largest uncompressed/compressed size ratio a reader
	// accepts for payloads that decompress above RatioFloor bytes. It
	// bounds what one read of a small hostile value can cost: without it
	// a 7 KB zstd value expands to the 64 MiB limit (64 MiB and ~50 ms on
	// every read). Snappy cannot exceed ~21x; honest JSON compresses
	// 3-20x with zstd. Encode stores a value uncompressed rather than
	// write one that readers would refuse.
	MaxRatio = 256
	// RatioFloor is the uncompressed size up to which MaxRatio does not
	// apply: decompressing 1 MiB costs little whatever the input.
	RatioFloor = 1 << 20
)

// ratioTooHigh reports a compressed payload whose claimed size breaks
// MaxRatio.
func ratioTooHigh(rawLen, storedLen int) bool {
	return rawLen > RatioFloor && rawLen/MaxRatio > storedLen
}

// Options configures a Codec. The zero value is a working configuration:
// msgpack, S2 above DefaultMinCompressSize bytes, a 64 MiB decode limit.
type Options struct {
	// Serializer encodes values. If nil, it defaults to MsgPack().
	Serializer Serializer

	// Compressor compresses payloads. If nil, it defaults to S2(); use
	// None() to never compress.
	Compressor Compressor

	// MinCompressSize is the smallest serialized payload, in bytes, that
	// is worth trying to compress. If 0, it defaults to
	// DefaultMinCompressSize (256); if negative, every payload is tried.
	MinCompressSize int

	// MinSavings is the fraction of the payload (0..1) that compression
	// must save for the compressed form to be kept; otherwise the value
	// is stored uncompressed, which costs nothing to decode. If 0, it
	// defaults to DefaultMinSavings (0.1, i.e. 10%); if negative, the
	// compressed form is kept whenever it is smaller at all. With
	// Compact, 0 means the compressed form is kept whenever the entry is
	// smaller, header included.
	MinSavings float64

	// MaxDecodedSize caps the uncompressed payload length, in bytes, that
	// Decode accepts; a header claiming more is rejected with ErrTooLarge
	// before anything is allocated (a decompression bomb). Encode refuses
	// values above it with ErrValueTooLarge. If 0, it defaults to
	// DefaultMaxDecodedSize (64 MiB).
	MaxDecodedSize int

	// Serializers are extra serializers Decode recognises by id, for
	// values written by other configurations. The built-ins (MsgPack,
	// JSON, Raw) and Serializer are always recognised. Ids 128..255 are
	// for users; an id 1..127 may only replace the built-in of that id.
	Serializers []Serializer

	// Compressors are extra compressors Decode recognises by id. The
	// built-ins (None, S2, S2Better, Zstd) and Compressor are always
	// recognised. The same id rules as Serializers apply.
	Compressors []Compressor

	// Dictionaries maps dictionary ids (non-zero) to zstd dictionaries:
	// either the zstd dictionary format (from TrainDictionary, the
	// `zstd --train` tool or dict.BuildZstdDict), whose embedded id must
	// equal the key, or raw content used as a prefix dictionary. Decode
	// needs every dictionary any writer used.
	Dictionaries map[uint32][]byte

	// Dictionary is the id (in Dictionaries) that Encode compresses with.
	// If 0, no dictionary is used. It requires a Zstd compressor (and a
	// zstd or raw dictionary) or S2 (and an S2 dictionary from
	// TrainS2Dictionary; such values use compressor id IDS2Dict).
	// Codec.SetDictionary changes it while the Codec runs (rotation).
	Dictionary uint32

	// DictionarySource finds dictionaries that values use but
	// Dictionaries does not hold (a reader meeting a dictionary published
	// after it started). If nil, such values fail to decode with
	// ErrUnknownDictionary. See dictstore.Registry.
	DictionarySource DictionarySource

	// MaxDictionaries is how many dictionaries from DictionarySource a
	// Codec keeps ready for decoding (about 100 KB each plus the
	// dictionary); the least recently used is dropped beyond it and
	// looked up again when needed. If 0, it defaults to
	// DefaultMaxDictionaries (16). Dictionaries and every dictionary
	// passed to SetDictionary are kept regardless.
	MaxDictionaries int

	// DictionaryRecheck bounds how long a dictionary from
	// DictionarySource is used for values that carry no dictionary
	// digest (written before digests existed) before the source is asked
	// again; values with a digest are checked against it on every
	// decode. If 0, it defaults to DefaultDictionaryRecheck (1 minute);
	// if negative, a held dictionary is never re-asked.
	DictionaryRecheck time.Duration

	// RequireDictionaryDigest refuses (as ErrDictionaryMismatch) every
	// value that names a dictionary without its digest. Set it once no
	// writer of the cache predates digests: a forged dictionary with a
	// matching 28-bit id then changes no value at all. If false, such
	// values decode with the dictionary that matches their id.
	RequireDictionaryDigest bool

	// Compact makes Encode write the compact envelope (version 3,
	// docs/FORMAT.md): no kind byte or empty field section, the write
	// time in seconds (4 bytes), no length for an uncompressed payload,
	// and under MsgPack a string stored as its UTF-8 bytes (serializer
	// String). Structs keep their field names (see PositionalStructs). A
	// 17-character string with its write time takes 25 bytes instead of
	// 41. If false, Encode writes version 2 (kura.New's default Codec is
	// compact: kura.Options.Envelope). Every reader of this package reads both;
	// readers from before version 3 treat a compact entry as not
	// understood (a miss they do not overwrite), so upgrade every reader
	// before setting it on any writer. With Compact, a MinSavings of 0
	// keeps a compressed form whenever it is smaller, header included.
	Compact bool

	// PositionalStructs, with Compact and MsgPack, stores a struct written
	// with a schema fingerprint as the array of its field values, without
	// names (serializer MsgPackArray: a 3-field struct in 21 bytes instead
	// of about 40). Only a reader with the writer's fingerprint decodes
	// such a value into a struct; Node, Ruby, `kura inspect` and `kura ui`
	// name its fields only from a published schema (dictstore.Registry,
	// docs/FORMAT.md "Published schemas"). If false, structs are maps
	// keyed by field name, which every reader names. Without Compact it
	// is an error.
	PositionalStructs bool
}

// Codec encodes values into kura envelopes and decodes them. It is safe
// for concurrent use; make one and share it.
type Codec struct {
	ser         Serializer
	comp        Compressor
	dictID      uint32
	dictDigest  DictDigest
	minCompress int
	minSavings  float64
	maxDecoded  int
	compact     bool
	positional  bool

	sers  [256]Serializer
	comps [256]Compressor
	dicts *dictionaries
}

// New returns a Codec for opts, or an error naming the field of a
// conflicting or invalid option.
func New(opts Options) (*Codec, error) {
	c := &Codec{
		ser:         opts.Serializer,
		comp:        opts.Compressor,
		minCompress: opts.MinCompressSize,
		minSavings:  opts.MinSavings,
		maxDecoded:  opts.MaxDecodedSize,
		compact:     opts.Compact,
		positional:  opts.PositionalStructs,
	}
	if opts.PositionalStructs && !opts.Compact {
		return nil, fmt.Errorf("kura: codec: PositionalStructs: set without Compact; structs are stored by position only in the compact envelope (version 3)")
	}
	if c.ser == nil {
		c.ser = MsgPack()
	}
	if c.comp == nil {
		c.comp = S2()
	}
	switch {
	case c.minCompress == 0:
		c.minCompress = DefaultMinCompressSize
	case c.minCompress < 0:
		c.minCompress = 0
	}
	switch {
	case math.IsNaN(c.minSavings) || c.minSavings >= 1:
		return nil, fmt.Errorf("kura: codec: MinSavings: %v; want a fraction below 1 (0 for the default, negative for any saving)", opts.MinSavings)
	case c.minSavings == 0 && opts.Compact:
		// Compact values keep compression whenever it saves bytes net of
		// the header it adds (EncodeWith): smaller than the seed's
		// always-Snappy at every size (docs/FORMAT.md, "Version 3").
		c.minSavings = 0
	case c.minSavings == 0:
		c.minSavings = DefaultMinSavings
	case c.minSavings < 0:
		c.minSavings = 0
	}
	switch {
	case c.maxDecoded < 0:
		return nil, fmt.Errorf("kura: codec: MaxDecodedSize: %d; want 0 (64 MiB) or a positive size", opts.MaxDecodedSize)
	case c.maxDecoded == 0:
		c.maxDecoded = DefaultMaxDecodedSize
	}

	if err := register(&c.sers, "serializer", []Serializer{MsgPack(), JSON(), Raw(), IDList(), String(), MsgPackArray()},
		c.ser, opts.Serializers, func(s Serializer) (bool, error) {
			return false, fmt.Errorf("%q has id 0, which is invalid", s.Name())
		}); err != nil {
		return nil, err
	}
	if err := register(&c.comps, "compressor", []Compressor{None(), S2(), Zstd(0), &s2DictCompressor{}},
		c.comp, opts.Compressors, func(z Compressor) (bool, error) {
			if _, ok := z.(noneCompressor); ok {
				return true, nil
			}
			return false, fmt.Errorf("%q has id 0, reserved for None()", z.Name())
		}); err != nil {
		return nil, err
	}

	for id, d := range opts.Dictionaries {
		switch {
		case id == 0:
			return nil, fmt.Errorf("kura: codec: Dictionaries: id 0 means \"no dictionary\" and cannot be used")
		case len(d) == 0:
			return nil, fmt.Errorf("kura: codec: Dictionaries: dictionary %d is empty", id)
		case isZstdDict(d) && zstdDictID(d) != id && DictionaryID(d) != id:
			return nil, fmt.Errorf("kura: codec: Dictionaries: dictionary under id %d embeds zstd dictionary id %d and has content id %d; use one of them", id, zstdDictID(d), DictionaryID(d))
		}
	}
	if opts.MaxDictionaries < 0 {
		return nil, fmt.Errorf("kura: codec: MaxDictionaries: %d; want 0 (%d) or a positive count", opts.MaxDictionaries, DefaultMaxDictionaries)
	}
	if opts.Dictionary != 0 {
		d, ok := opts.Dictionaries[opts.Dictionary]
		if !ok {
			return nil, fmt.Errorf("kura: codec: Dictionary: id %d is not in Dictionaries", opts.Dictionary)
		}
		comp, err := bindDictionary(c.comp, opts.Dictionary, d)
		if err != nil {
			return nil, fmt.Errorf("kura: codec: Dictionary: %d: %w", opts.Dictionary, err)
		}
		c.comp = comp
		c.dictID = opts.Dictionary
		c.dictDigest = DigestOf(d)
	}
	// The decoders are built now so a bad dictionary fails New, not the
	// first read.
	var err error
	if c.dicts, err = newDictionaries(opts.Dictionaries, opts.DictionarySource, opts.MaxDictionaries, opts.DictionaryRecheck, opts.RequireDictionaryDigest); err != nil {
		return nil, fmt.Errorf("kura: codec: Dictionaries: %w", err)
	}
	return c, nil
}

// Serializer returns the serializer Encode uses.
func (c *Codec) Serializer() Serializer { return c.ser }

// Compressor returns the compressor Encode tries.
func (c *Codec) Compressor() Compressor { comp, _, _ := c.encoding(); return comp }

// Compact reports whether Encode writes the compact envelope
// (Options.Compact).
func (c *Codec) Compact() bool { return c.compact }

// PositionalStructs reports whether Encode stores structs by position
// (Options.PositionalStructs).
func (c *Codec) PositionalStructs() bool { return c.positional }

// MaxDecodedSize returns the effective decode limit in bytes.
func (c *Codec) MaxDecodedSize() int { return c.maxDecoded }

// Scratch buffers for the serialized (encode) and decompressed (decode)
// payload; they never escape to the caller.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

const maxPooledBuf = 1 << 20

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte, used []byte) {
	if cap(used) > maxPooledBuf {
		return
	}
	*b = used[:0]
	bufPool.Put(b)
}

// Encode appends the envelope of v to dst and returns it with the header
// that was written. The value is compressed only when its serialized form
// is at least MinCompressSize bytes and compression saves at least
// MinSavings of it. On error dst is returned unchanged (same length).
func (c *Codec) Encode(dst []byte, v any) ([]byte, Header, error) {
	return c.EncodeWith(dst, v, Fields{})
}

// EncodeWith is Encode with header fields (a schema fingerprint, write
// time, TTL, load cost). Fields that are zero cost no bytes.
func (c *Codec) EncodeWith(dst []byte, v any, f Fields) ([]byte, Header, error) {
	ser, version := c.ser, Version
	if c.compact {
		version = VersionCompact
		ser = compactSerializer(ser, v, f.HasSchema && c.positional)
		if ser.ID() == IDString {
			// The serializer says it is a string: no fingerprint needed.
			f.HasSchema, f.Schema = false, 0
		}
	}
	bp := getBuf()
	payload, err := ser.Marshal((*bp)[:0], v)
	if err != nil {
		putBuf(bp, payload)
		return dst, Header{}, fmt.Errorf("kura: encode with %s: %w", ser.Name(), err)
	}
	if len(payload) > c.maxDecoded {
		putBuf(bp, payload)
		return dst, Header{}, fmt.Errorf("%w: %d bytes serialized, MaxDecodedSize is %d", ErrValueTooLarge, len(payload), c.maxDecoded)
	}
	start := len(dst)
	h := Header{Version: version, Serializer: ser.ID(), RawLen: len(payload), Fields: f}
	h.Fields.DictDigest = DictDigest{} // set below, only with a dictionary
	comp, dictID, digest := c.encoding()
	if id := comp.ID(); id != IDNone && len(payload) >= c.minCompress {
		h.Compressor, h.Dict = id, dictID
		if dictID != 0 {
			h.Fields.DictDigest = digest
		}
		dst = AppendHeader(dst, h)
		h.Len = len(dst) - start
		var out []byte
		if s2c, ok := comp.(s2Compressor); ok && version == VersionCompact {
			out, err = s2c.compressSmallest(dst, payload)
		} else {
			out, err = comp.Compress(dst, payload)
		}
		if err != nil {
			putBuf(bp, payload)
			return dst[:start], Header{}, fmt.Errorf("kura: encode with %s: %w", comp.Name(), err)
		}
		saved := len(payload) - (len(out) - len(dst))
		if version == VersionCompact {
			// What the compressed form's header adds: compressor, dictionary
			// id and length (and a dictionary's digest).
			saved -= len(dst) - start - compactHeaderLen(&h)
		}
		if saved > 0 && float64(saved) >= c.minSavings*float64(len(payload)) && !ratioTooHigh(len(payload), len(out)-len(dst)) &&
			readable(ser, payload, len(out)-start) {
			putBuf(bp, payload)
			return out, h, nil
		}
		dst = out[:start]
		h.Compressor, h.Dict = IDNone, 0
		h.Fields.DictDigest = DictDigest{}
	}
	dst = AppendHeader(dst, h)
	h.Len = len(dst) - start
	dst = append(dst, payload...)
	putBuf(bp, payload)
	return dst, h, nil
}

// EncodeNegative appends a "known absent" entry to dst: a five-byte entry
// that Decode reports as Header.Negative, for caching a database miss.
func (c *Codec) EncodeNegative(dst []byte) []byte {
	return AppendEntry(dst, KindNegative, Fields{})
}

// Decode decodes the envelope in data into v, a pointer. The serializer,
// compressor and dictionary are chosen by the ids in the header, not by
// this Codec's Options, so any reader decodes what any writer stored as
// long as it knows the ids. If the entry holds no value (h.Kind is not
// KindValue: a negative entry, a lease placeholder, a tombstone), v is
// untouched and the error is nil. An entry this reader cannot fully
// understand gives an error matching ErrNotUnderstood (a miss the reader
// must not overwrite); every other error matches ErrMalformed. data is
// not retained.
func (c *Codec) Decode(data []byte, v any) (Header, error) {
	return c.DecodeContext(context.Background(), data, v)
}

// DecodeContext is Decode whose dictionary lookup (a value naming a
// dictionary this Codec does not hold, asked of a DictionarySource that
// implements ContextSource) ends when ctx is done. Nothing else in a
// decode waits.
func (c *Codec) DecodeContext(ctx context.Context, data []byte, v any) (Header, error) {
	h, err := ParseHeader(data)
	if err != nil || h.Kind != KindValue {
		return h, err
	}
	return c.decodeValue(ctx, h, data, v)
}

// decodeValue decodes the value entry data, whose header h is parsed.
func (c *Codec) decodeValue(ctx context.Context, h Header, data []byte, v any) (Header, error) {
	var err error
	ser := c.sers[h.Serializer]
	if ser == nil {
		return h, fmt.Errorf("%w %d", ErrUnknownSerializer, h.Serializer)
	}
	if h.RawLen > c.maxDecoded {
		return h, fmt.Errorf("%w: header claims %d bytes, limit %d", ErrTooLarge, h.RawLen, c.maxDecoded)
	}
	payload := data[h.Len:]
	if h.Compressor == IDNone {
		switch {
		case h.Dict != 0:
			return h, fmt.Errorf("%w: dictionary %d without a compressor", ErrCorrupt, h.Dict)
		case len(payload) < h.RawLen:
			return h, fmt.Errorf("%w: payload has %d of %d bytes", ErrTruncated, len(payload), h.RawLen)
		case len(payload) > h.RawLen:
			return h, fmt.Errorf("%w: %d bytes after the %d-byte payload", ErrCorrupt, len(payload)-h.RawLen, h.RawLen)
		}
		if err := unmarshal(ser, payload, v, len(data)); err != nil {
			return h, fmt.Errorf("%w (%s): %w", ErrDeserialize, ser.Name(), err)
		}
		return h, nil
	}

	comp := c.comps[h.Compressor]
	if comp == nil {
		return h, fmt.Errorf("%w %d", ErrUnknownCompressor, h.Compressor)
	}
	if ratioTooHigh(h.RawLen, len(payload)) {
		return h, fmt.Errorf("%w: %d compressed bytes claim %d uncompressed (more than %dx above %d bytes)", ErrBomb, len(payload), h.RawLen, MaxRatio, RatioFloor)
	}
	bp := getBuf()
	var raw []byte
	if h.Dict != 0 {
		raw, err = c.decodeWithDictionary(ctx, h, comp, (*bp)[:0], payload)
		if errors.Is(err, ErrUnknownDictionary) {
			putBuf(bp, raw)
			return h, err
		}
	} else {
		raw, err = comp.Decompress((*bp)[:0], payload, h.RawLen)
	}
	if err == nil && len(raw) != h.RawLen {
		err = errSizeMismatch
	}
	if err != nil {
		putBuf(bp, raw)
		return h, fmt.Errorf("%w (%s): %w", ErrCorrupt, comp.Name(), err)
	}
	err = unmarshal(ser, raw, v, len(data))
	putBuf(bp, raw)
	if err != nil {
		return h, fmt.Errorf("%w (%s): %w", ErrDeserialize, ser.Name(), err)
	}
	return h, nil
}

// registered is what a Serializer and a Compressor share: an id in the
// header and a name for messages.
type registered interface {
	ID() byte
	Name() string
}

// register fills table with kura's built-ins, then the chosen one (the
// Options field "Serializer"/"Compressor") and the extras (the field
// "Serializers"/"Compressors"). It refuses a nil, an id below 128 that
// kura has not given out (reserved), and two extras that share an id.
// zero judges an entry with id 0: skip it, or the error that refuses it.
func register[T registered](table *[256]T, kind string, builtins []T, chosen T, extras []T, zero func(T) (bool, error)) error {
	for _, b := range builtins {
		table[b.ID()] = b
	}
	field := strings.ToUpper(kind[:1]) + kind[1:]
	seen := map[byte]string{}
	for i, x := range append([]T{chosen}, extras...) {
		f := field
		if i > 0 {
			f += "s"
		}
		if any(x) == nil {
			return fmt.Errorf("kura: codec: %s: nil %s", f, kind)
		}
		id := x.ID()
		if i > 0 {
			if name, dup := seen[id]; dup {
				return fmt.Errorf("kura: codec: %s: %q and %q share id %d", f, name, x.Name(), id)
			}
			seen[id] = x.Name()
		}
		switch {
		case id == 0:
			skip, err := zero(x)
			if err != nil {
				return fmt.Errorf("kura: codec: %s: %w", f, err)
			}
			if skip {
				continue
			}
		case id < 128 && any(table[id]) == nil:
			return fmt.Errorf("kura: codec: %s: %q has id %d, reserved for kura (use 128..255)", f, x.Name(), id)
		}
		table[id] = x
	}
	return nil
}
