package readthrough

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// entry is a decoded cached value.
type entry[V any] struct {
	v V
	// due (the envelope's write time plus its TTL, in Unix nanoseconds;
	// 0 when either is absent) and cost (the load's) are what early
	// refresh needs of the envelope's fields.
	due    int64
	cost   time.Duration
	rawLen int
	// (the flags last, together: FetchMany holds an entry per key)
	negative bool
	// keep marks an entry written for another type, too recently to
	// overwrite (Config.SchemaGrace): a read-through does not fill it.
	keep bool
}

// ErrMiss marks a plain miss of one key in a batch read.
var ErrMiss = fmt.Errorf("miss: %w", store.ErrNotFound)

// errNoValue is the miss of an entry that holds no value (a lease
// placeholder or a tombstone).
var errNoValue = fmt.Errorf("no value: %w", store.ErrNotFound)

// Encode serialises v with the envelope fields f (the schema fingerprint
// and the write time are always set) and enforces the size guards. It
// never logs or returns the value itself.
func (p *Pipeline[V]) Encode(key string, v V, f codec.Fields) ([]byte, error) {
	return p.ent.encode(nil, key, v, f)
}

// EncodeTo is Encode appending to buf: the result is the bytes it added,
// capped so that a store appending to them cannot reach the next value.
// They stay valid until buf is put back (PutEncBuf).
func (p *Pipeline[V]) EncodeTo(buf *EncBuf, key string, v V, f codec.Fields) ([]byte, error) {
	start := len(buf.b)
	b, err := p.ent.encode(buf.b, key, v, f)
	if err != nil {
		return nil, err
	}
	buf.b = b
	return b[start:len(b):len(b)], nil
}

// encode is Encode appending to dst; on error it returns dst as it was.
func (p entryStep[V]) encode(dst []byte, key string, v V, f codec.Fields) ([]byte, error) {
	f.Schema, f.HasSchema = p.cfg.Schema, true
	if f.Written.IsZero() {
		f.Written = time.Now()
	}
	start := len(dst)
	b, h, err := p.cfg.Codec.EncodeWith(dst, v, f)
	if err != nil {
		if errors.Is(err, codec.ErrValueTooLarge) {
			p.st.Rejected.Add(1)
			return dst[:start], fmt.Errorf("%w: key %q: %w", store.ErrValueTooLarge, key, err)
		}
		return dst[:start], fmt.Errorf("kura: encode %q: %w", key, err)
	}
	n := len(b) - start
	if err := p.ent.checkSize(key, n); err != nil {
		return b[:start], err
	}
	p.st.BytesW.Add(uint64(n))
	p.st.BytesWRaw.Add(uint64(h.RawLen))
	p.st.addDict(h.Dict, n)
	return b, nil
}

// EncBuf is a pooled encode buffer. Every store copies a value, or has
// written it out, before its Set, SetMany or Fill returns (the store
// contract, checked on every backend by storetest's CopiesValues), so the
// buffer of a write goes back to the pool as soon as the write returned,
// and a miss or a Set allocates no encode buffer of its own.
type EncBuf struct{ b []byte }

var encBufs = sync.Pool{New: func() any { return new(EncBuf) }}

// maxPooledBuf is the largest buffer kept for reuse: a larger one (a
// batch of large values) is left to the garbage collector, so the pool
// does not hold its memory.
const maxPooledBuf = 256 << 10

// GetEncBuf returns an empty buffer from the pool.
func GetEncBuf() *EncBuf { return encBufs.Get().(*EncBuf) }

// PutEncBuf returns buf to the pool. Call it only once every store call
// that carried its bytes has returned.
func PutEncBuf(buf *EncBuf) {
	if cap(buf.b) > maxPooledBuf {
		buf.b = nil
	}
	buf.b = buf.b[:0]
	encBufs.Put(buf)
}

func (p entryStep[V]) checkSize(key string, n int) error {
	if p.cfg.MaxValueSize > 0 && n > p.cfg.MaxValueSize {
		p.st.Rejected.Add(1)
		return fmt.Errorf("%w: key %q encodes to %d bytes, over the limit of %d (Options.MaxValueSize or the server's item size limit); split the value or raise the limit",
			store.ErrValueTooLarge, key, n, p.cfg.MaxValueSize)
	}
	if p.cfg.WarnValueSize > 0 && n > p.cfg.WarnValueSize {
		p.st.Large.Add(1)
		if p.cfg.OnLargeValue != nil {
			p.cfg.OnLargeValue(key, n)
		}
	}
	return nil
}

func (p entryStep[V]) encodeNegative(buf *EncBuf) []byte {
	start := len(buf.b)
	buf.b = p.cfg.Codec.EncodeNegative(buf.b)
	p.st.BytesW.Add(uint64(len(buf.b) - start))
	return buf.b[start:len(buf.b):len(buf.b)]
}

