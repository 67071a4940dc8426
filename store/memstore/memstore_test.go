package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/storetest"
)

func newStore(tb testing.TB) *memstore.Store {
	tb.Helper()
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

func TestByteBound(t *testing.T) {
	const max = 1 << 20
	s, err := memstore.New(memstore.Options{MaxBytes: max})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	val := make([]byte, 10<<10)
	for i := 0; i < 1000; i++ { // 10 MiB through a 1 MiB cache
		if err := s.Set(ctx, fmt.Sprint("k", i), val, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Eviction is amortised; a Get or two settles pending work.
	_, _ = s.Get(ctx, "k0")
	if b := s.Bytes(); b > max {
		t.Fatalf("cache holds %d bytes, bound is %d", b, max)
	}
	if s.Len() == 0 {
		t.Fatal("cache evicted everything")
	}
}

func TestValueTooLarge(t *testing.T) {
	s, err := memstore.New(memstore.Options{MaxBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.MaxValueSize(); got <= 0 || got > 4096 {
		t.Fatalf("MaxValueSize = %d", got)
	}
	err = s.Set(context.Background(), "k", make([]byte, 5000), 0)
	if !errors.Is(err, store.ErrValueTooLarge) {
		t.Fatalf("Set of a value larger than the cache = %v, want ErrValueTooLarge", err)
	}
}

func TestOptionsRejected(t *testing.T) {
	for _, n := range []int64{-1, 10} {
		if _, err := memstore.New(memstore.Options{MaxBytes: n}); err == nil {
			t.Errorf("New(MaxBytes: %d) succeeded", n)
		}
	}
}

func TestNoGoroutinesAfterClose(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		s := newStore(t)
		_ = s.Set(context.Background(), "k", []byte("v"), time.Minute)
		s.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after Close", before, runtime.NumGoroutine())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func BenchmarkStore(b *testing.B) {
	storetest.RunBenchmarks(b, func(b *testing.B) store.Store { return newStore(b) })
}
