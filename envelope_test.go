package kura_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// testNewerWriter checks the one rule every reader keeps: an entry it
// cannot fully understand (a newer format version, entry kind or critical
// field) is a miss that Fetch and FetchMany answer from the loader without
// overwriting it, and a lease placeholder or tombstone is a plain miss that
// never reaches a caller as a value.
func testNewerWriter(t *testing.T, s store.Store) {
	ctx := context.Background()
	c := newCache(t, s, kura.Options{})
	newer := map[string][]byte{
		"nw:version4":  {codec.Magic0, codec.Magic1, 4, 0, 0, 1, 0, 0, 1, 0xc0},
		"nw:kind":      {codec.Magic0, codec.Magic1, codec.Version, 0x7f, 0},
		"nw:critical":  append([]byte{codec.Magic0, codec.Magic1, codec.Version, 0, 3, 0x90, 1, 0}, 1, 0, 0, 1, 0xc0),
		"nw:v1flagbit": {codec.Magic0, codec.Magic1, codec.Version1 | 0x20, 1, 0, 0, 1, 0xc0},
	}
	loads := 0
	loader := func(context.Context, string) (Profile, error) { loads++; return profile(7), nil }
	for key, raw := range newer {
		if err := s.Set(ctx, key, raw, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, key); !errors.Is(err, kura.ErrNotUnderstood) || errors.Is(err, kura.ErrMalformed) {
			t.Fatalf("%s: Get = %v, want ErrNotUnderstood (and not ErrMalformed)", key, err)
		}
		got, err := c.Fetch(ctx, key, time.Minute, loader)
		if err != nil || got.ID != 7 {
			t.Fatalf("%s: Fetch = %+v, %v; want the loader's value", key, got, err)
		}
		if b, err := s.Get(ctx, key); err != nil || !bytes.Equal(b, raw) {
			t.Fatalf("%s: Fetch overwrote a newer writer's entry: % x, %v", key, b, err)
		}
	}
	if loads != len(newer) {
		t.Fatalf("loader called %d times, want %d", loads, len(newer))
	}
	keys := make([]string, 0, len(newer)+1)
	for k := range newer {
		keys = append(keys, k)
	}
	keys = append(keys, "nw:plain-miss")
	got, err := c.FetchMany(ctx, keys, time.Minute, func(_ context.Context, ks []string) (map[string]Profile, error) {
		m := make(map[string]Profile, len(ks))
		for _, k := range ks {
			m[k] = profile(8)
		}
		return m, nil
	})
	if err != nil || len(got) != len(keys) {
		t.Fatalf("FetchMany = %d values, %v; want %d", len(got), err, len(keys))
	}
	for key, raw := range newer {
		if b, err := s.Get(ctx, key); err != nil || !bytes.Equal(b, raw) {
			t.Fatalf("%s: FetchMany overwrote a newer writer's entry: % x, %v", key, b, err)
		}
	}
	if _, err := c.Get(ctx, "nw:plain-miss"); err != nil {
		t.Fatalf("FetchMany did not fill a plain miss: %v", err)
	}

	// Entries that hold no value are misses, never values.
	for _, k := range []codec.Kind{codec.KindLease, codec.KindTombstone} {
		key := "nw:" + k.String()
		if err := s.Set(ctx, key, codec.AppendEntry(nil, k, codec.Fields{Token: "tok"}), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, key); !errors.Is(err, kura.ErrNotFound) {
			t.Fatalf("Get of a %s entry = %v, want ErrNotFound", k, err)
		}
	}
}