// decode decodes data, the bytes stored under key. owned says the read
// gave data away (its buffer is used for nothing else): a V of type []byte
// may then be a slice of it rather than a copy.
//
// The bytes read are counted in t (nil: in the Counters at once).
func (p entryStep[V]) decode(ctx context.Context, key string, data []byte, owned bool, t *tally) (entry[V], error) {
	var e entry[V]
	var h codec.Header
	var err error
	if bp, ok := any(&e.v).(*[]byte); ok && owned {
		*bp, h, err = p.cfg.Codec.DecodeBytesOwned(ctx, data, p.cfg.Schema)
	} else {
		v := new(V) // what the decoder fills escapes; e need not
		h, err = p.cfg.Codec.DecodeSchemaContext(ctx, data, v, p.cfg.Schema)
		e.v = *v
	}
	if err != nil {
		if errors.Is(err, codec.ErrSchemaMismatch) {
			p.st.SchemaMismatches.Add(1)
			e.keep = p.ent.tooYoungToOverwrite(h)
		} else {
			p.st.DecodeErrs.Add(1)
		}
		return e, fmt.Errorf("kura: decode %q (%d bytes): %w", key, len(data), err)
	}
	if t != nil {
		t.bytesR += uint64(len(data))
		t.bytesRRaw += uint64(h.RawLen)
	} else {
		p.st.BytesR.Add(uint64(len(data)))
		p.st.BytesRRaw.Add(uint64(h.RawLen))
	}
	e.rawLen, e.cost = h.RawLen, h.Fields.Cost
	if f := &h.Fields; !f.Written.IsZero() && f.TTL > 0 {
		e.due = f.Written.Add(f.TTL).UnixNano()
	}
	switch h.Kind {
	case codec.KindValue:
	case codec.KindNegative:
		e.negative = true
	default:
		// A lease placeholder or a tombstone holds no value: a miss.
		return e, fmt.Errorf("kura: %q holds a %s entry: %w", key, h.Kind, errNoValue)
	}
	return e, nil
}

// tooYoungToOverwrite reports whether an entry of another type (h is its
// header) was written less than Config.SchemaGrace ago. A write time
// further in the future than the grace is not believed (a skewed clock or
// a hostile value must not pin a key).
func (p entryStep[V]) tooYoungToOverwrite(h codec.Header) bool {
	written := h.Fields.Written
	if written.IsZero() || p.cfg.SchemaGrace < 0 {
		return false
	}
	age := time.Since(written)
	return age < p.cfg.SchemaGrace && age > -p.cfg.SchemaGrace
}

// found decodes bytes the store returned for key and counts the result: a
// hit, a negative hit, or (bytes that do not decode, a placeholder) a miss.
// ctx bounds the decode's dictionary lookup (a value whose dictionary the
// Codec does not hold yet): a Fetch passes its store budget's context, so
// a slow DictionarySource costs no more than a slow store. owned says the
// read gave data away (see decode). A batch counts in t and adds it to
// the Counters once (nil: each key at once).
func (p entryStep[V]) found(ctx context.Context, key string, data []byte, owned bool, t *tally) (entry[V], error) {
	var one tally
	if t == nil {
		t = &one
		defer one.addTo(p.st)
	}
	if codec.IsPlaceholder(data) {
		t.misses++
		return entry[V]{}, ErrMiss
	}
	e, err := p.ent.decode(ctx, key, data, owned, t)
	switch {
	case err != nil:
		t.misses++
	case e.negative:
		t.negHits++
	default:
		t.hits++
	}
	return e, err
}

// tally is what the lookups of a batch found, added to the Counters once
// for the batch rather than with atomic adds per key.
type tally struct{ hits, negHits, misses, bytesR, bytesRRaw uint64 }

func (t *tally) addTo(st *Counters) {
	for _, c := range [...]struct {
		n  uint64
		to *atomic.Uint64
	}{{t.hits, &st.Hits}, {t.negHits, &st.NegHits}, {t.misses, &st.Misses}, {t.bytesR, &st.BytesR}, {t.bytesRRaw, &st.BytesRRaw}} {
		if c.n != 0 {
			c.to.Add(c.n)
		}
	}
}

// owned reports whether a read with track (see get) gives its bytes away:
// a tracked read may hand out bytes its client caches and hands out again
// (rueidis's client-side cache); store.Store's Get, BatchGetter's GetMany
// and Leaser's LeaseGet give theirs to the caller.
func (p l1Step[V]) owned(track bool) bool { return !track || p.tracker == nil }

// entryStep is the envelope of one value: encode, decode and their counts: methods over the pipeline's state.
type entryStep[V any] struct{ *Pipeline[V] }
