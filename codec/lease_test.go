package codec

import (
	"bytes"
	"testing"
)

func TestLeaseEntry(t *testing.T) {
	a, b := NewLeaseEntry(), NewLeaseEntry()
	if bytes.Equal(a, b) {
		t.Fatal("two leases share a token")
	}
	h, err := ParseHeader(a)
	if err != nil || h.Kind != KindLease || len(h.Fields.Token) != 16 {
		t.Fatalf("ParseHeader(lease) = %+v, %v", h, err)
	}
	if !IsPlaceholder(a) || !IsPlaceholder(AppendEntry(nil, KindTombstone, Fields{Token: "t"})) {
		t.Fatal("lease and tombstone entries must be placeholders")
	}
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := c.Encode(nil, "value")
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{v, AppendEntry(nil, KindNegative, Fields{}), nil, {0xC1}} {
		if IsPlaceholder(data) {
			t.Fatalf("%x is no placeholder", data)
		}
	}
}

// FuzzIsPlaceholder: IsPlaceholder agrees with the codec's own parser on
// every input that parses (and never panics on the rest).
func FuzzIsPlaceholder(f *testing.F) {
	f.Add(NewLeaseEntry())
	f.Add(AppendEntry(nil, KindTombstone, Fields{Token: "x"}))
	f.Add(AppendEntry(nil, KindNegative, Fields{}))
	f.Add([]byte{0xC1, 'K', 2, 9, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		got := IsPlaceholder(data)
		h, err := ParseHeader(data)
		if err != nil {
			return
		}
		if want := h.Kind == KindLease || h.Kind == KindTombstone; got != want {
			t.Fatalf("IsPlaceholder(%x) = %v, header says kind %v", data, got, h.Kind)
		}
	})
}
