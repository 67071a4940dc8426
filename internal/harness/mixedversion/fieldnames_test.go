package main

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

// oldMsgPack is the msgpack serializer of the release before the
// field-name rule: msgpack/v5 defaults (a field without a msgpack tag is
// named by its Go name), a strict decode without the case-insensitive
// match. As a user's serializer, its fingerprints use Go names too, as
// the old release's did for types with only json tags.
type oldMsgPack struct{}

func (oldMsgPack) ID() byte     { return codec.IDMsgPack }
func (oldMsgPack) Name() string { return "msgpack (before the field-name rule)" }
func (oldMsgPack) Marshal(dst []byte, v any) ([]byte, error) {
	b, err := msgpack.Marshal(v)
	return append(dst, b...), err
}
func (oldMsgPack) Unmarshal(data []byte, v any) error { return msgpack.Unmarshal(data, v) }
func (oldMsgPack) UnmarshalStrict(data []byte, v any) error {
	d := msgpack.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields(true)
	return d.Decode(v)
}

// Two types with only json tags: one whose names differ from the Go
// names only in case, one where they differ otherwise.
type (
	caseOnly struct {
		ID    int64   `json:"id"`
		Name  string  `json:"name"`
		Price float64 `json:"price"`
	}
	renamedByTag struct {
		ProductID int64  `json:"product_id"`
		Name      string `json:"name"`
	}
)

// TestFieldNameRuleMixedVersionWindow measures the loads per key of a
// rolling deploy that brings the field-name rule: an old process (version
// 2 writer, Go names, no case-insensitive match) and a new one (kura.New's
// defaults) read the same keys on one Redis, with a tenth of the keys
// expiring every round, then the old process is gone. docs/FORMAT.md
// ("Field names") reports the figures.
func TestFieldNameRuleMixedVersionWindow(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	st, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{srv.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t.Run("case-only", func(t *testing.T) {
		t.Parallel()
		window[caseOnly](t, ctx, st, "c:", func(i int) caseOnly { return caseOnly{int64(i), "lamp", 9.5} })
	})
	t.Run("renamed-by-tag", func(t *testing.T) {
		t.Parallel()
		window[renamedByTag](t, ctx, st, "r:", func(i int) renamedByTag { return renamedByTag{int64(i), "lamp"} })
	})
}

func window[V any](t *testing.T, ctx context.Context, st *redisstore.Store, prefix string, row func(int) V) {
	const keys, rounds = 200, 5
	oldCodec, err := codec.New(codec.Options{Serializer: oldMsgPack{}})
	if err != nil {
		t.Fatal(err)
	}
	var oldLoads, newLoads atomic.Int64
	// A grace of 1 s instead of a minute, so the test can wait it out.
	const grace = time.Second
	oldC, err := kura.New[V](st, kura.Options{Codec: oldCodec, Name: "old", SchemaGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	newC, err := kura.New[V](st, kura.Options{Name: "new", SchemaGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) string { return fmt.Sprintf("%s%d", prefix, i) }
	load := func(n *atomic.Int64) func(context.Context, string) (V, error) {
		return func(_ context.Context, k string) (V, error) {
			n.Add(1)
			var i int
			fmt.Sscanf(k[len(prefix):], "%d", &i)
			return row(i), nil
		}
	}
	readAll := func(c *kura.Cache[V], n *atomic.Int64) {
		for i := range keys {
			if _, err := c.Fetch(ctx, key(i), time.Hour, load(n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Before the deploy: the old process fills every key.
	readAll(oldC, &oldLoads)
	before := oldLoads.Load()
	// The window: both run; a tenth of the keys expire each round.
	for r := range rounds {
		for i := r; i < keys; i += 10 {
			if err := st.Delete(ctx, key(i)); err != nil {
				t.Fatal(err)
			}
		}
		if r%2 == 0 {
			readAll(newC, &newLoads)
			readAll(oldC, &oldLoads)
		} else {
			readAll(oldC, &oldLoads)
			readAll(newC, &newLoads)
		}
	}
	winOld, winNew := oldLoads.Load()-before, newLoads.Load()
	expired := int64(rounds * keys / 10)
	// The new process alone, within the grace (entries the old process
	// wrote are not replaced yet), then after it, twice.
	readAll(newC, &newLoads)
	within := newLoads.Load() - winNew
	winNew += within
	time.Sleep(grace + 1100*time.Millisecond) // compact write times are whole seconds
	readAll(newC, &newLoads)
	after1 := newLoads.Load() - winNew
	readAll(newC, &newLoads)
	after2 := newLoads.Load() - winNew - after1
	t.Logf("%s %d keys, %d rounds, %d expiries: window loads old %d, new %d (%.2f per key and round beyond the expiries); new alone within the grace %d; after the grace %d then %d (%.2f, %.2f per key); schema mismatches old %d, new %d, kept (not overwritten) old %d, new %d",
		prefix, keys, rounds, expired, winOld, winNew-within, float64(winOld+winNew-within-expired)/float64(keys*rounds),
		within, after1, after2, float64(after1)/keys, float64(after2)/keys,
		oldC.Stats().SchemaMismatches, newC.Stats().SchemaMismatches, oldC.Stats().SchemaKept, newC.Stats().SchemaKept)
	if after2 != 0 {
		t.Errorf("%s: the new process alone still loads %d of %d keys on its second pass", prefix, after2, keys)
	}
	if after1 > keys {
		t.Errorf("%s: after the window the new process loads %d of %d keys (more than once per key)", prefix, after1, keys)
	}
}
