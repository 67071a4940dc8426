package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/corpus"
)

// adminUser is the record of the forgery tests: a forged dictionary turns
// its Admin false into true.
type adminUser struct {
	Name  string
	Email string
	Admin bool
	Note  string // after Admin, so that Admin's byte lies inside a dictionary match
}

type forgedPair struct {
	ID     uint32
	Real   []byte
	Forged []byte
}

// loadForgery reads testdata/hostile/forged-dictionary.json: a real
// forgery of the old 28-bit id, found offline.
func loadForgery(t testing.TB) forgedPair {
	t.Helper()
	raw, err := os.ReadFile("../testdata/hostile/forged-dictionary.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ ID, Real, Forged string }
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	id, err := strconv.ParseUint(f.ID, 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	p := forgedPair{ID: uint32(id)}
	if p.Real, err = hex.DecodeString(f.Real); err != nil {
		t.Fatal(err)
	}
	if p.Forged, err = hex.DecodeString(f.Forged); err != nil {
		t.Fatal(err)
	}
	if DictionaryID(p.Real) != p.ID || DictionaryID(p.Forged) != p.ID || bytes.Equal(p.Real, p.Forged) {
		t.Fatalf("testdata forgery is not one: ids %08x %08x, want %08x", DictionaryID(p.Real), DictionaryID(p.Forged), p.ID)
	}
	return p
}

// dictWriter returns a zstd Codec compressing every value with d.
func dictWriter(t testing.TB, d []byte) *Codec {
	t.Helper()
	w := mustNew(t, Options{Compressor: Zstd(3), MinCompressSize: -1, MinSavings: -1})
	if _, err := w.SetDictionary(d); err != nil {
		t.Fatal(err)
	}
	return w
}

// stripDigest rewrites a value entry as a writer from before the digest
// field wrote it: same payload, no TagDictDigest.
func stripDigest(t testing.TB, b []byte) []byte {
	t.Helper()
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	h.Fields.DictDigest = DictDigest{}
	return append(AppendHeader(nil, h), b[h.Len:]...)
}

func TestForgedDictionaryRefused(t *testing.T) {
	p := loadForgery(t)
	w := dictWriter(t, p.Real)
	honest := adminUser{Name: "alice", Email: "alice@example.com", Note: "n"}
	val, h, err := w.Encode(nil, honest)
	if err != nil {
		t.Fatal(err)
	}
	if h.Dict != p.ID || h.Fields.DictDigest != DigestOf(p.Real) {
		t.Fatalf("header %+v: want dictionary %08x with digest %s", h, p.ID, DigestOf(p.Real))
	}
	old := stripDigest(t, val)

	// The attack as it worked before digests: the servers hold the forgery
	// under the real id, and a fresh reader decodes a value without a
	// digest to Admin=true. This is what old values still risk until
	// RequireDictionaryDigest is set.
	forged := &mapSource{dicts: map[uint32][]byte{p.ID: p.Forged}}
	var got adminUser
	if _, err := mustNew(t, Options{DictionarySource: forged}).Decode(old, &got); err != nil || !got.Admin {
		t.Fatalf("the forgery does not forge (%+v, %v): the test proves nothing", got, err)
	}
	if _, err := mustNew(t, Options{DictionarySource: forged, RequireDictionaryDigest: true}).Decode(old, new(adminUser)); !errors.Is(err, ErrDictionaryMismatch) {
		t.Fatalf("RequireDictionaryDigest: Decode(value without digest) = %v, want ErrDictionaryMismatch", err)
	}

	// A value with its digest is refused by a fresh reader.
	got = adminUser{}
	_, err = mustNew(t, Options{DictionarySource: forged}).Decode(val, &got)
	if !errors.Is(err, ErrDictionaryMismatch) || !errors.Is(err, ErrMalformed) || got.Admin {
		t.Fatalf("Decode with the forged dictionary = %+v, %v; want ErrDictionaryMismatch", got, err)
	}
	// A reader given the forgery as its own dictionary refuses too.
	if _, err := mustNew(t, Options{Dictionaries: map[uint32][]byte{p.ID: p.Forged}}).Decode(val, new(adminUser)); !errors.Is(err, ErrDictionaryMismatch) {
		t.Fatalf("static forged dictionary: %v, want ErrDictionaryMismatch", err)
	}

	// A reader that loaded the forgery (for an old value) and then meets
	// values with the digest asks the source again and, once the writer
	// re-published the real dictionary, decodes them honestly.
	src := &mapSource{dicts: map[uint32][]byte{p.ID: p.Forged}}
	r := mustNew(t, Options{DictionarySource: src})
	if _, err := r.Decode(old, new(adminUser)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Decode(val, new(adminUser)); !errors.Is(err, ErrDictionaryMismatch) {
		t.Fatalf("held forgery, source still forged: %v, want ErrDictionaryMismatch", err)
	}
	src.mu.Lock()
	src.dicts[p.ID] = p.Real // the writer re-publishes
	src.mu.Unlock()
	got = adminUser{}
	if _, err := r.Decode(val, &got); err != nil || got != honest {
		t.Fatalf("after re-publishing: %+v, %v; want %+v", got, err, honest)
	}
	// ... and the honest bytes now serve the old value too.
	got = adminUser{}
	if _, err := r.Decode(old, &got); err != nil || got != honest {
		t.Fatalf("old value after re-publishing: %+v, %v", got, err)
	}
}

// TestHeldDictionaryRechecked shows the bound on trusting a held
// dictionary for values without a digest: after DictionaryRecheck the
// reader asks its source again and takes what it now says.
func TestHeldDictionaryRechecked(t *testing.T) {
	p := loadForgery(t)
	val, _, err := dictWriter(t, p.Real).Encode(nil, adminUser{Name: "alice", Email: "alice@example.com", Note: "n"})
	if err != nil {
		t.Fatal(err)
	}
	old := stripDigest(t, val)
	src := &mapSource{dicts: map[uint32][]byte{p.ID: p.Forged}}
	r := mustNew(t, Options{DictionarySource: src, DictionaryRecheck: time.Minute})
	now := time.Unix(1_800_000_000, 0)
	r.dicts.now = func() time.Time { return now }
	var got adminUser
	if _, err := r.Decode(old, &got); err != nil || !got.Admin {
		t.Fatalf("setup: %+v, %v", got, err)
	}
	src.mu.Lock()
	src.dicts[p.ID] = p.Real
	src.mu.Unlock()
	calls := src.calls.Load()
	now = now.Add(59 * time.Second)
	if _, err := r.Decode(old, &got); err != nil || !got.Admin || src.calls.Load() != calls {
		t.Fatalf("within the recheck period: %+v, %v, %d source calls", got, err, src.calls.Load()-calls)
	}
	now = now.Add(2 * time.Second)
	got = adminUser{}
	if _, err := r.Decode(old, &got); err != nil || got.Admin || src.calls.Load() != calls+1 {
		t.Fatalf("after the recheck period: %+v, %v, %d source calls; want the re-published dictionary", got, err, src.calls.Load()-calls)
	}
	// A source that cannot answer a re-check leaves the held bytes in use.
	src.mu.Lock()
	delete(src.dicts, p.ID)
	src.mu.Unlock()
	now = now.Add(2 * time.Minute)
	if _, err := r.Decode(old, &got); err != nil || got.Admin {
		t.Fatalf("re-check unanswered: %+v, %v", got, err)
	}
}

// TestForgeShortID forges a content id the old way, by trying variants
// of a dictionary until the id matches, at a width of 16 bits instead of
// 28 to stay fast (65,536 tries expected instead of 268 million), and
// shows that a reader refuses the forgery for values with a digest.
func TestForgeShortID(t *testing.T) {
	saved := contentIDBits
	contentIDBits = 16
	defer func() { contentIDBits = saved }()

	// The last 8 bytes are the forger's nonce; zstd offsets count from
	// the end of the dictionary, so the forgery keeps the length.
	real := append(bytes.Repeat([]byte("\x83\xa4Name\xa3ivy\xa5Email\xafivy@example.com\xa5Admin\xc2"), 4), make([]byte, 8)...)
	id := DictionaryID(real)
	forged := bytes.ReplaceAll(real, []byte("Admin\xc2"), []byte("Admin\xc3"))
	n := uint64(0)
	for ; DictionaryID(forged) != id; n++ {
		binary.BigEndian.PutUint64(forged[len(forged)-8:], n)
	}
	t.Logf("forged 16-bit id %04x in %d tries", id, n)

	w := dictWriter(t, real)
	val, _, err := w.Encode(nil, adminUser{Name: "ivy", Email: "ivy@example.com", Note: "n"})
	if err != nil {
		t.Fatal(err)
	}
	src := &mapSource{dicts: map[uint32][]byte{id: forged}}
	var got adminUser
	if _, err := mustNew(t, Options{DictionarySource: src}).Decode(stripDigest(t, val), &got); err != nil || !got.Admin {
		t.Fatalf("the short forgery does not forge old values (%+v, %v)", got, err)
	}
	got = adminUser{}
	if _, err := mustNew(t, Options{DictionarySource: src}).Decode(val, &got); !errors.Is(err, ErrDictionaryMismatch) || got.Admin {
		t.Fatalf("Decode = %+v, %v; want ErrDictionaryMismatch", got, err)
	}
}

func TestDictDigestField(t *testing.T) {
	g := DigestOf([]byte("dictionary"))
	b := AppendHeader(nil, Header{Serializer: 1, Compressor: IDZstd, Dict: 7, RawLen: 3, Fields: Fields{DictDigest: g}})
	h, err := ParseHeader(b)
	if err != nil || h.Fields.DictDigest != g {
		t.Fatalf("round trip: %+v, %v", h, err)
	}
	txt, _ := g.MarshalText()
	var back DictDigest
	if err := back.UnmarshalText(txt); err != nil || back != g {
		t.Fatalf("text round trip %q: %v", txt, err)
	}
	for name, field := range map[string]string{
		"short": "060f" + hex.EncodeToString(g[:15]),
		"long":  "0611" + hex.EncodeToString(g[:]) + "00",
		"zeros": "0610" + hex.EncodeToString(make([]byte, 16)),
		"twice": "0610" + hex.EncodeToString(g[:]) + "0610" + hex.EncodeToString(g[:]),
	} {
		fb, _ := hex.DecodeString(field)
		e := append([]byte{Magic0, Magic1, Version, 0, byte(len(fb))}, fb...)
		e = append(e, 1, IDZstd, 7, 3)
		if _, err := ParseHeader(e); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s digest field: %v, want ErrCorrupt", name, err)
		}
	}
}

// BenchmarkDictionaryDigestCost reports what the dictionary digest (18
// bytes a value) costs in stored bytes: the ratio to msgpack+snappy with
// and without it, per corpus, with a 16 KiB dictionary trained on half of
// the corpus and applied to the other half. Run it once:
//
//	go test ./codec -run XXX -bench DictionaryDigestCost -benchtime 1x
func BenchmarkDictionaryDigestCost(b *testing.B) {
	sets := map[string][]any{}
	for _, a := range corpus.Articles(1, 400) {
		sets["articles"] = append(sets["articles"], a)
	}
	reals, _ := corpus.RealCorpora("..")
	for _, r := range reals {
		for _, doc := range r.Values {
			var x any
			if json.Unmarshal(doc, &x) == nil {
				sets[r.Name] = append(sets[r.Name], x)
			}
		}
	}
	for name, vals := range sets {
		if len(vals) < 100 {
			continue
		}
		var samples [][]byte
		for _, v := range vals[:len(vals)/2] {
			s, _ := MsgPack().Marshal(nil, v)
			samples = append(samples, s)
		}
		for _, mode := range []string{"s2", "zstd"} {
			b.Run(name+"/"+mode+"-dict16K", func(b *testing.B) {
				train, opts := TrainS2Dictionary, Options{MinCompressSize: -1}
				if mode == "zstd" {
					train, opts = TrainContentDictionary, Options{Compressor: Zstd(3), MinCompressSize: -1}
				}
				d, _, err := train(samples, 16<<10)
				if err != nil {
					b.Fatal(err)
				}
				c, base := mustNew(b, opts), mustNew(b, Options{})
				if _, err := c.SetDictionary(d); err != nil {
					b.Fatal(err)
				}
				var with, without, baseline int
				for range b.N {
					with, without, baseline = 0, 0, 0
					for _, v := range vals[len(vals)/2:] {
						e, h, _ := c.Encode(nil, v)
						with += len(e)
						without += len(e)
						if h.Dict != 0 {
							without -= 2 + DigestLen
						}
						e, _, _ = base.Encode(nil, v)
						baseline += len(e)
					}
				}
				n := len(vals) - len(vals)/2
				b.ReportMetric(float64(with)/float64(baseline), "ratio-with-digest")
				b.ReportMetric(float64(without)/float64(baseline), "ratio-without")
				b.ReportMetric(float64(with)/float64(n), "B/value")
			})
		}
	}
}
