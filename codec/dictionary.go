package codec

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Content-addressed dictionaries.
//
// A dictionary that travels (published to the cache, shipped to readers
// that never saw it) is named by its content twice:
//
//   - its id, 28 bits of the SHA-256 of its bytes, in the envelope's
//     dictionary id (4 bytes of uvarint; 32 bits would cost 5). It finds
//     the dictionary (dictstore's key) and tells honest dictionaries of
//     one deployment apart (a collision among ten has odds of about 2e-7).
//     It does not stop an attacker: with write access to the servers, a
//     variant of a published dictionary with the same 28-bit id is found
//     in minutes on one core.
//   - its digest, the first 128 bits of the same SHA-256, in the value's
//     DictDigest field (tag 0x06, 18 bytes a value). A reader uses a
//     dictionary for a value only if its bytes hash to the value's
//     digest, so replacing a published dictionary changes no value: a
//     second preimage of 128 bits is out of reach.
//
// Values written before the digest field existed carry only the id; a
// reader still decodes them with the dictionary that hashes to the id
// (readers first), re-asks its DictionarySource about a dictionary it
// holds for them after Options.DictionaryRecheck, and refuses them all
// once Options.RequireDictionaryDigest is set.
//
// Trained dictionaries are in the zstd dictionary format with the zstd
// dictionary id 1 embedded: zstd frames carry that id in their own header,
// and 1 costs one byte there where the 28-bit id would cost four. The kura
// id in the envelope is the one that names the dictionary; the embedded
// id only has to be non-zero.

// ErrDictionaryMismatch reports dictionary bytes whose content does not
// hash to the id they were looked up by, or to the digest the value
// carries: a corrupted or substituted dictionary. It matches
// ErrUnknownDictionary (and so ErrMalformed): the value that needs it is
// a miss.
var ErrDictionaryMismatch = fmt.Errorf("%w: dictionary content does not match its id", ErrUnknownDictionary)

// contentIDBits is the width of content-derived dictionary ids. A
// variable only so that a test can forge ids of a shorter width quickly.
var contentIDBits = 28

// DigestLen is the length of a DictDigest in bytes (128 bits).
const DigestLen = 16

// DictDigest is the first DigestLen bytes of the SHA-256 of a
// dictionary's bytes: what a value's TagDictDigest field holds. The zero
// DictDigest means "absent". Its text form is 32 hex digits.
type DictDigest [DigestLen]byte

// DigestOf returns the digest of dictionary d.
func DigestOf(d []byte) DictDigest {
	sum := sha256.Sum256(d)
	var g DictDigest
	copy(g[:], sum[:DigestLen])
	return g
}

// IsZero reports an absent digest.
func (g DictDigest) IsZero() bool { return g == DictDigest{} }

// String returns the digest in hex.
func (g DictDigest) String() string { return hex.EncodeToString(g[:]) }

// MarshalText returns the digest in hex ("" when absent).
func (g DictDigest) MarshalText() ([]byte, error) {
	if g.IsZero() {
		return []byte{}, nil
	}
	return []byte(g.String()), nil
}

// UnmarshalText reads 32 hex digits ("" is the zero digest).
func (g *DictDigest) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*g = DictDigest{}
		return nil
	}
	if len(b) != 2*DigestLen {
		return fmt.Errorf("kura: codec: dictionary digest of %d hex digits, want %d", len(b), 2*DigestLen)
	}
	_, err := hex.Decode(g[:], b)
	return err
}

// embeddedZstdID is the zstd dictionary id written into trained
// dictionaries (see above).
const embeddedZstdID = 1

// DictionaryID returns the content-derived id of a dictionary: the first
// 28 bits of the SHA-256 of d, never 0. It is the id TrainS2Dictionary,
// TrainContentDictionary and the dictstore package use. The id alone
// does not authenticate the bytes; DigestOf does.
func DictionaryID(d []byte) uint32 {
	sum := sha256.Sum256(d)
	id := binary.BigEndian.Uint32(sum[:4]) >> (32 - contentIDBits)
	if id == 0 {
		id = 1
	}
	return id
}

