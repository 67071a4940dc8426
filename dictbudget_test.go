package kura_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
)

// stalledSource is a DictionarySource whose server stalls: a lookup
// returns only when its context is done (or when the test ends), like a
// dictstore.Registry whose store stopped answering.
type stalledSource struct {
	release  chan struct{}
	asked    atomic.Int64
	deadline atomic.Int64 // lookups whose context had a deadline
}

func (s *stalledSource) Dictionary(id uint32) ([]byte, error) {
	s.asked.Add(1)
	<-s.release
	return nil, fmt.Errorf("%w %d: stalled", codec.ErrUnknownDictionary, id)
}

func (s *stalledSource) DictionaryContext(ctx context.Context, id uint32, _ codec.DictDigest) ([]byte, error) {
	s.asked.Add(1)
	if _, ok := ctx.Deadline(); ok {
		s.deadline.Add(1)
	}
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("%w %d: %w", codec.ErrUnknownDictionary, id, ctx.Err())
	case <-s.release:
		return nil, fmt.Errorf("%w %d: stalled", codec.ErrUnknownDictionary, id)
	}
}

// TestFetchBudgetBoundsDictionaryLookup: a value compressed with a
// dictionary the reader does not hold makes the decode ask the
// DictionarySource; when that lookup stalls, Fetch and FetchMany return
// within their StoreTimeout budget with the loader's value (the stalled
// lookup is a miss, not a hang), and Get ends with its caller's context.
// Both read paths: plain reads (an in-process store, no leases) and
// lease reads (Redis). Before the budget reached the decode, each of
// these calls waited on the stalled source for as long as it stalled.
// (A Get without a deadline waits as long as the source does: a
// DictionarySource must bound its own wait, as dictstore.Registry does.)
func TestFetchBudgetBoundsDictionaryLookup(t *testing.T) {
	articles := corpus.Articles(5, 40)
	var samples [][]byte
	for _, a := range articles {
		b, err := codec.MsgPack().Marshal(nil, a)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, b)
	}
	dict, id, err := codec.TrainContentDictionary(samples, 8<<10)
	if err != nil {
		t.Fatal(err)
	}
	writerCodec, err := codec.New(codec.Options{Compressor: codec.Zstd(3), MinCompressSize: -1, MinSavings: -1,
		Dictionaries: map[uint32][]byte{id: dict}, Dictionary: id})
	if err != nil {
		t.Fatal(err)
	}

	backends := map[string]func(t *testing.T) store.Store{
		"memstore": memstoreBackend,
	}
	if !testing.Short() {
		r := servertest.Redis(t, servers.RedisConfig{})
		backends["redis"] = redisBackend(r.URL)
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			writer, err := kura.New[corpus.Article](s, kura.Options{Codec: writerCodec})
			if err != nil {
				t.Fatal(err)
			}
			src := &stalledSource{release: make(chan struct{})}
			t.Cleanup(func() { close(src.release) })
			readerCodec, err := codec.New(codec.Options{DictionarySource: src, DictionaryRecheck: -1})
			if err != nil {
				t.Fatal(err)
			}
			reader, err := kura.New[corpus.Article](s, kura.Options{Codec: readerCodec, StoreTimeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			keys := make([]string, 3)
			for i := range keys {
				keys[i] = leaseKey(fmt.Sprint("dictbudget", i))
				if err := writer.Set(ctx, keys[i], articles[i], time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			var loads atomic.Int64
			load := func(_ context.Context, key string) (corpus.Article, error) {
				loads.Add(1)
				for i, k := range keys {
					if k == key {
						return articles[i], nil
					}
				}
				return corpus.Article{}, kura.ErrNotFound
			}
			loadMany := func(_ context.Context, ks []string) (map[string]corpus.Article, error) {
				out := make(map[string]corpus.Article, len(ks))
				for _, k := range ks {
					v, err := load(ctx, k)
					if err != nil {
						return nil, err
					}
					out[k] = v
				}
				return out, nil
			}

			// Get: the caller's deadline ends the lookup.
			within(t, "Get", func() {
				gctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				if _, err := reader.Get(gctx, keys[2]); !errors.Is(err, codec.ErrUnknownDictionary) {
					t.Errorf("Get of a value whose dictionary lookup stalls: %v, want ErrUnknownDictionary", err)
				}
			})
			// Fetch: the budget ends the lookup, the loader's value is served.
			within(t, "Fetch", func() {
				v, err := reader.Fetch(ctx, keys[0], time.Hour, load)
				if err != nil || v.ID != articles[0].ID {
					t.Errorf("Fetch: %+v, %v; want the loader's value", v.ID, err)
				}
			})
			within(t, "FetchMany", func() {
				got, err := reader.FetchMany(ctx, keys[1:], time.Hour, loadMany)
				if err != nil || len(got) != 2 || got[keys[1]].ID != articles[1].ID || got[keys[2]].ID != articles[2].ID {
					t.Errorf("FetchMany: %d values, %v; want the loader's 2", len(got), err)
				}
			})
			if loads.Load() != 3 {
				t.Errorf("%d loads, want 3 (one per key whose stored value could not be decoded in time)", loads.Load())
			}
			if asked, dl := src.asked.Load(), src.deadline.Load(); asked == 0 || dl != asked {
				t.Errorf("the source was asked %d times, %d of them with a deadline; want every lookup bounded", asked, dl)
			}
			// A lookup the budget ended is no proof of corrupt bytes: the
			// reader neither deleted nor replaced the writer's values.
			for i, k := range keys {
				if v, err := writer.Get(ctx, k); err != nil || v.ID != articles[i].ID {
					t.Errorf("the writer's Get %s after the reads: %v", k, err)
				}
			}
		})
	}
}

// within runs f and fails the test if f has not returned after a minute
// (far beyond the 50 ms bounds under test: a hang, not a slow machine).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return: it waits on the stalled dictionary lookup beyond its budget", what)
	}
}
