package storetest

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura/store"
)

// RunBenchmarks runs the same benchmarks against any Store so backends
// compare side by side: Get (hit), Set, and GetMany/SetMany of 100 keys,
// all with 1 KiB values and a TTL of one hour. newStore is called once per
// benchmark; the suite closes the store.
//
// Get and Set run with b.RunParallel, so -cpu varies the concurrency.
func RunBenchmarks(b *testing.B, newStore func(b *testing.B) store.Store) {
	const size = 1024
	val := make([]byte, size)
	for i := range val {
		val[i] = byte(i)
	}
	const nkeys = 1000
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("kura-bench:%d", i)
	}
	fill := func(b *testing.B, s store.Store) {
		items := make([]store.Item, nkeys)
		for i := range items {
			items[i] = store.Item{Key: keys[i], Value: val, TTL: time.Hour}
		}
		if err := store.SetMany(context.Background(), s, items); err != nil {
			b.Fatal(err)
		}
	}
	open := func(b *testing.B) store.Store {
		s := newStore(b)
		b.Cleanup(func() { _ = s.Close() })
		return s
	}

	b.Run("Get", func(b *testing.B) {
		s := open(b)
		fill(b, s)
		var n atomic.Uint64
		b.SetBytes(size)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				i := n.Add(1)
				if _, err := s.Get(ctx, keys[i%nkeys]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Set", func(b *testing.B) {
		s := open(b)
		var n atomic.Uint64
		b.SetBytes(size)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				i := n.Add(1)
				if err := s.Set(ctx, keys[i%nkeys], val, time.Hour); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("GetMany100", func(b *testing.B) {
		s := open(b)
		fill(b, s)
		ctx := context.Background()
		b.SetBytes(100 * size)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			off := (i * 100) % nkeys
			vals, err := store.GetMany(ctx, s, keys[off:off+100])
			if err != nil || vals[99] == nil {
				b.Fatalf("GetMany = %v (last value nil: %v)", err, vals[99] == nil)
			}
		}
	})
	b.Run("SetMany100", func(b *testing.B) {
		s := open(b)
		ctx := context.Background()
		items := make([]store.Item, 100)
		b.SetBytes(100 * size)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			for j := range items {
				items[j] = store.Item{Key: "kura-bench:set:" + strconv.Itoa((i*100+j)%nkeys), Value: val, TTL: time.Hour}
			}
			if err := store.SetMany(ctx, s, items); err != nil {
				b.Fatal(err)
			}
		}
	})
}
