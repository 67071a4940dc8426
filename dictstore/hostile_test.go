package dictstore_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/storeurl"
)

// account is the record the forged dictionary attacks: its Admin false
// becomes true under the forgery.
type account struct {
	Name  string
	Email string
	Admin bool
	Note  string
}

// forgery reads the real 28-bit forgery in testdata/hostile.
func forgery(t *testing.T) (id uint32, real, forged []byte) {
	t.Helper()
	raw, err := os.ReadFile("../testdata/hostile/forged-dictionary.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ ID, Real, Forged string }
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	x, _ := strconv.ParseUint(f.ID, 16, 32)
	real, _ = hex.DecodeString(f.Real)
	forged, _ = hex.DecodeString(f.Forged)
	if codec.DictionaryID(real) != uint32(x) || codec.DictionaryID(forged) != uint32(x) {
		t.Fatal("testdata forgery does not share the id")
	}
	return uint32(x), real, forged
}

// withoutDigest rewrites an entry as a writer from before digests wrote it.
func withoutDigest(t *testing.T, b []byte) []byte {
	t.Helper()
	h, err := codec.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	h.Fields.DictDigest = codec.DictDigest{}
	return append(codec.AppendHeader(nil, h), b[h.Len:]...)
}

func reader(t *testing.T, s store.Store, opts dictstore.Options) (*kura.Cache[account], *dictstore.Registry) {
	t.Helper()
	opts.Store = s
	reg, err := dictstore.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	cd, err := codec.New(codec.Options{DictionarySource: reg})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kura.New[account](s, kura.Options{Codec: cd})
	if err != nil {
		t.Fatal(err)
	}
	return c, reg
}

// TestForgedDictionaryOnServer replays the attack of issue 29 against a
// real Redis: the reserved key rewritten with a dictionary of the same
// 28-bit id that turns Admin false into true.
func TestForgedDictionaryOnServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	ctx := context.Background()
	srv := servertest.Redis(t, servers.RedisConfig{})
	s, err := storeurl.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, real, forged := forgery(t)

	pub, err := dictstore.New(dictstore.Options{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(ctx, real); err != nil {
		t.Fatal(err)
	}
	w, err := codec.New(codec.Options{Compressor: codec.Zstd(3), MinCompressSize: -1, MinSavings: -1, DictionarySource: pub})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.SetDictionary(real); err != nil {
		t.Fatal(err)
	}
	writer, err := kura.New[account](s, kura.Options{Codec: w})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if err := writer.Set(ctx, fmt.Sprint("acct:", i), account{Name: "alice", Email: "alice@example.com", Note: "n"}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// One value as a writer from before digests wrote it.
	raw, err := s.Get(ctx, "acct:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "old:0", withoutDigest(t, raw), time.Hour); err != nil {
		t.Fatal(err)
	}

	// The attacker rewrites the reserved key.
	if _, err := srv.Do(ctx, "SET", pub.Key(id), string(forged)); err != nil {
		t.Fatal(err)
	}

	// A fresh reader decodes none of the values with the forgery.
	r1, reg1 := reader(t, s, dictstore.Options{})
	for i := range n {
		v, err := r1.Get(ctx, fmt.Sprint("acct:", i))
		// The first lookup finds the mismatch; the others are answered
		// from the negative cache.
		if v.Admin || !errors.Is(err, codec.ErrUnknownDictionary) || (i == 0 && !errors.Is(err, codec.ErrDictionaryMismatch)) {
			t.Fatalf("value %d with the forged dictionary published: %+v, %v; want ErrDictionaryMismatch", i, v, err)
		}
	}
	if st := reg1.Stats(); st.Mismatches == 0 {
		t.Fatalf("stats %+v: the forgery was not counted", st)
	}

	// A reader that met the old value first holds the forgery (the risk
	// that stays for values without a digest, until
	// RequireDictionaryDigest) ...
	r2, reg2 := reader(t, s, dictstore.Options{})
	if v, err := r2.Get(ctx, "old:0"); err != nil || !v.Admin {
		t.Fatalf("setup: old value with the forgery = %+v, %v", v, err)
	}
	// ... and the writer re-publishes (Run does it every CheckInterval).
	if wrote, err := pub.Republish(ctx); err != nil || wrote != 1 {
		t.Fatalf("Republish = %d, %v; want the forged key rewritten", wrote, err)
	}
	for i := range n {
		v, err := r2.Get(ctx, fmt.Sprint("acct:", i))
		if err != nil || v.Admin || v.Name != "alice" {
			t.Fatalf("value %d after re-publishing, reader that held the forgery: %+v, %v", i, v, err)
		}
	}
	if st := reg2.Stats(); st.Conflicts != 1 {
		t.Fatalf("stats %+v: want the two contents of one id counted as a conflict", st)
	}
	// The registry no longer vouches for either content for values
	// without a digest; the codec now holds the honest bytes.
	if _, err := reg2.Dictionary(id); !errors.Is(err, codec.ErrDictionaryMismatch) {
		t.Fatalf("Dictionary(id) after a conflict = %v, want ErrDictionaryMismatch", err)
	}
	if v, err := r2.Get(ctx, "old:0"); err != nil || v.Admin {
		t.Fatalf("old value after re-publishing: %+v, %v", v, err)
	}
}

// TestHostileReservedKeyBounded writes a 32 MiB blob under a reserved
// key: a lookup and a Republish read at most MaxSize of it.
func TestHostileReservedKeyBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	ctx := context.Background()
	srv := servertest.Redis(t, servers.RedisConfig{})
	mc := servertest.Memcached(t, servers.MemcachedConfig{MaxItemSize: 64 << 20, MemoryMB: 256})
	const blob = 32 << 20
	for _, url := range []string{srv.URL(), "memcached://" + mc.Addr} {
		s, err := storeurl.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		_, real, _ := forgery(t)
		pub, err := dictstore.New(dictstore.Options{Store: s})
		if err != nil {
			t.Fatal(err)
		}
		id, err := pub.Publish(ctx, real)
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{pub.Key(id)}
		if nk, ok := store.Find[dictstore.NodeKeyer](s); ok {
			if keys, err = nk.NodeKeys(ctx, pub.Key(id)); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range keys {
			if err := s.Set(ctx, k, bytes.Repeat([]byte{'A'}, blob), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		reg, err := dictstore.New(dictstore.Options{Store: s})
		if err != nil {
			t.Fatal(err)
		}
		alloc := func(f func()) uint64 {
			var a, b runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&a)
			f()
			runtime.ReadMemStats(&b)
			return b.TotalAlloc - a.TotalAlloc
		}
		var lerr error
		got := alloc(func() { _, lerr = reg.Dictionary(id) })
		if !errors.Is(lerr, codec.ErrDictionaryMismatch) {
			t.Fatalf("%s: lookup of a 32 MiB key = %v, want ErrDictionaryMismatch", url, lerr)
		}
		if got > 4<<20 {
			t.Fatalf("%s: a lookup of a 32 MiB reserved key allocated %d bytes; MaxSize is %d", url, got, dictstore.DefaultMaxSize)
		}
		var wrote int
		var rerr error
		got = alloc(func() { wrote, rerr = pub.Republish(ctx) })
		if rerr != nil || wrote != len(keys) || got > 4<<20 {
			t.Fatalf("%s: Republish over a 32 MiB key = %d, %v, %d bytes allocated", url, wrote, rerr, got)
		}
		t.Logf("%s: lookup and Republish over a %d-byte reserved key", url, blob)
		s.Close()
	}
}

// gateStore blocks every read until gate is closed, whatever the
// context says: a server that never answers.
type gateStore struct {
	store.Store
	gate chan struct{}
}

func (g *gateStore) Get(ctx context.Context, key string) ([]byte, error) {
	<-g.gate
	return g.Store.Get(ctx, key)
}

// TestLookupHonoursCallerContext: a caller whose deadline is shorter than
// FetchTimeout returns at its deadline, while the lookup goes on for
// callers that can wait.
func TestLookupHonoursCallerContext(t *testing.T) {
	ctx := context.Background()
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, real, _ := forgery(t)
	pub, _ := dictstore.New(dictstore.Options{Store: mem})
	id, err := pub.Publish(ctx, real)
	if err != nil {
		t.Fatal(err)
	}
	g := &gateStore{Store: mem, gate: make(chan struct{})}
	reg, _ := dictstore.New(dictstore.Options{Store: g, FetchTimeout: time.Hour})
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	// Only the caller's deadline can end this call: the store ignores it
	// and FetchTimeout is an hour.
	if _, err := reg.DictionaryContext(short, id, codec.DigestOf(real)); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, codec.ErrUnknownDictionary) {
		t.Fatalf("lookup past the caller's deadline = %v", err)
	}
	close(g.gate)
	d, err := reg.DictionaryContext(ctx, id, codec.DigestOf(real))
	if err != nil || !bytes.Equal(d, real) {
		t.Fatalf("lookup after the server answered: %v", err)
	}
	// Through a Codec: DecodeContext passes the caller's context down.
	reg2, _ := dictstore.New(dictstore.Options{Store: &gateStore{Store: mem, gate: make(chan struct{})}, FetchTimeout: time.Hour})
	w, _ := codec.New(codec.Options{Compressor: codec.Zstd(3), MinCompressSize: -1, MinSavings: -1})
	if _, err := w.SetDictionary(real); err != nil {
		t.Fatal(err)
	}
	val, _, err := w.Encode(nil, account{Name: "alice", Email: "alice@example.com", Note: "n"})
	if err != nil {
		t.Fatal(err)
	}
	cd, _ := codec.New(codec.Options{DictionarySource: reg2})
	short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, err := cd.DecodeContext(short2, val, new(account)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DecodeContext past the caller's deadline = %v", err)
	}
}

// TestRecheckFindsForgery: a dictionary held for values without a digest
// is read again after Recheck; other bytes under its id make the id
// refused for such values (Stats.Conflicts), not silently swapped.
func TestRecheckFindsForgery(t *testing.T) {
	ctx := context.Background()
	mem, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, real, forged := forgery(t)
	pub, _ := dictstore.New(dictstore.Options{Store: mem})
	if _, err := pub.Publish(ctx, real); err != nil {
		t.Fatal(err)
	}
	reg, _ := dictstore.New(dictstore.Options{Store: mem, Recheck: time.Nanosecond})
	if d, err := reg.Dictionary(id); err != nil || !bytes.Equal(d, real) {
		t.Fatalf("first lookup: %v", err)
	}
	// Nothing changed: a re-check keeps the dictionary.
	time.Sleep(time.Millisecond)
	if d, err := reg.Dictionary(id); err != nil || !bytes.Equal(d, real) {
		t.Fatalf("re-check of unchanged bytes: %v", err)
	}
	if err := mem.Set(ctx, pub.Key(id), forged, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	if _, err := reg.Dictionary(id); !errors.Is(err, codec.ErrDictionaryMismatch) {
		t.Fatalf("re-check finding a forgery = %v, want ErrDictionaryMismatch", err)
	}
	if st := reg.Stats(); st.Conflicts != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Values with a digest still find their dictionary, by digest.
	if err := mem.Set(ctx, pub.Key(id), real, 0); err != nil {
		t.Fatal(err)
	}
	if d, err := reg.DictionaryDigest(id, codec.DigestOf(real)); err != nil || !bytes.Equal(d, real) {
		t.Fatalf("lookup by digest after a conflict: %v", err)
	}
}
