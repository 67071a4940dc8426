package codec

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Content-addressed dictionaries.
//
// A dictionary that travels (published to the cache, shipped to readers
// that never saw it) is named by its content: its id is 28 bits of the
// SHA-256 of its bytes, so the bytes behind an id can never silently
// change, and every reader checks the bytes it loads against the id it
// looked them up by. 28 bits keep the id at 4 bytes of uvarint in every
// envelope header (a 32-bit id would cost 5); two dictionaries of one
// deployment collide with a probability of about n²/2^29 (2e-7 for ten),
// and a collision is caught when the second is published, because the
// key is taken by bytes of another content.
//
// Trained dictionaries are in the zstd dictionary format with the zstd
// dictionary id 1 embedded: zstd frames carry that id in their own header,
// and 1 costs one byte there where the 28-bit id would cost four. The kura
// id in the envelope is the one that names the dictionary; the embedded
// id only has to be non-zero.

// ErrDictionaryMismatch reports dictionary bytes whose content does not
// hash to the id they were looked up by: a corrupted or substituted
// dictionary. It matches ErrUnknownDictionary (and so ErrMalformed): the
// value that needs it is a miss.
var ErrDictionaryMismatch = fmt.Errorf("%w: dictionary content does not match its id", ErrUnknownDictionary)

// contentIDBits is the width of content-derived dictionary ids.
const contentIDBits = 28

// embeddedZstdID is the zstd dictionary id written into trained
// dictionaries (see above).
const embeddedZstdID = 1

// DictionaryID returns the content-derived id of a dictionary: the first
// 28 bits of the SHA-256 of d, never 0. It is the id TrainS2Dictionary,
// TrainContentDictionary and the dictstore package use.
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
	d, err := dict.BuildZstdDict(samples, dict.Options{
		MaxDictSize: maxSize,
		HashBytes:   6,
		ZstdDictID:  embeddedZstdID,
		ZstdLevel:   zstd.SpeedDefault,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("kura: codec: TrainContentDictionary: %w", err)
	}
	return d, DictionaryID(d), nil
}

// DictionarySource finds dictionaries a Codec meets in values but does not
// hold in Options.Dictionaries: a reader that starts after a writer
// published a new dictionary looks it up here once, by id.
//
// Dictionary must return the bytes whose DictionaryID is id, or an error
// (matching ErrUnknownDictionary when the id is simply not found). It is
// called on the decode path of the first value that uses an id, so it
// must bound its own wait and remember failures for a while; the Codec
// calls it again for every value until it succeeds. The Codec checks the
// bytes against id before using them. Implementations must be safe for
// concurrent use. dictstore.Registry is one.
type DictionarySource interface {
	Dictionary(id uint32) ([]byte, error)
}

// DefaultMaxDictionaries is the number of dictionaries a Codec keeps ready
// for decoding when Options.MaxDictionaries is 0.
const DefaultMaxDictionaries = 16

// dictionaries holds a Codec's dictionaries by id, with their decoders
// built on first use (a zstd decoder, or an S2 dictionary, as the values
// need), and the dictionary Encode uses. Dictionaries from
// Options.Dictionaries and SetDictionary stay for the Codec's life; those
// from the DictionarySource are kept up to MaxDictionaries, least
// recently used out first.
type dictionaries struct {
	source DictionarySource
	max    int

	mu      sync.Mutex
	decs    map[uint32]*dictDecoder
	clock   uint64
	dynamic int

	// enc is the dictionary Encode compresses with, set by
	// Codec.SetDictionary; nil means Options.Dictionary (or none).
	enc atomic.Pointer[dictEncoding]
}

type dictDecoder struct {
	id     uint32
	d      []byte
	pinned bool
	used   uint64

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
	id   uint32
	comp Compressor
}

