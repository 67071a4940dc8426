package kura_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
)

// ttlRecorder is a Store that remembers the TTLs it was given.
type ttlRecorder struct {
	store.Store
	mu   sync.Mutex
	ttls []time.Duration
}

func (r *ttlRecorder) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	r.mu.Lock()
	r.ttls = append(r.ttls, ttl)
	r.mu.Unlock()
	return r.Store.Set(ctx, key, v, ttl)
}

func TestTTLJitter(t *testing.T) {
	ctx := context.Background()
	ms, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &ttlRecorder{Store: ms}
	c := newCache(t, rec, kura.Options{TTLJitter: 0.2})
	for i := 0; i < 200; i++ {
		if err := c.Set(ctx, "k", profile(i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[time.Duration]bool{}
	for _, ttl := range rec.ttls {
		if ttl > time.Hour || ttl < 48*time.Minute {
			t.Fatalf("ttl %v outside [48m, 1h] for 20%% jitter", ttl)
		}
		seen[ttl] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct TTLs in 200 writes: no jitter", len(seen))
	}

	rec.ttls = nil
	plain := newCache(t, rec, kura.Options{})
	_ = plain.Set(ctx, "k", profile(1), time.Hour)
	if rec.ttls[0] != time.Hour {
		t.Fatalf("without jitter the TTL changed to %v", rec.ttls[0])
	}
}

// TestStoreTimeoutFallsThrough pauses the Redis server (SIGSTOP: it keeps
// its socket but answers nothing, as a server stuck in a slow command
// does) and checks that Fetch answers from the loader once
// Options.StoreTimeout has passed, instead of waiting for the server.
func TestStoreTimeoutFallsThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	ctx := context.Background()
	srv := servertest.Redis(t, servers.RedisConfig{})
	c := newCache(t, redisBackend(srv.URL)(t), kura.Options{StoreTimeout: 200 * time.Millisecond})
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a hang fails, it does not block the suite
	defer cancel()
	v, err := c.Fetch(ctx, "slow", time.Hour, func(context.Context, string) (Profile, error) { return profile(5), nil })
	if err != nil || v.ID != 5 {
		t.Fatalf("Fetch against a stalled server = %+v, %v; want the loader's value", v, err)
	}
	m, err := c.FetchMany(ctx, []string{"slow:1", "slow:2"}, time.Hour, func(_ context.Context, keys []string) (map[string]Profile, error) {
		return map[string]Profile{"slow:1": profile(1), "slow:2": profile(2)}, nil
	})
	if err != nil || len(m) != 2 {
		t.Fatalf("FetchMany against a stalled server = %v, %v", m, err)
	}
	if st := c.Stats(); st.StoreErrors == 0 {
		t.Fatal("timeouts were not counted as store errors")
	}
}

// TestCodecLimitIsErrValueTooLarge: a value over the codec's
// MaxDecodedSize matches kura.ErrValueTooLarge like any other size refusal.
func TestCodecLimitIsErrValueTooLarge(t *testing.T) {
	cd, err := codec.New(codec.Options{MaxDecodedSize: 1024, Compressor: codec.None()})
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := memstore.New(memstore.Options{})
	c := newCache(t, ms, kura.Options{Codec: cd, MaxValueSize: -1})
	err = c.Set(context.Background(), "big", profile(1), time.Minute)
	if !errors.Is(err, kura.ErrValueTooLarge) || !strings.Contains(err.Error(), `"big"`) {
		t.Fatalf("err = %v, want ErrValueTooLarge naming the key", err)
	}
	if c.Stats().RejectedValues != 1 {
		t.Fatal("refusal not counted")
	}
}

// downStore fails every batch call as a whole, as a store whose server is
// unreachable does.
type downStore struct{ store.Store }

var errDown = errors.New("connection refused")

func (downStore) GetMany(context.Context, []string) ([][]byte, error) { return nil, errDown }
func (downStore) SetMany(context.Context, []store.Item) error         { return errDown }
func (downStore) DeleteMany(context.Context, []string) error          { return errDown }

func TestGetManyReportsWholeBatchFailure(t *testing.T) {
	ms, _ := memstore.New(memstore.Options{})
	c := newCache(t, downStore{ms}, kura.Options{})
	got, err := c.GetMany(context.Background(), []string{"a", "b"})
	if !errors.Is(err, errDown) || len(got) != 0 {
		t.Fatalf("GetMany on a store that is down = %v, %v; want the store's error", got, err)
	}
	if st := c.Stats(); st.StoreErrors != 2 {
		t.Fatalf("store errors = %d, want 2", st.StoreErrors)
	}
}

// TestDefaultTTL: a TTL of 0 means the Cache's Options.TTL, NoExpiry means
// none, and Keyed views inherit the Cache's TTL.
func TestDefaultTTL(t *testing.T) {
	ms, _ := memstore.New(memstore.Options{})
	defer ms.Close()
	rec := &ttlRecorder{Store: ms}
	c := newCache(t, rec, kura.Options{TTL: time.Hour})
	ctx := context.Background()
	_ = c.Set(ctx, "a", profile(1), 0)
	_ = c.Set(ctx, "b", profile(1), kura.NoExpiry)
	_ = c.Set(ctx, "c", profile(1), time.Minute)
	_, _ = c.Fetch(ctx, "d", 0, func(context.Context, string) (Profile, error) { return profile(1), nil })
	k, err := kura.NewKeyed[int, Profile](c, kura.KeyedOptions[int]{})
	if err != nil {
		t.Fatal(err)
	}
	_ = k.Set(ctx, 5, profile(5))
	want := []time.Duration{time.Hour, 0, time.Minute, time.Hour, time.Hour}
	if !slices.Equal(rec.ttls, want) {
		t.Fatalf("stored TTLs %v, want %v", rec.ttls, want)
	}
	if _, err := kura.New[Profile](rec, kura.Options{TTL: -time.Second}); err == nil {
		t.Fatal("a negative Options.TTL was accepted")
	}
	if err := c.Set(ctx, "e", profile(1), -2*time.Second); err == nil {
		t.Fatal("a negative TTL other than NoExpiry was accepted")
	}
}

// TestEnvelopeOption: zero Options write version 3 with named struct
// fields (a 17-character string in 25 bytes, write time included),
// EnvelopeCompactPositional stores structs as arrays, EnvelopeV2 writes
// version 2, and New refuses an Envelope the Codec does not write.
func TestEnvelopeOption(t *testing.T) {
	ctx := context.Background()
	type item struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	for _, tc := range []struct {
		form       kura.EnvelopeForm
		version    uint8
		maxString  int
		serializer byte
	}{
		{kura.EnvelopeCompact, codec.VersionCompact, 25, codec.IDMsgPack},
		{kura.EnvelopeCompactPositional, codec.VersionCompact, 25, codec.IDMsgPackArray},
		{kura.EnvelopeV2, codec.Version, 41, codec.IDMsgPack},
	} {
		s, err := memstore.New(memstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		strs, err := kura.New[string](s, kura.Options{Envelope: tc.form})
		if err != nil {
			t.Fatal(err)
		}
		items, err := kura.New[item](s, kura.Options{Envelope: tc.form})
		if err != nil {
			t.Fatal(err)
		}
		if err := strs.Set(ctx, "k", "seventeen chars!!", 0); err != nil {
			t.Fatal(err)
		}
		if err := items.Set(ctx, "i", item{1, "lamp"}, 0); err != nil {
			t.Fatal(err)
		}
		raw, err := s.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		h, err := codec.ParseHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		if h.Version != tc.version || len(raw) > tc.maxString {
			t.Errorf("Envelope %d: 17-character string: version %d in %d bytes, want version %d in <= %d", tc.form, h.Version, len(raw), tc.version, tc.maxString)
		}
		rawItem, err := s.Get(ctx, "i")
		if err != nil {
			t.Fatal(err)
		}
		hi, err := codec.ParseHeader(rawItem)
		if err != nil {
			t.Fatal(err)
		}
		if hi.Version != tc.version || hi.Serializer != tc.serializer {
			t.Errorf("Envelope %d: struct: version %d serializer %d, want %d and %d", tc.form, hi.Version, hi.Serializer, tc.version, tc.serializer)
		}
		if tc.serializer == codec.IDMsgPack && !bytes.Contains(rawItem, []byte("\xa2id\x01\xa4name\xa4lamp")) {
			t.Errorf("Envelope %d: struct stored as %x, want the json tags' names id and name", tc.form, rawItem)
		}
		got, err := strs.Get(ctx, "k")
		if err != nil || got != "seventeen chars!!" {
			t.Errorf("Envelope %d: Get = %q, %v", tc.form, got, err)
		}
		gotItem, err := items.Get(ctx, "i")
		if err != nil || gotItem != (item{1, "lamp"}) {
			t.Errorf("Envelope %d: Get = %+v, %v", tc.form, gotItem, err)
		}
	}
	v2, err := codec.New(codec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kura.New[string](s, kura.Options{Envelope: kura.EnvelopeCompactPositional, Codec: v2}); err == nil || !strings.Contains(err.Error(), "Envelope") {
		t.Errorf("EnvelopeCompactPositional with a version 2 Codec: %v, want an error naming the field", err)
	}
	if _, err := kura.New[string](s, kura.Options{Codec: v2}); err != nil {
		t.Errorf("a version 2 Codec with the zero Envelope: %v (the Codec decides)", err)
	}
	if _, err := kura.New[string](s, kura.Options{Envelope: 9}); err == nil || !strings.Contains(err.Error(), "Envelope") {
		t.Errorf("Envelope 9: %v, want an error naming the field", err)
	}
}