// CheckDictionary returns nil when d's content id is id, and an error
// matching ErrDictionaryMismatch otherwise.
func CheckDictionary(id uint32, d []byte) error {
	if len(d) == 0 {
		return fmt.Errorf("%w: dictionary %d is empty", ErrDictionaryMismatch, id)
	}
	if got := DictionaryID(d); got != id {
		return fmt.Errorf("%w: looked up as %d, content hashes to %d (%d bytes)", ErrDictionaryMismatch, id, got, len(d))
	}
	return nil
}

// CheckDictionaryDigest returns nil when d's content id is id and, if
// want is not zero, d's digest is want; otherwise an error matching
// ErrDictionaryMismatch.
func CheckDictionaryDigest(id uint32, want DictDigest, d []byte) error {
	if err := CheckDictionary(id, d); err != nil {
		return err
	}
	if !want.IsZero() {
		if got := DigestOf(d); got != want {
			return fmt.Errorf("%w: dictionary %d has digest %s, the value names %s (%d bytes)", ErrDictionaryMismatch, id, got, want, len(d))
		}
	}
	return nil
}

// TrainContentDictionary builds a zstd dictionary of at most maxSize bytes
// (0: 64 KiB) from sample payloads (serialized values, the Serializer's
// Marshal output) and returns it with its content-derived id. See
// TrainDictionary for how to choose samples. The result goes to
// Options.Dictionaries[id], Codec.SetDictionary or dictstore.Publish.
func TrainContentDictionary(samples [][]byte, maxSize int) ([]byte, uint32, error) {
	if len(samples) == 0 {
		return nil, 0, errors.New("kura: codec: TrainContentDictionary: no samples")
	}
	if maxSize <= 0 {
		maxSize = 64 << 10
	}
	d, err := buildZstdDict(samples, embeddedZstdID, maxSize)
	if err != nil {
		return nil, 0, fmt.Errorf("kura: codec: TrainContentDictionary: %w", err)
	}
	return d, DictionaryID(d), nil
}

// maxZstdTrainBytes bounds the sample bytes the zstd dictionary builder
// gets: klauspost/compress v1.20.3's builder panics (a negative slice
// bound in its encoder's history) on some sample sets of a few MB, such
// as the 130 browser-compat feature trees over 10 KB (3.5 MB).
const maxZstdTrainBytes = 1 << 20

// buildZstdDict runs the zstd dictionary builder (dictionary id id) on samples (every k-th
// of them, when they hold more than maxZstdTrainBytes), and turns a panic
// of the builder into an error.
func buildZstdDict(samples [][]byte, id uint32, maxSize int) (d []byte, err error) {
	total := 0
	for _, s := range samples {
		total += len(s)
	}
	if total > maxZstdTrainBytes {
		step := (total + maxZstdTrainBytes - 1) / maxZstdTrainBytes
		var some [][]byte
		for i := 0; i < len(samples); i += step {
			some = append(some, samples[i])
		}
		samples = some
	}
	defer func() {
		if p := recover(); p != nil {
			d, err = nil, fmt.Errorf("the zstd dictionary builder failed on %d samples: %v", len(samples), p)
		}
	}()
	return dict.BuildZstdDict(samples, dict.Options{
		MaxDictSize: maxSize,
		HashBytes:   6,
		ZstdDictID:  id,
		ZstdLevel:   zstd.SpeedDefault,
	})
}

// DictionarySource finds dictionaries a Codec meets in values but does not
// hold in Options.Dictionaries: a reader that starts after a writer
// published a new dictionary looks it up here once, by id.
//
// Dictionary must return the bytes whose DictionaryID is id, or an error
// (matching ErrUnknownDictionary when the id is simply not found, and
// ErrDictionaryMismatch when the source knows of more than one content
// for id). It is called on the decode path of the first value that uses
// an id, and again after Options.DictionaryRecheck, so it must bound its
// own wait and remember failures for a while; the Codec calls it again
// for every value until it succeeds. The Codec checks the bytes against
// id (and the value's digest) before using them. Implementations must be
// safe for concurrent use. dictstore.Registry is one.
type DictionarySource interface {
	Dictionary(id uint32) ([]byte, error)
}

