package codec

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzDecode feeds arbitrary bytes to Decode: it must never panic, and
// every failure must match ErrMalformed or (an entry from a newer writer)
// ErrNotUnderstood, never both. A re-encoded header of what parsed must
// parse to the same header. The seed corpus in
// testdata/fuzz/FuzzDecode (valid envelopes of every kind, foreign
// formats, truncations, bombs) runs with plain `go test`.
func FuzzDecode(f *testing.F) {
	c, err := New(Options{MaxDecodedSize: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{})
	f.Add([]byte("plain string"))
	f.Add(c.EncodeNegative(nil))
	f.Add([]byte{Magic0, Magic1, Version1 | FlagNegative})
	full := Fields{Schema: 0xdeadbeef, HasSchema: true, Written: time.UnixMilli(1795000000123).UTC(), TTL: time.Minute, Cost: 3 * time.Millisecond, Token: "tok"}
	for _, k := range []Kind{KindNegative, KindLease, KindTombstone, 9} {
		f.Add(AppendEntry(nil, k, full))
	}
	if b, _, err := c.Encode(nil, map[string]any{"k": strings.Repeat("v", 300)}); err == nil {
		f.Add(b)
	}
	if b, _, err := c.EncodeWith(nil, map[string]any{"k": "v"}, full); err == nil {
		f.Add(b)
	}
	cc, err := New(Options{MaxDecodedSize: 1 << 20, Compact: true})
	if err != nil {
		f.Fatal(err)
	}
	type rec struct {
		ID   int
		Name string
		Qty  int
	}
	for _, v := range []any{"user:42 logged in", rec{42, "apple", 3}, map[string]any{"k": strings.Repeat("v", 300)}, []byte{1, 2}, 7} {
		if b, _, err := cc.EncodeWith(nil, v, full); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		for _, dst := range []any{new(any), new(string), new(map[string]any), new([]byte)} {
			h, err := c.Decode(data, dst)
			if err != nil && errors.Is(err, ErrMalformed) == errors.Is(err, ErrNotUnderstood) {
				t.Fatalf("error must match exactly one of ErrMalformed and ErrNotUnderstood: %v", err)
			}
			if err == nil && h.Len > len(data) {
				t.Fatalf("header length %d > %d", h.Len, len(data))
			}
		}
		h, err := ParseHeader(data)
		if err != nil && errors.Is(err, ErrMalformed) == errors.Is(err, ErrNotUnderstood) {
			t.Fatalf("ParseHeader error must match exactly one sentinel: %v", err)
		}
		if err == nil {
			// What parsed re-encodes to a header that parses the same
			// (unknown non-critical fields are dropped, nothing else).
			again := AppendHeader(nil, h)
			if h.Kind == KindValue {
				again = append(again, data[h.Len:]...)
			}
			h2, err := ParseHeader(again)
			h2.Len, h.Len = 0, 0
			if err != nil || h2 != h {
				t.Fatalf("re-encoded header %+v, %v; parsed %+v", h2, err, h)
			}
		}
		if !bytes.Equal(orig, data) {
			t.Fatal("Decode modified its input")
		}
	})
}

// FuzzRoundTrip checks that every serializer/compressor pair decodes what
// it encodes, at every compression threshold.
func FuzzRoundTrip(f *testing.F) {
	f.Add("hello", byte(0), byte(0), int16(0))
	f.Add(strings.Repeat("金利 rates ", 50), byte(1), byte(1), int16(-1))
	f.Add(strings.Repeat("ab", 500), byte(2), byte(2), int16(100))
	f.Add("", byte(0), byte(3), int16(-1))
	f.Add("user:42 logged in", byte(0x80), byte(0), int16(0))
	f.Add(strings.Repeat("金利 rates ", 50), byte(0x80), byte(4), int16(-1))
	f.Add("\xff invalid", byte(0x80), byte(1), int16(0))
	sers := []Serializer{MsgPack(), JSON(), Raw()}
	comps := []Compressor{None(), S2Better(), S2(), Zstd(1), Zstd(3)}
	codecs := map[[3]int]*Codec{}
	f.Fuzz(func(t *testing.T, s string, si, ci byte, minSize int16) {
		// Bit 7 of si: the compact envelope (version 3).
		key := [3]int{int(si&0x7f) % len(sers), int(ci) % len(comps), int(si >> 7)}
		c, ok := codecs[key]
		if !ok || minSize != 0 {
			var err error
			c, err = New(Options{Serializer: sers[key[0]], Compressor: comps[key[1]], MinCompressSize: int(minSize), MinSavings: -1, Compact: key[2] == 1})
			if err != nil {
				t.Fatal(err)
			}
			if minSize == 0 {
				codecs[key] = c
			}
		}
		b, h, err := c.Encode(nil, s)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		var out string
		h2, err := c.Decode(b, &out)
		if err != nil {
			t.Fatalf("decode: %v (header %+v)", err, h)
		}
		if h2 != h {
			t.Fatalf("header %+v, decoded %+v", h, h2)
		}
		if key[0] != 1 && out != s { // JSON replaces invalid UTF-8
			t.Fatalf("round trip %q -> %q", s, out)
		}
	})
}
