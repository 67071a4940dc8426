package main

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// Renamed is Stock after a deploy renamed a field: another fingerprint,
// and as many fields of the same kinds (a positional decode would
// succeed and be wrong).
type Renamed struct {
	ID    int64  `msgpack:"id"`
	Label string `msgpack:"label"`
	Qty   int    `msgpack:"qty"`
}

// TestCompactThroughCache runs a kura Cache with the compact envelope on
// a real Redis: the sizes stored, hits, version 2 entries read by a
// compact process, and a schema change on a struct stored by position (a
// mismatch that loads, and is not overwritten during the grace period).
func TestCompactThroughCache(t *testing.T) {
	ctx := context.Background()
	srv := servertest.Redis(t, servers.RedisConfig{})
	st, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{srv.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	compact, err := codec.New(codec.Options{Compact: true, PositionalStructs: true})
	if err != nil {
		t.Fatal(err)
	}
	strs, err := kura.New[string](st, kura.Options{Codec: compact})
	if err != nil {
		t.Fatal(err)
	}
	if err := strs.Set(ctx, "s", "user:42 logged in", time.Minute); err != nil {
		t.Fatal(err)
	}
	if raw, err := st.Get(ctx, "s"); err != nil || len(raw) != 25 {
		t.Fatalf("17-char string stored as %d B (%v), want 25", len(raw), err)
	}
	if got, err := strs.Get(ctx, "s"); err != nil || got != "user:42 logged in" {
		t.Fatalf("Get = %q, %v", got, err)
	}

	stocks, err := kura.New[Stock](st, kura.Options{Codec: compact})
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	load := func(context.Context, string) (Stock, error) { loads++; return Stock{42, "apple", 3}, nil }
	for range 3 {
		if got, err := stocks.Fetch(ctx, "k", time.Minute, load); err != nil || got != (Stock{42, "apple", 3}) {
			t.Fatalf("Fetch = %+v, %v", got, err)
		}
	}
	raw, err := st.Get(ctx, "k")
	if err != nil || len(raw) > 24 || loads != 1 {
		t.Fatalf("{42, apple, 3} stored as %d B %x (%v), %d loads; want <= 24 B and 1 load", len(raw), raw, err, loads)
	}

	// With early refresh a Fetch also writes the TTL and the load cost:
	// still within 24 bytes for a loader that takes up to 16 ms.
	refreshing, err := kura.New[Stock](st, kura.Options{Codec: compact, EarlyRefresh: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refreshing.Fetch(ctx, "r", time.Minute, func(context.Context, string) (Stock, error) {
		time.Sleep(3 * time.Millisecond)
		return Stock{42, "apple", 3}, nil
	}); err != nil {
		t.Fatal(err)
	}
	rr, err := st.Get(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	h, err := codec.ParseHeader(rr)
	if err != nil || h.Fields.TTL != time.Minute || h.Fields.Cost < 3*time.Millisecond {
		t.Fatalf("refresh fields %+v, %v", h.Fields, err)
	}
	// The cost is a uvarint of microseconds: 2 bytes up to 16.383 ms. A
	// loaded machine can stretch the 3 ms loader past that, and then the
	// entry is one byte longer by design.
	want := 24 + len(binary.AppendUvarint(nil, uint64(h.Fields.Cost.Microseconds()))) - 2
	if len(rr) > want {
		t.Fatalf("{42, apple, 3} with TTL and load cost %v stored as %d B %x; want <= %d", h.Fields.Cost, len(rr), rr, want)
	}

	// A version 2 writer's entry is a hit for the compact process.
	v2, err := kura.New[Stock](st, kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := v2.Set(ctx, "old", Stock{1, "pear", 2}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, err := stocks.Fetch(ctx, "old", time.Minute, load); err != nil || got != (Stock{1, "pear", 2}) || loads != 1 {
		t.Fatalf("version 2 entry: %+v, %v, %d loads", got, err, loads)
	}

	// A renamed field: the compact entry is a mismatch (never decoded by
	// position), the loader runs, and the young entry is left alone.
	renamed, err := kura.New[Renamed](st, kura.Options{Codec: compact})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := renamed.Get(ctx, "k"); !errors.Is(err, codec.ErrSchemaMismatch) {
		t.Fatalf("Get of another type = %v, want ErrSchemaMismatch", err)
	}
	got, err := renamed.Fetch(ctx, "k", time.Minute, func(context.Context, string) (Renamed, error) { return Renamed{7, "x", 1}, nil })
	if err != nil || got != (Renamed{7, "x", 1}) {
		t.Fatalf("Fetch of another type = %+v, %v", got, err)
	}
	if again, err := st.Get(ctx, "k"); err != nil || string(again) != string(raw) {
		t.Fatalf("a young entry of another type was overwritten: %x (%v), was %x", again, err, raw)
	}
	if s := renamed.Stats(); s.SchemaMismatches == 0 || s.SchemaKept == 0 {
		t.Fatalf("stats %+v: want a mismatch and a kept entry", s)
	}
}