// DigestSource is a DictionarySource that can also look a dictionary up
// by the digest a value carries: DictionaryDigest returns the bytes of
// dictionary id whose DigestOf is digest, reading them again (not from
// what it holds) when what it holds hashes to another digest. A Codec
// whose source is not a DigestSource asks Dictionary and refuses bytes
// of another digest.
type DigestSource interface {
	DictionarySource
	DictionaryDigest(id uint32, digest DictDigest) ([]byte, error)
}

// ContextSource is a DictionarySource whose lookups end when a context is
// done: DictionaryContext returns dictionary id (whose digest is digest,
// unless digest is zero) as DictionaryDigest or Dictionary would, or
// ctx's error (matching ErrUnknownDictionary) once ctx is done. A Codec
// prefers it to the other two, and passes it the context of
// DecodeContext and DecodeSchemaContext.
type ContextSource interface {
	DictionarySource
	DictionaryContext(ctx context.Context, id uint32, digest DictDigest) ([]byte, error)
}

// DefaultMaxDictionaries is the number of dictionaries a Codec keeps ready
// for decoding when Options.MaxDictionaries is 0.
const DefaultMaxDictionaries = 16

// DefaultDictionaryRecheck is how long a Codec uses a dictionary from its
// DictionarySource for values without a digest before asking the source
// again, when Options.DictionaryRecheck is 0.
const DefaultDictionaryRecheck = time.Minute

// errNoDigest is returned for a dictionary value without a digest when
// Options.RequireDictionaryDigest is set.
var errNoDigest = fmt.Errorf("%w: the value names its dictionary without a digest (written before digests; Options.RequireDictionaryDigest is set)", ErrDictionaryMismatch)

// dictionaries holds a Codec's dictionaries by id, with their decoders
// built on first use (a zstd decoder, or an S2 dictionary, as the values
// need), and the dictionary Encode uses. Dictionaries from
// Options.Dictionaries and SetDictionary stay for the Codec's life; those
// from the DictionarySource are kept up to MaxDictionaries, least
// recently used out first, and are re-asked from the source after
// recheck for values that carry no digest.
type dictionaries struct {
	source  DictionarySource
	max     int
	recheck time.Duration // < 0: never
	require bool
	now     func() time.Time

	mu      sync.Mutex
	decs    map[uint32]*dictDecoder
	clock   uint64
	dynamic int

	// enc is the dictionary Encode compresses with, set by
	// Codec.SetDictionary; nil means Options.Dictionary (or none).
	enc atomic.Pointer[dictEncoding]
}

type dictDecoder struct {
	id      uint32
	d       []byte
	digest  DictDigest
	pinned  bool
	used    uint64    // under dictionaries.mu
	checked time.Time // under dictionaries.mu: when the source last vouched for d

	zOnce sync.Once
	z     *zstd.Decoder
	zErr  error

	sOnce sync.Once
	s     *s2.Dict
}

// zstd returns the dictionary's zstd decoder. Each dictionary gets its own
// decoder so that dictionaries can be added while the Codec runs (a
// zstd.Decoder's dictionaries are fixed when it is made).
func (dd *dictDecoder) zstd() (*zstd.Decoder, error) {
	dd.zOnce.Do(func() {
		opts := []zstd.DOption{
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderLowmem(false),
		}
		if isZstdDict(dd.d) {
			opts = append(opts, zstd.WithDecoderDicts(dd.d))
		} else {
			// A raw (content-only) dictionary is registered under zstd
			// id 0, as frames written with it carry none, and under its
			// own id for frames from writers that named it.
			opts = append(opts, zstd.WithDecoderDictRaw(0, dd.d), zstd.WithDecoderDictRaw(dd.id, dd.d))
		}
		dd.z, dd.zErr = zstd.NewReader(nil, opts...)
	})
	return dd.z, dd.zErr
}

