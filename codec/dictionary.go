package codec

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/dict"
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
// 28 bits of the SHA-256 of d, never 0. It is the id SealedDictionary,
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

// dictionaries holds a Codec's decoders, one per dictionary id, and the
// dictionary Encode uses. Dictionaries from Options.Dictionaries stay for
// the Codec's life; those from the DictionarySource are kept up to
// MaxDictionaries, least recently used out first.
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
	dec    *zstd.Decoder
	pinned bool
	used   uint64
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
		dec, err := newDictZstdDecoder(id, d)
		if err != nil {
			return nil, fmt.Errorf("dictionary %d: %w", id, err)
		}
		ds.decs[id] = &dictDecoder{dec: dec, pinned: true}
	}
	return ds, nil
}

// newDictZstdDecoder returns a decoder that knows one dictionary. Each
// dictionary gets its own decoder so that dictionaries can be added while
// the Codec runs (a zstd.Decoder's dictionaries are fixed when it is made).
func newDictZstdDecoder(id uint32, d []byte) (*zstd.Decoder, error) {
	opts := []zstd.DOption{
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderLowmem(false),
	}
	if isZstdDict(d) {
		opts = append(opts, zstd.WithDecoderDicts(d))
	} else {
		// A raw (content-only) dictionary is registered under zstd id
		// 0, as frames written with it carry none, and under its own id
		// for frames from writers that named it.
		opts = append(opts, zstd.WithDecoderDictRaw(0, d), zstd.WithDecoderDictRaw(id, d))
	}
	return zstd.NewReader(nil, opts...)
}

// decoder returns the decoder for dictionary id, loading the dictionary
// from the source when it is not held.
func (ds *dictionaries) decoder(id uint32) (*zstd.Decoder, error) {
	ds.mu.Lock()
	if dd, ok := ds.decs[id]; ok {
		ds.clock++
		dd.used = ds.clock
		ds.mu.Unlock()
		return dd.dec, nil
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
	dec, err := newDictZstdDecoder(id, d)
	if err != nil {
		return nil, fmt.Errorf("%w %d: unusable dictionary: %w", ErrUnknownDictionary, id, err)
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if dd, ok := ds.decs[id]; ok {
		// Another goroutine loaded it meanwhile; use one decoder.
		return dd.dec, nil
	}
	ds.clock++
	ds.decs[id] = &dictDecoder{dec: dec, used: ds.clock}
	ds.dynamic++
	for ds.dynamic > ds.max {
		ds.evictOldest()
	}
	return dec, nil
}

// evictOldest drops the least recently used dynamic decoder. It is not
// closed: a goroutine may still be decoding with it, and a decoder used
// only through DecodeAll holds no goroutines, so the collector frees it.
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

// add makes dictionary d (already checked) available for decoding, pinned.
func (ds *dictionaries) add(id uint32, d []byte) error {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if dd, ok := ds.decs[id]; ok {
		if !dd.pinned {
			dd.pinned = true
			ds.dynamic--
		}
		return nil
	}
	dec, err := newDictZstdDecoder(id, d)
	if err != nil {
		return err
	}
	ds.decs[id] = &dictDecoder{dec: dec, pinned: true}
	return nil
}

// SetDictionary makes Encode compress with dictionary d from now on (the
// rotation of a writer), and returns d's content id. Values written
// before keep their old id in their header and decode as long as this
// Codec (or any reader) can find the old dictionary; this Codec keeps
// every dictionary it encoded with. The Codec's compressor must be Zstd.
// It is safe to call while other goroutines encode and decode.
func (c *Codec) SetDictionary(d []byte) (uint32, error) {
	if len(d) == 0 {
		return 0, errors.New("kura: codec: SetDictionary: empty dictionary")
	}
	z, ok := c.comp.(*zstdCompressor)
	if !ok {
		return 0, fmt.Errorf("kura: codec: SetDictionary: compressor %q does not support dictionaries; use Zstd", c.comp.Name())
	}
	id := DictionaryID(d)
	nz := &zstdCompressor{level: z.level, zlevel: z.zlevel, dictID: id, dict: d}
	if _, err := nz.encoder(); err != nil {
		return 0, fmt.Errorf("kura: codec: SetDictionary: %w", err)
	}
	if err := c.dicts.add(id, d); err != nil {
		return 0, fmt.Errorf("kura: codec: SetDictionary: %w", err)
	}
	c.dicts.enc.Store(&dictEncoding{id: id, comp: nz})
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
// h.Dict. Errors match ErrUnknownDictionary (no such dictionary, or bytes
// that do not match the id) or are the decoder's own.
func (c *Codec) decodeWithDictionary(h Header, comp Compressor, dst, payload []byte) ([]byte, error) {
	if h.Compressor != IDZstd {
		return dst, fmt.Errorf("%w: dictionary %d with compressor %s", ErrUnknownDictionary, h.Dict, comp.Name())
	}
	dec, err := c.dicts.decoder(h.Dict)
	if err != nil {
		return dst, err
	}
	return zstdDecode(dec, dst, payload, h.RawLen)
}