func newDictionaries(static map[uint32][]byte, source DictionarySource, max int) (*dictionaries, error) {
	if max <= 0 {
		max = DefaultMaxDictionaries
	}
	ds := &dictionaries{source: source, max: max, decs: make(map[uint32]*dictDecoder, len(static))}
	for id, d := range static {
		dd := &dictDecoder{id: id, d: d, pinned: true}
		if isZstdDict(d) {
			if _, err := dd.zstd(); err != nil {
				return nil, fmt.Errorf("dictionary %d: %w", id, err)
			}
		}
		ds.decs[id] = dd
	}
	return ds, nil
}

// get returns dictionary id, loading it from the source when it is not
// held.
func (ds *dictionaries) get(id uint32) (*dictDecoder, error) {
	ds.mu.Lock()
	if dd, ok := ds.decs[id]; ok {
		ds.clock++
		dd.used = ds.clock
		ds.mu.Unlock()
		return dd, nil
	}
	ds.mu.Unlock()
	if ds.source == nil {
		return nil, fmt.Errorf("%w %d (add it to Options.Dictionaries or set Options.DictionarySource)", ErrUnknownDictionary, id)
	}
	d, err := ds.source.Dictionary(id)
	if err != nil {
		if errors.Is(err, ErrUnknownDictionary) {
			return nil, err
		}
		return nil, fmt.Errorf("%w %d: %w", ErrUnknownDictionary, id, err)
	}
	if err := CheckDictionary(id, d); err != nil {
		return nil, err
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if dd, ok := ds.decs[id]; ok {
		// Another goroutine loaded it meanwhile; use one decoder.
		return dd, nil
	}
	ds.clock++
	dd := &dictDecoder{id: id, d: d, used: ds.clock}
	ds.decs[id] = dd
	ds.dynamic++
	for ds.dynamic > ds.max {
		ds.evictOldest()
	}
	return dd, nil
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
	if dd, ok := ds.decs[id]; ok {
		if !dd.pinned {
			dd.pinned = true
			ds.dynamic--
		}
		return
	}
	ds.decs[id] = &dictDecoder{id: id, d: d, pinned: true}
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
		return &s2DictCompressor{better: z.better, id: id, dict: sd}, nil
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
	c.dicts.enc.Store(&dictEncoding{id: id, comp: comp})
	return id, nil
}

// Dictionary returns the id of the dictionary Encode compresses with (0:
// none).
func (c *Codec) Dictionary() uint32 {
	_, id := c.encoding()
	return id
}

// encoding returns the compressor Encode uses and its dictionary id.
func (c *Codec) encoding() (Compressor, uint32) {
	if e := c.dicts.enc.Load(); e != nil {
		return e.comp, e.id
	}
	return c.comp, c.dictID
}

// decodeWithDictionary decompresses a payload written with dictionary
// h.Dict. Errors match ErrUnknownDictionary (no such dictionary, bytes
// that do not match the id, a compressor without dictionaries) or are the
// decompressor's own.
func (c *Codec) decodeWithDictionary(h Header, comp Compressor, dst, payload []byte) ([]byte, error) {
	if h.Compressor != IDZstd && h.Compressor != IDS2Dict {
		return dst, fmt.Errorf("%w: dictionary %d with compressor %s", ErrUnknownDictionary, h.Dict, comp.Name())
	}
	dd, err := c.dicts.get(h.Dict)
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
func TrainS2Dictionary(samples [][]byte, maxSize int) ([]byte, uint32, error) {
	if len(samples) == 0 {
		return nil, 0, errors.New("kura: codec: TrainS2Dictionary: no samples")
	}
	if maxSize <= 0 || maxSize > s2.MaxDictSize {
		maxSize = s2.MaxDictSize
	}
	d, err := dict.BuildS2Dict(samples, dict.Options{MaxDictSize: maxSize, HashBytes: 6})
	if err != nil {
		return nil, 0, fmt.Errorf("kura: codec: TrainS2Dictionary: %w", err)
	}
	return d, DictionaryID(d), nil
}