// s2dict returns the dictionary as an S2 dictionary, nil if it is not one.
func (dd *dictDecoder) s2dict() *s2.Dict {
	dd.sOnce.Do(func() { dd.s = s2.NewDict(dd.d) })
	return dd.s
}

// dictEncoding is a compressor bound to one dictionary.
type dictEncoding struct {
	id     uint32
	digest DictDigest
	comp   Compressor
}

func newDictionaries(static map[uint32][]byte, source DictionarySource, max int, recheck time.Duration, require bool) (*dictionaries, error) {
	if max <= 0 {
		max = DefaultMaxDictionaries
	}
	if recheck == 0 {
		recheck = DefaultDictionaryRecheck
	}
	ds := &dictionaries{source: source, max: max, recheck: recheck, require: require, now: time.Now,
		decs: make(map[uint32]*dictDecoder, len(static))}
	for id, d := range static {
		dd := &dictDecoder{id: id, d: d, digest: DigestOf(d), pinned: true}
		if isZstdDict(d) {
			if _, err := dd.zstd(); err != nil {
				return nil, fmt.Errorf("dictionary %d: %w", id, err)
			}
		}
		ds.decs[id] = dd
	}
	return ds, nil
}

// get returns dictionary id for a value that carries digest want (zero:
// none), loading it from the source when it is not held, when the held
// one hashes to another digest, or when the held one is due a re-check.
func (ds *dictionaries) get(ctx context.Context, id uint32, want DictDigest) (*dictDecoder, error) {
	if want.IsZero() && ds.require {
		return nil, fmt.Errorf("dictionary %d: %w", id, errNoDigest)
	}
	now := ds.now()
	ds.mu.Lock()
	dd, ok := ds.decs[id]
	if ok {
		ds.clock++
		dd.used = ds.clock
		switch {
		case !want.IsZero() && dd.digest == want:
			// The value vouches for the bytes: nothing to re-check.
			ds.mu.Unlock()
			return dd, nil
		case !want.IsZero() && (dd.pinned || ds.source == nil):
			ds.mu.Unlock()
			return nil, fmt.Errorf("%w: dictionary %d held with digest %s, the value names %s", ErrDictionaryMismatch, id, dd.digest, want)
		case want.IsZero() && (dd.pinned || ds.source == nil || ds.recheck < 0 || now.Sub(dd.checked) < ds.recheck):
			ds.mu.Unlock()
			return dd, nil
		}
	}
	ds.mu.Unlock()
	if ds.source == nil {
		return nil, fmt.Errorf("%w %d (add it to Options.Dictionaries or set Options.DictionarySource)", ErrUnknownDictionary, id)
	}
	d, err := ds.ask(ctx, id, want)
	if err == nil {
		err = CheckDictionaryDigest(id, want, d)
	}
	if err != nil {
		if ok && want.IsZero() && !errors.Is(err, ErrDictionaryMismatch) {
			// A re-check the source could not answer (a store error, an
			// evicted key): nothing contradicts the held bytes, which
			// matched the id when they were loaded. Use them and ask
			// again after another recheck period.
			ds.mu.Lock()
			dd.checked = now
			ds.mu.Unlock()
			return dd, nil
		}
		if ok && errors.Is(err, ErrDictionaryMismatch) && want.IsZero() {
			// The source now knows other bytes for this id: the held
			// ones are no longer trusted for values without a digest.
			ds.drop(id, dd)
		}
		if errors.Is(err, ErrUnknownDictionary) {
			return nil, err
		}
		return nil, fmt.Errorf("%w %d: %w", ErrUnknownDictionary, id, err)
	}
	digest := DigestOf(d)
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if cur, ok := ds.decs[id]; ok {
		if cur.digest == digest {
			// The same bytes (a re-check, or another goroutine loaded
			// them meanwhile): keep one decoder.
			cur.checked = now
			return cur, nil
		}
		if cur.pinned {
			return nil, fmt.Errorf("%w: dictionary %d held with digest %s, the source has %s", ErrDictionaryMismatch, id, cur.digest, digest)
		}
		// Other bytes than those held: the source's answer replaces them.
		delete(ds.decs, id)
		ds.dynamic--
	}
	ds.clock++
	dd = &dictDecoder{id: id, d: d, digest: digest, used: ds.clock, checked: now}
	ds.decs[id] = dd
	ds.dynamic++
	for ds.dynamic > ds.max {
		ds.evictOldest()
	}
	return dd, nil
}

