package kura_test

import (
	"context"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store/memstore"
)

// BenchmarkFetchHit is one Fetch that hits, on the in-process memstore so
// that the cache's own work (read, header, schema check, decode) is what
// is measured, not a network round trip.
func BenchmarkFetchHit(b *testing.B) {
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ms.Close()
	c, err := kura.New[benchValue](ms, kura.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	load := func(context.Context, string) (benchValue, error) { return newBenchValue(1), nil }
	if _, err := c.Fetch(ctx, "hit", time.Hour, load); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Fetch(ctx, "hit", time.Hour, load); err != nil {
			b.Fatal(err)
		}
	}
	if st := c.Stats(); st.LoaderCalls != 1 {
		b.Fatalf("the loader ran %d times: not a hit benchmark", st.LoaderCalls)
	}
}
