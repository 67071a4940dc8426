package codec

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kuracache/kura/internal/harness/corpus"
)

// mapSource is a DictionarySource over a map that counts its lookups.
type mapSource struct {
	mu    sync.Mutex
	dicts map[uint32][]byte
	calls atomic.Int64
}

func (m *mapSource) Dictionary(id uint32) ([]byte, error) {
	m.calls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.dicts[id]
	if !ok {
		return nil, fmt.Errorf("%w %d: not published", ErrUnknownDictionary, id)
	}
	return d, nil
}

var trainedDicts sync.Map // seed -> []byte: training is the slow part of these tests

func contentDict(t testing.TB, seed int64) ([]byte, uint32) {
	t.Helper()
	if d, ok := trainedDicts.Load(seed); ok {
		return d.([]byte), DictionaryID(d.([]byte))
	}
	var samples [][]byte
	for _, a := range corpus.Articles(seed, 24) {
		b, err := MsgPack().Marshal(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, b)
	}
	d, id, err := TrainContentDictionary(samples, 8<<10)
	if err != nil {
		t.Fatal(err)
	}
	trainedDicts.Store(seed, d)
	return d, id
}

func TestDictionaryID(t *testing.T) {
	d, id := contentDict(t, 99)
	if id == 0 || id >= 1<<contentIDBits || id != DictionaryID(d) {
		t.Fatalf("id %d, DictionaryID %d", id, DictionaryID(d))
	}
	if err := CheckDictionary(id, d); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(d)
	bad[len(bad)/2] ^= 1
	for name, b := range map[string][]byte{"flipped bit": bad, "truncated": d[:len(d)-1], "empty": nil} {
		err := CheckDictionary(id, b)
		if !errors.Is(err, ErrDictionaryMismatch) || !errors.Is(err, ErrUnknownDictionary) || !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// A reader that never saw a dictionary gets it from its source once, and
// decodes every value written with it; a writer rotates and the reader
// keeps decoding both generations.
func TestDictionarySourceAndRotation(t *testing.T) {
	d1, id1 := contentDict(t, 99)
	d2, id2 := contentDict(t, 98)
	if id1 == id2 {
		t.Fatal("two dictionaries share an id")
	}
	writer := mustNew(t, Options{Compressor: Zstd(3)})
	if got, err := writer.SetDictionary(d1); err != nil || got != id1 {
		t.Fatalf("SetDictionary: %d, %v", got, err)
	}
	arts := corpus.Articles(5, 6)
	var gen1, gen2 [][]byte
	for i := range arts {
		b, h, err := writer.Encode(nil, &arts[i])
		if err != nil || h.Dict != id1 {
			t.Fatalf("encode: dict %d, %v", h.Dict, err)
		}
		gen1 = append(gen1, b)
	}
	if _, err := writer.SetDictionary(d2); err != nil {
		t.Fatal(err)
	}
	if writer.Dictionary() != id2 {
		t.Fatalf("Dictionary() = %d after rotation, want %d", writer.Dictionary(), id2)
	}
	for i := range arts {
		b, h, err := writer.Encode(nil, &arts[i])
		if err != nil || h.Dict != id2 {
			t.Fatalf("encode after rotation: dict %d, %v", h.Dict, err)
		}
		gen2 = append(gen2, b)
	}

	src := &mapSource{dicts: map[uint32][]byte{id1: d1, id2: d2}}
	reader := mustNew(t, Options{DictionarySource: src})
	for _, gen := range [][][]byte{gen1, gen2, gen1} {
		for i, b := range gen {
			var a corpus.Article
			if _, err := reader.Decode(b, &a); err != nil {
				t.Fatal(err)
			}
			if a.ID != arts[i].ID || a.Title != arts[i].Title {
				t.Fatalf("value %d decoded wrong", i)
			}
		}
	}
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("source asked %d times for 2 dictionaries, want 2", n)
	}
	// The writer reads back both generations without any source.
	for _, b := range append(gen1, gen2...) {
		var a corpus.Article
		if _, err := writer.Decode(b, &a); err != nil {
			t.Fatalf("writer decoding its own value: %v", err)
		}
	}
}

func TestDictionaryUnknownAndWrong(t *testing.T) {
	d1, id1 := contentDict(t, 99)
	d2, _ := contentDict(t, 98)
	writer := mustNew(t, Options{Compressor: Zstd(3)})
	if _, err := writer.SetDictionary(d1); err != nil {
		t.Fatal(err)
	}
	a := corpus.NewArticle(3, 1)
	b, _, err := writer.Encode(nil, a)
	if err != nil {
		t.Fatal(err)
	}
	var out corpus.Article
	// No source at all.
	if _, err := mustNew(t, Options{}).Decode(b, &out); !errors.Is(err, ErrUnknownDictionary) {
		t.Fatalf("no source: %v", err)
	}
	// The source does not have it.
	if _, err := mustNew(t, Options{DictionarySource: &mapSource{}}).Decode(b, &out); !errors.Is(err, ErrUnknownDictionary) {
		t.Fatalf("unknown id: %v", err)
	}
	// The source hands back other bytes under the id.
	for name, bad := range map[string][]byte{"other dictionary": d2, "truncated": d1[:len(d1)/2]} {
		src := &mapSource{dicts: map[uint32][]byte{id1: bad}}
		if _, err := mustNew(t, Options{DictionarySource: src}).Decode(b, &out); !errors.Is(err, ErrDictionaryMismatch) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestDictionaryDecoderBound(t *testing.T) {
	src := &mapSource{dicts: map[uint32][]byte{}}
	reader := mustNew(t, Options{DictionarySource: src, MaxDictionaries: 2})
	var values [][]byte
	for seed := int64(90); seed < 94; seed++ {
		d, id := contentDict(t, seed)
		src.dicts[id] = d
		w := mustNew(t, Options{Compressor: Zstd(1)})
		if _, err := w.SetDictionary(d); err != nil {
			t.Fatal(err)
		}
		b, _, err := w.Encode(nil, corpus.NewArticle(seed, 0))
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, b)
	}
	for round := 0; round < 2; round++ {
		for _, b := range values {
			var a corpus.Article
			if _, err := reader.Decode(b, &a); err != nil {
				t.Fatal(err)
			}
			if n := len(reader.dicts.held()); n > 2 {
				t.Fatalf("%d dictionaries held, bound is 2", n)
			}
		}
	}
	if n := src.calls.Load(); n != 8 {
		t.Fatalf("%d lookups cycling 4 dictionaries through 2 slots twice, want 8", n)
	}
}

func s2Dict(t testing.TB, seed int64) ([]byte, uint32) {
	t.Helper()
	var samples [][]byte
	for _, a := range corpus.Articles(seed, 24) {
		b, err := MsgPack().Marshal(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, b)
	}
	d, id, err := TrainS2Dictionary(samples, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	return d, id
}

// S2 with a dictionary: its own compressor id, smaller than S2 alone on
// values like the training ones, and found through the source by readers.
func TestS2Dictionary(t *testing.T) {
	d, id := s2Dict(t, 99)
	plain := mustNew(t, Options{})
	w := mustNew(t, Options{})
	if got, err := w.SetDictionary(d); err != nil || got != id {
		t.Fatalf("SetDictionary: %d, %v", got, err)
	}
	src := &mapSource{dicts: map[uint32][]byte{id: d}}
	r := mustNew(t, Options{DictionarySource: src})
	var withDict, without int
	for _, a := range corpus.Articles(6, 8) {
		b, h, err := w.Encode(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		if h.Compressor != IDS2Dict || h.Dict != id {
			t.Fatalf("header %+v, want compressor %d with dictionary %d", h, IDS2Dict, id)
		}
		p, _, err := plain.Encode(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		withDict, without = withDict+len(b), without+len(p)
		var out corpus.Article
		if _, err := r.Decode(b, &out); err != nil || out.Title != a.Title {
			t.Fatalf("decode: %v", err)
		}
		// A reader without the dictionary misses; so does one whose
		// source has a zstd dictionary under the id.
		if _, err := plain.Decode(b, &out); !errors.Is(err, ErrUnknownDictionary) {
			t.Fatalf("reader without the dictionary: %v", err)
		}
	}
	if withDict >= without {
		t.Fatalf("S2 with a dictionary stored %d bytes, S2 alone %d", withDict, without)
	}
	zd, _ := contentDict(t, 99)
	if _, err := mustNew(t, Options{}).SetDictionary(zd); err == nil {
		t.Fatal("S2 accepted a zstd-format dictionary")
	}
}

// FuzzDictionaryDecode decodes arbitrary bytes with a reader whose source
// holds the right dictionary, a truncated one, or another one: never a
// panic, every error matches ErrMalformed (or ErrNotUnderstood).
func FuzzDictionaryDecode(f *testing.F) {
	d1, id1 := contentDict(f, 99)
	d2, _ := contentDict(f, 98)
	var samples [][]byte
	for _, a := range corpus.Articles(97, 24) {
		b, err := MsgPack().Marshal(nil, a)
		if err != nil {
			f.Fatal(err)
		}
		samples = append(samples, b)
	}
	// Another dictionary that claims id1 in its zstd header, trusted as
	// configured: the decoder meets bytes made for another dictionary.
	wrong, err := TrainDictionary(samples, id1, 8<<10)
	if err != nil {
		f.Fatal(err)
	}
	writer := mustNew(f, Options{Compressor: Zstd(3)})
	if _, err := writer.SetDictionary(d1); err != nil {
		f.Fatal(err)
	}
	sd, sid := s2Dict(f, 99)
	s2w := mustNew(f, Options{})
	if _, err := s2w.SetDictionary(sd); err != nil {
		f.Fatal(err)
	}
	for i, a := range corpus.Articles(4, 3) {
		for _, w := range []*Codec{writer, s2w} {
			b, _, err := w.Encode(nil, a)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, byte(i))
			f.Add(b[:len(b)/2], byte(i+4))
		}
	}
	readers := []*Codec{
		mustNew(f, Options{DictionarySource: &mapSource{dicts: map[uint32][]byte{id1: d1}}, MaxDecodedSize: 1 << 20}),
		mustNew(f, Options{DictionarySource: &mapSource{dicts: map[uint32][]byte{id1: d1[:len(d1)-100]}}}),
		mustNew(f, Options{DictionarySource: &mapSource{dicts: map[uint32][]byte{id1: d2}}}),
		mustNew(f, Options{Dictionaries: map[uint32][]byte{id1: wrong}}),
		mustNew(f, Options{DictionarySource: &mapSource{dicts: map[uint32][]byte{sid: sd}}}),
		mustNew(f, Options{DictionarySource: &mapSource{dicts: map[uint32][]byte{sid: d1}}}),
		mustNew(f, Options{DictionarySource: &mapSource{dicts: map[uint32][]byte{sid: sd[:len(sd)/3]}}}),
	}
	f.Fuzz(func(t *testing.T, data []byte, which byte) {
		r := readers[int(which)%len(readers)]
		var a corpus.Article
		if _, err := r.Decode(data, &a); err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNotUnderstood) {
			t.Fatalf("error does not match ErrMalformed: %v", err)
		}
	})
}