// ask looks dictionary id up in the source, by digest when the value
// carries one and the source can.
func (ds *dictionaries) ask(ctx context.Context, id uint32, want DictDigest) ([]byte, error) {
	if s, ok := ds.source.(ContextSource); ok {
		return s.DictionaryContext(ctx, id, want)
	}
	if !want.IsZero() {
		if s, ok := ds.source.(DigestSource); ok {
			return s.DictionaryDigest(id, want)
		}
	}
	return ds.source.Dictionary(id)
}

// drop forgets dynamic dictionary dd if it is still the one held for id.
func (ds *dictionaries) drop(id uint32, dd *dictDecoder) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if cur, ok := ds.decs[id]; ok && cur == dd && !cur.pinned {
		delete(ds.decs, id)
		ds.dynamic--
	}
}

// evictOldest drops the least recently used dynamic dictionary. Its
// decoder is not closed: a goroutine may still be decoding with it, and a
// decoder used only through DecodeAll holds no goroutines, so the
// collector frees it.
func (ds *dictionaries) evictOldest() {
	var oldest uint32
	var at uint64
	found := false
	for id, dd := range ds.decs {
		if dd.pinned {
			continue
		}
		if !found || dd.used < at {
			oldest, at, found = id, dd.used, true
		}
	}
	if !found {
		ds.dynamic = 0
		return
	}
	delete(ds.decs, oldest)
	ds.dynamic--
}

// held reports the ids with a decoder ready, for tests and tools.
func (ds *dictionaries) held() []uint32 {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ids := make([]uint32, 0, len(ds.decs))
	for id := range ds.decs {
		ids = append(ids, id)
	}
	return ids
}

// add keeps dictionary d (already checked) for the Codec's life.
func (ds *dictionaries) add(id uint32, d []byte) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	digest := DigestOf(d)
	if dd, ok := ds.decs[id]; ok {
		if dd.digest == digest {
			if !dd.pinned {
				dd.pinned = true
				ds.dynamic--
			}
			return
		}
		// The writer's own dictionary replaces whatever was fetched
		// under its id.
		if !dd.pinned {
			ds.dynamic--
		}
	}
	ds.decs[id] = &dictDecoder{id: id, d: d, digest: digest, pinned: true}
}

// bindDictionary returns comp compressing with dictionary d under id: a
// zstd compressor at the same level, or S2's dictionary compressor (its
// own id, IDS2Dict: S2 blocks with a dictionary are not Snappy blocks).
func bindDictionary(comp Compressor, id uint32, d []byte) (Compressor, error) {
	switch z := comp.(type) {
	case *zstdCompressor:
		nz := &zstdCompressor{level: z.level, zlevel: z.zlevel, dictID: id, dict: d}
		if _, err := nz.encoder(); err != nil {
			return nil, err
		}
		return nz, nil
	case s2Compressor:
		if isZstdDict(d) {
			return nil, errors.New("a zstd-format dictionary cannot compress S2 blocks; use Zstd, or TrainS2Dictionary")
		}
		sd := s2.NewDict(d)
		if sd == nil {
			return nil, errors.New("not an S2 dictionary (TrainS2Dictionary makes one; 16 B to 64 KiB of content)")
		}
		dc := &s2DictCompressor{better: z.better, id: id, dict: sd}
		if !z.better {
			dc.fast = newS2DictEncoder(sd)
		}
		return dc, nil
	case *s2DictCompressor:
		return bindDictionary(s2Compressor{better: z.better}, id, d)
	}
	return nil, fmt.Errorf("compressor %q does not support dictionaries; use Zstd or S2", comp.Name())
}

