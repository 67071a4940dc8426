package codec

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// ownedSeeds are []byte values stored every way DecodeBytesOwned meets
// them: bin8/16/32, empty, nil, compressed, under the compact envelope.
func ownedSeeds(t testing.TB) (*Codec, uint32, [][]byte) {
	c, err := New(Options{MaxDecodedSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	schema := c.Fingerprint(reflect.TypeFor[[]byte]())
	f := Fields{Schema: schema, HasSchema: true}
	var out [][]byte
	for _, v := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte{7}, 200), bytes.Repeat([]byte("ab"), 40000), []byte(strings.Repeat("compressible ", 100))} {
		b, _, err := c.EncodeWith(nil, v, f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	cc, err := New(Options{MaxDecodedSize: 1 << 20, Compact: true})
	if err != nil {
		t.Fatal(err)
	}
	if b, _, err := cc.EncodeWith(nil, []byte("compact"), f); err == nil {
		out = append(out, b)
	}
	// A msgpack str where a bin is expected, and a bin followed by a byte
	// too many: msgpack decodes the first into a []byte and ignores the
	// extra byte of the second; the owned path must agree.
	for _, payload := range [][]byte{{0xa3, 'a', 'b', 'c'}, {0xc4, 1, 'z', 0xc0}, {0xc5, 0, 2, 1, 2}, {0xc4, 5, 1}} {
		h := Header{Serializer: IDMsgPack, RawLen: len(payload), Fields: f}
		out = append(out, append(AppendHeader(nil, h), payload...))
	}
	return c, schema, out
}

// TestDecodeBytesOwned: DecodeBytesOwned returns what DecodeSchemaContext
// decodes into a []byte, for every way a value is stored, and a slice of
// the input (capacity ending with the value) only where the payload is
// stored as is.
func TestDecodeBytesOwned(t *testing.T) {
	c, schema, seeds := ownedSeeds(t)
	aliased := 0
	for i, data := range seeds {
		var want []byte
		wh, werr := c.DecodeSchemaContext(context.Background(), data, &want, schema)
		got, gh, gerr := c.DecodeBytesOwned(context.Background(), bytes.Clone(data), schema)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) || (got == nil) != (want == nil) || wh != gh {
			t.Fatalf("seed %d: owned %q %+v %v; copied %q %+v %v", i, got, gh, gerr, want, wh, werr)
		}
		own, _, _ := c.DecodeBytesOwned(context.Background(), data, schema)
		if len(own) > 0 && len(own) <= len(data) && &own[0] == &data[len(data)-len(own)] {
			aliased++
			if cap(own) != len(own) {
				t.Fatalf("seed %d: an aliased value has capacity %d past its %d bytes", i, cap(own), len(own))
			}
		}
	}
	if aliased < 3 {
		t.Fatalf("only %d seeds decoded without a copy", aliased)
	}
	// Another schema goes the strict way, as with DecodeSchemaContext.
	_, _, err := c.DecodeBytesOwned(context.Background(), seeds[3], schema+1)
	if _, werr := c.DecodeSchemaContext(context.Background(), seeds[3], new([]byte), schema+1); (err == nil) != (werr == nil) {
		t.Fatalf("another schema: owned %v, copied %v", err, werr)
	}
}

// TestDecodeBytesOwnedAllocs: the owned decode of an uncompressed []byte
// allocates nothing.
func TestDecodeBytesOwnedAllocs(t *testing.T) {
	c, schema, seeds := ownedSeeds(t)
	data := seeds[3]
	n := testing.AllocsPerRun(100, func() {
		if _, _, err := c.DecodeBytesOwned(context.Background(), data, schema); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per owned decode, want 0", n)
	}
}

// FuzzDecodeBytesOwned: on any bytes, DecodeBytesOwned never panics and
// agrees with DecodeSchemaContext into a []byte (value, header, and
// whether and how it fails).
func FuzzDecodeBytesOwned(f *testing.F) {
	c, schema, seeds := ownedSeeds(f)
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want []byte
		wh, werr := c.DecodeSchemaContext(context.Background(), data, &want, schema)
		got, gh, gerr := c.DecodeBytesOwned(context.Background(), bytes.Clone(data), schema)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) || wh != gh {
			t.Fatalf("owned %q %+v %v; copied %q %+v %v", got, gh, gerr, want, wh, werr)
		}
		if werr != nil && (errors.Is(werr, ErrMalformed) != errors.Is(gerr, ErrMalformed) || errors.Is(werr, ErrNotUnderstood) != errors.Is(gerr, ErrNotUnderstood)) {
			t.Fatalf("owned error %v, copied %v", gerr, werr)
		}
	})
}
