package readthrough

import (
	"bytes"
	"testing"

	"github.com/kuracache/kura/codec"
)

func TestLeaseEntry(t *testing.T) {
	a, b := codec.NewLeaseEntry(), codec.NewLeaseEntry()
	if bytes.Equal(a, b) {
		t.Fatal("two leases share a token")
	}
	h, err := codec.ParseHeader(a)
	if err != nil || h.Kind != codec.KindLease || len(h.Fields.Token) != 16 {
		t.Fatalf("ParseHeader(lease) = %+v, %v", h, err)
	}
	if !IsPlaceholder(a) || !IsPlaceholder(codec.AppendEntry(nil, codec.KindTombstone, codec.Fields{Token: "t"})) {
		t.Fatal("lease and tombstone entries must be placeholders")
	}
	c, err := codec.New(codec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := c.Encode(nil, "value")
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{v, codec.AppendEntry(nil, codec.KindNegative, codec.Fields{}), nil, {0xC1}} {
		if IsPlaceholder(data) {
			t.Fatalf("%x is no placeholder", data)
		}
	}
}

// FuzzIsPlaceholder: IsPlaceholder agrees with the codec's own parser on
// every input that parses (and never panics on the rest).
func FuzzIsPlaceholder(f *testing.F) {
	f.Add(codec.NewLeaseEntry())
	f.Add(codec.AppendEntry(nil, codec.KindTombstone, codec.Fields{Token: "x"}))
	f.Add(codec.AppendEntry(nil, codec.KindNegative, codec.Fields{}))
	f.Add([]byte{0xC1, 'K', 2, 9, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		got := IsPlaceholder(data)
		h, err := codec.ParseHeader(data)
		if err != nil {
			return
		}
		if want := h.Kind == codec.KindLease || h.Kind == codec.KindTombstone; got != want {
			t.Fatalf("IsPlaceholder(%x) = %v, header says kind %v", data, got, h.Kind)
		}
	})
}