// SetDictionary makes Encode compress with dictionary d from now on (the
// rotation of a writer), and returns d's content id. Values written
// before keep their old id in their header and decode as long as this
// Codec (or any reader) can find the old dictionary; this Codec keeps
// every dictionary it encoded with. The Codec's compressor must be Zstd
// (d from TrainContentDictionary) or S2 (d from TrainS2Dictionary; values
// then use compressor id IDS2Dict). It is safe to call while other
// goroutines encode and decode.
func (c *Codec) SetDictionary(d []byte) (uint32, error) {
	if len(d) == 0 {
		return 0, errors.New("kura: codec: SetDictionary: empty dictionary")
	}
	id := DictionaryID(d)
	comp, err := bindDictionary(c.comp, id, d)
	if err != nil {
		return 0, fmt.Errorf("kura: codec: SetDictionary: %w", err)
	}
	c.dicts.add(id, d)
	c.dicts.enc.Store(&dictEncoding{id: id, digest: DigestOf(d), comp: comp})
	return id, nil
}

// Dictionary returns the id of the dictionary Encode compresses with (0:
// none).
func (c *Codec) Dictionary() uint32 {
	_, id, _ := c.encoding()
	return id
}

// encoding returns the compressor Encode uses, its dictionary id and the
// dictionary's digest.
func (c *Codec) encoding() (Compressor, uint32, DictDigest) {
	if e := c.dicts.enc.Load(); e != nil {
		return e.comp, e.id, e.digest
	}
	return c.comp, c.dictID, c.dictDigest
}

// decodeWithDictionary decompresses a payload written with dictionary
// h.Dict. Errors match ErrUnknownDictionary (no such dictionary, bytes
// that do not match the id, a compressor without dictionaries) or are the
// decompressor's own.
func (c *Codec) decodeWithDictionary(ctx context.Context, h Header, comp Compressor, dst, payload []byte) ([]byte, error) {
	if h.Compressor != IDZstd && h.Compressor != IDS2Dict {
		return dst, fmt.Errorf("%w: dictionary %d with compressor %s", ErrUnknownDictionary, h.Dict, comp.Name())
	}
	dd, err := c.dicts.get(ctx, h.Dict, h.Fields.DictDigest)
	if err != nil {
		return dst, err
	}
	if h.Compressor == IDS2Dict {
		sd := dd.s2dict()
		if sd == nil {
			return dst, fmt.Errorf("%w %d: not an S2 dictionary", ErrUnknownDictionary, h.Dict)
		}
		return s2DictDecode(sd, dst, payload, h.RawLen)
	}
	dec, err := dd.zstd()
	if err != nil {
		return dst, fmt.Errorf("%w %d: unusable dictionary: %w", ErrUnknownDictionary, h.Dict, err)
	}
	return zstdDecode(dec, dst, payload, h.RawLen)
}

// TrainS2Dictionary builds an S2 dictionary of at most maxSize bytes (0 or
// above 64 KiB: 64 KiB, S2's limit) from sample payloads and returns it
// with its content id, for an S2() Codec's SetDictionary. S2 with a
// dictionary encodes at close to S2's speed and stores less than S2 on
// values that share structure, but more than zstd with a dictionary.
// Samples should be what the Codec compresses, its Serializer's Marshal
// (MsgPack sorts map keys; msgpack.Marshal of a map does not, and a
// dictionary trained on Go's random key order matches less). Strings of
// 8 bytes are what the trainer counts (the dictionary keeps the ones
// values share most).
func TrainS2Dictionary(samples [][]byte, maxSize int) ([]byte, uint32, error) {
	if len(samples) == 0 {
		return nil, 0, errors.New("kura: codec: TrainS2Dictionary: no samples")
	}
	if maxSize <= 0 || maxSize > s2.MaxDictSize {
		maxSize = s2.MaxDictSize
	}
	d, err := dict.BuildS2Dict(samples, dict.Options{MaxDictSize: maxSize, HashBytes: 8})
	if err != nil {
		return nil, 0, fmt.Errorf("kura: codec: TrainS2Dictionary: %w", err)
	}
	return d, DictionaryID(d), nil
}
