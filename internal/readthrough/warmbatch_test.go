package readthrough

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/store"
)

// warmLeaser answers every LeaseGet with the same warm values: the read
// path's own cost of a warm batch, without a server.
type warmLeaser struct {
	vals map[string][]byte
}

func (w *warmLeaser) Get(context.Context, string) ([]byte, error)              { return nil, store.ErrNotFound }
func (w *warmLeaser) Set(context.Context, string, []byte, time.Duration) error { return nil }
func (w *warmLeaser) Delete(context.Context, string) error                     { return nil }
func (w *warmLeaser) Close() error                                             { return nil }
func (w *warmLeaser) Fill(context.Context, []store.Fill) error                 { return nil }
func (w *warmLeaser) Release(context.Context, []store.Lease) error             { return nil }
func (w *warmLeaser) Invalidate(context.Context, []string, time.Duration) error {
	return nil
}

func (w *warmLeaser) LeaseGet(_ context.Context, keys []string, _ store.LeaseOptions) ([]store.LeaseResult, error) {
	out := make([]store.LeaseResult, len(keys))
	for i, k := range keys {
		v := w.vals[k]
		out[i] = store.LeaseResult{Value: v, Lease: store.Lease{Key: k, Token: v}}
	}
	return out, nil
}

// newWarmBatch is a pipeline of []byte over a warmLeaser holding n keys
// of 200 bytes.
func newWarmBatch(tb testing.TB, n int) (*Pipeline[[]byte], []string) {
	c, err := codec.New(codec.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	w := &warmLeaser{vals: map[string][]byte{}}
	p := New[[]byte](w, Config{Codec: c, Schema: c.Fingerprint(reflect.TypeFor[[]byte]()),
		StoreTimeout: 250 * time.Millisecond, LeaseTTL: time.Second, LeaseWait: time.Second, Leaser: w}, nil)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:%d", i)
		data, err := p.Encode(keys[i], bytes.Repeat([]byte("v"), 200), codec.Fields{})
		if err != nil {
			tb.Fatal(err)
		}
		w.vals[keys[i]] = data
	}
	return p, keys
}

// BenchmarkWarmBatch is FetchMany of 100 warm keys over a store that
// costs nothing: the read path's per-key work on a warm batch.
func BenchmarkWarmBatch(b *testing.B) {
	p, keys := newWarmBatch(b, 100)
	ctx := context.Background()
	noLoad := func(context.Context, []string) (map[string][]byte, error) {
		return nil, fmt.Errorf("warm: no load expected")
	}
	b.ReportAllocs()
	for b.Loop() {
		m, err := p.FetchMany(ctx, keys, time.Hour, noLoad)
		if err != nil || len(m) != len(keys) {
			b.Fatal(len(m), err)
		}
	}
}

// TestWarmFetchManyAllocatesOnlyItsMap: a FetchMany of 100 warm keys
// allocates its result map and nothing else of its own (the store's
// results are the store's): no slots, no key slice, no per-key garbage.
// Before the slots were reused it allocated two more objects (13 KB and
// 1.6 KB a call).
func TestWarmFetchManyAllocatesOnlyItsMap(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	p, keys := newWarmBatch(t, 100)
	ctx := context.Background()
	noLoad := func(context.Context, []string) (map[string][]byte, error) {
		return nil, fmt.Errorf("warm: no load expected")
	}
	var m map[string][]byte
	maps := testing.AllocsPerRun(100, func() { m = make(map[string][]byte, len(keys)) })
	lease := testing.AllocsPerRun(100, func() { _, _ = p.leases.get(ctx, keys, store.LeaseOptions{}) })
	got := testing.AllocsPerRun(100, func() {
		var err error
		if m, err = p.FetchMany(ctx, keys, time.Hour, noLoad); err != nil || len(m) != len(keys) {
			t.Fatal(len(m), err)
		}
	})
	if got > maps+lease {
		t.Fatalf("a warm FetchMany of %d keys allocates %v objects: %v for its map, %v in the store, %v more",
			len(keys), got, maps, lease, got-maps-lease)
	}
}
