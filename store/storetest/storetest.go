// Package storetest is the conformance suite of the store seam: every
// backend runs the same tests, on a real server, through [Run].
//
//	func TestConformance(t *testing.T) {
//		srv := servertest.Redis(t, servers.RedisConfig{})
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := redisstore.NewFromURL(context.Background(), srv.URL(), redisstore.Options{})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// newStore is called once per subtest and must return a ready Store; the
// suite closes it. Stores returned for one test may share a server: every
// subtest writes under a key prefix of its own, so leftovers of one
// subtest never change the answer of another.
//
// The suite checks behaviour, never speed: timing assertions would flake on
// a loaded machine. Waits (TTL expiry) poll with a generous deadline, and a
// watchdog turns a hang into a failure that names the operation.
//
// Backends with documented limits (memcached's 250-byte keys, its item size)
// say so through [Options] and [RunWithOptions].
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/store"
)

// Options describe the documented differences of a backend. The zero value
// suits a backend without limits below 1 MiB values and 1 KiB keys.
type Options struct {
	// MaxKeyLen is the longest key the backend accepts. When set, the suite
	// checks that a key of this length round-trips and that a longer one is
	// refused with an error matching store.ErrInvalidKey. If zero, keys of
	// 1 KiB must work and no limit is checked.
	MaxKeyLen int
	// LargeValue is the size of the large value round-tripped by the suite.
	// If zero, it defaults to 1 MiB.
	LargeValue int
}

// Run runs the conformance suite with the zero Options.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	RunWithOptions(t, newStore, Options{})
}

// RunWithOptions runs the conformance suite against the stores newStore
// returns, with the backend's documented limits in opts.
func RunWithOptions(t *testing.T, newStore func(t *testing.T) store.Store, opts Options) {
	t.Helper()
	if opts.LargeValue == 0 {
		opts.LargeValue = 1 << 20
	}
	run := rand.Uint64()
	for _, tc := range append(tests[:len(tests):len(tests)], leaseTests...) {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			closed := false
			t.Cleanup(func() {
				if !closed {
					_ = s.Close()
				}
			})
			h := &harness{
				t:      t,
				s:      s,
				opts:   opts,
				prefix: fmt.Sprintf("kura-st:%x:%s:", run, tc.name),
				closed: &closed,
			}
			tc.fn(h)
		})
	}
}

// harness is what every test function gets: the store under test, a key
// prefix of its own and helpers that fail the test with the operation named.
type harness struct {
	t      *testing.T
	s      store.Store
	opts   Options
	prefix string
	closed *bool
}

func (h *harness) key(name string) string { return h.prefix + name }

// ctx returns a context that fails the test rather than letting a hung
// backend block the run forever.
func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

func (h *harness) set(key string, val []byte, ttl time.Duration) {
	h.t.Helper()
	if err := h.s.Set(h.ctx(), key, val, ttl); err != nil {
		h.t.Fatalf("Set(%q, %d bytes, %v) = %v", key, len(val), ttl, err)
	}
}

func (h *harness) mustGet(key string, want []byte) {
	h.t.Helper()
	got, err := h.s.Get(h.ctx(), key)
	if err != nil {
		h.t.Fatalf("Get(%q) = %v, want %d bytes", key, err, len(want))
	}
	if got == nil {
		h.t.Fatalf("Get(%q) returned a nil slice with a nil error", key)
	}
	if !bytes.Equal(got, want) {
		h.t.Fatalf("Get(%q) = %s, want %s", key, abbrev(got), abbrev(want))
	}
}

func (h *harness) mustMiss(key string) {
	h.t.Helper()
	got, err := h.s.Get(h.ctx(), key)
	if !errors.Is(err, store.ErrNotFound) {
		h.t.Fatalf("Get(%q) = %s, %v; want an error matching store.ErrNotFound", key, abbrev(got), err)
	}
}

// missing reports whether key is a miss now, failing on any other error.
func (h *harness) missing(key string) bool {
	h.t.Helper()
	_, err := h.s.Get(h.ctx(), key)
	if err == nil {
		return false
	}
	if errors.Is(err, store.ErrNotFound) {
		return true
	}
	h.t.Fatalf("Get(%q) = %v", key, err)
	return false
}

// waitMissing polls until key is a miss. The deadline is generous: the
// suite checks that expiry happens, not how fast.
func (h *harness) waitMissing(key string) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !h.missing(key) {
		if time.Now().After(deadline) {
			h.t.Fatalf("key %q still present long after its TTL", key)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func abbrev(b []byte) string {
	if b == nil {
		return "nil"
	}
	if len(b) > 40 {
		return fmt.Sprintf("%d bytes %q...", len(b), b[:40])
	}
	return fmt.Sprintf("%q", b)
}

// watchdog runs fn and fails the test if it does not return: a backend
// must honour a done context promptly, and never hang.
func (h *harness) watchdog(op string, fn func() error) error {
	h.t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		h.t.Fatalf("%s did not return within 30s", op)
		return nil
	}
}

var tests = []struct {
	name string
	fn   func(h *harness)
}{
	{"GetMiss", testGetMiss},
	{"RoundTrip", testRoundTrip},
	{"LargeValue", testLargeValue},
	{"CopiesValues", testCopiesValues},
	{"Overwrite", testOverwrite},
	{"Delete", testDelete},
	{"TTLExpiry", testTTLExpiry},
	{"TTLOverwrite", testTTLOverwrite},
	{"NegativeTTL", testNegativeTTL},
	{"InvalidKey", testInvalidKey},
	{"KeyLength", testKeyLength},
	{"Batch", testBatch},
	{"BatchEmpty", testBatchEmpty},
	{"BatchTTL", testBatchTTL},
	{"ContextCanceled", testContextCanceled},
	{"ContextDeadline", testContextDeadline},
	{"ContextNotKept", testContextNotKept},
	{"Concurrent", testConcurrent},
	{"Close", testClose},
}

func testGetMiss(h *harness) {
	h.mustMiss(h.key("never-set"))
}

func testRoundTrip(h *harness) {
	cases := []struct {
		name string
		val  []byte
	}{
		{"empty", []byte{}},
		{"text", []byte("hello, kura")},
		{"binary", []byte("a\r\nb\x00c\r\n\x00\x00END\r\n.\r\n\xff\xfe")},
		{"crlf-only", []byte("\r\n")},
		{"utf8", []byte("キャッシュ 캐시")},
	}
	for _, c := range cases {
		k := h.key(c.name)
		h.set(k, c.val, 0)
		h.mustGet(k, c.val)
	}
	// Every byte value, so no escaping bug hides.
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	h.set(h.key("all-bytes"), all, 0)
	h.mustGet(h.key("all-bytes"), all)
}

func testLargeValue(h *harness) {
	big := make([]byte, h.opts.LargeValue)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	k := h.key("large")
	h.set(k, big, 0)
	h.mustGet(k, big)
	vals, err := store.GetMany(h.ctx(), h.s, []string{k})
	if err != nil {
		h.t.Fatalf("GetMany(large) = %v", err)
	}
	if !bytes.Equal(vals[0], big) {
		h.t.Fatalf("GetMany(large) = %s, want %d bytes", abbrev(vals[0]), len(big))
	}
}

func testCopiesValues(h *harness) {
	k := h.key("k")
	buf := []byte("original")
	h.set(k, buf, 0)
	copy(buf, "XXXXXXXX") // the caller reuses its buffer
	h.mustGet(k, []byte("original"))
	got, _ := h.s.Get(h.ctx(), k)
	copy(got, "YYYYYYYY") // the caller scribbles on what it got
	h.mustGet(k, []byte("original"))

	items := []store.Item{{Key: h.key("m"), Value: []byte("batched")}}
	if err := store.SetMany(h.ctx(), h.s, items); err != nil {
		h.t.Fatalf("SetMany = %v", err)
	}
	copy(items[0].Value, "XXXXXXX")
	vals, err := store.GetMany(h.ctx(), h.s, []string{h.key("m")})
	if err != nil || string(vals[0]) != "batched" {
		h.t.Fatalf("GetMany after reusing the SetMany buffer = %s, %v", abbrev(vals[0]), err)
	}
	copy(vals[0], "YYYYYYY")
	h.mustGet(h.key("m"), []byte("batched"))

	// The Cache reuses its encode buffers once a write returned: a store
	// must have copied the value or written it out by then, on every path
	// — a context that cannot be cancelled (redisstore then sends the
	// caller's bytes without copying them), a value large enough to be
	// written by another goroutine, a fill under a lease.
	for _, n := range []int{8, 256 << 10} {
		if n > h.opts.LargeValue {
			continue
		}
		want := bytes.Repeat([]byte("v"), n)
		buf := bytes.Clone(want)
		k := h.key(fmt.Sprintf("bg-%d", n))
		if err := h.s.Set(context.Background(), k, buf, time.Minute); err != nil {
			h.t.Fatalf("Set(%d bytes, a context without Done) = %v", n, err)
		}
		clear(buf)
		h.mustGet(k, want)

		items := []store.Item{{Key: h.key(fmt.Sprintf("bgm-%d", n)), Value: bytes.Clone(want), TTL: time.Minute}}
		if err := store.SetMany(context.Background(), h.s, items); err != nil {
			h.t.Fatalf("SetMany(%d bytes, a context without Done) = %v", n, err)
		}
		clear(items[0].Value)
		h.mustGet(items[0].Key, want)

		l, ok := store.FindLeaser(h.s)
		if !ok {
			continue
		}
		lk := h.key(fmt.Sprintf("lease-%d", n))
		r, err := l.LeaseGet(h.ctx(), []string{lk}, store.LeaseOptions{TTL: time.Minute, Placeholder: placeholder()})
		if err != nil || len(r) != 1 || !r[0].Won {
			h.t.Fatalf("LeaseGet of a missing key = %+v, %v", r, err)
		}
		fills := []store.Fill{{Lease: r[0].Lease, Value: bytes.Clone(want), TTL: time.Minute}}
		if err := l.Fill(context.Background(), fills); err != nil {
			h.t.Fatalf("Fill(%d bytes) = %v", n, err)
		}
		clear(fills[0].Value)
		h.mustGet(lk, want)
	}
}

func testOverwrite(h *harness) {
	k := h.key("k")
	h.set(k, []byte("first value, longer"), 0)
	h.set(k, []byte("second"), 0)
	h.mustGet(k, []byte("second"))
	h.set(k, []byte{}, 0)
	h.mustGet(k, []byte{})
}

func testDelete(h *harness) {
	k := h.key("k")
	h.set(k, []byte("v"), 0)
	if err := h.s.Delete(h.ctx(), k); err != nil {
		h.t.Fatalf("Delete(%q) = %v", k, err)
	}
	h.mustMiss(k)
	if err := h.s.Delete(h.ctx(), k); err != nil {
		h.t.Fatalf("Delete of a deleted key = %v, want nil", err)
	}
	if err := h.s.Delete(h.ctx(), h.key("never-set")); err != nil {
		h.t.Fatalf("Delete of a missing key = %v, want nil", err)
	}
}

// testTTLExpiry checks that a key with a TTL goes away and one with TTL 0
// written at the same moment stays.
func testTTLExpiry(h *harness) {
	short, forever := h.key("short"), h.key("forever")
	h.set(short, []byte("v"), 2*time.Second)
	h.set(forever, []byte("v"), 0)
	// Readable right after the write: a TTL is a lifetime, not a delay.
	h.mustGet(short, []byte("v"))
	h.waitMissing(short)
	h.mustGet(forever, []byte("v"))
}

// testTTLOverwrite checks that a write replaces the TTL too: overwriting a
// short-lived key with TTL 0 makes it permanent.
func testTTLOverwrite(h *harness) {
	k, probe := h.key("k"), h.key("probe")
	h.set(k, []byte("short"), 1*time.Second)
	h.set(k, []byte("forever"), 0)
	h.set(probe, []byte("v"), 1*time.Second)
	h.waitMissing(probe)
	h.mustGet(k, []byte("forever"))
}

func testNegativeTTL(h *harness) {
	k := h.key("k")
	if err := h.s.Set(h.ctx(), k, []byte("v"), -time.Second); err == nil {
		h.t.Fatal("Set with a negative TTL succeeded")
	}
	h.mustMiss(k)
	err := store.SetMany(h.ctx(), h.s, []store.Item{
		{Key: h.key("ok"), Value: []byte("v")},
		{Key: k, Value: []byte("v"), TTL: -time.Second},
	})
	if err == nil {
		h.t.Fatal("SetMany with a negative TTL succeeded")
	}
	h.mustMiss(k)
	var be *store.BatchError
	if errors.As(err, &be) {
		if _, ok := be.Failed()[k]; !ok {
			h.t.Fatalf("SetMany BatchError does not name the key with the negative TTL: %v", err)
		}
		if _, ok := be.Failed()[h.key("ok")]; !ok {
			h.mustGet(h.key("ok"), []byte("v"))
		}
	}
}

func testInvalidKey(h *harness) {
	ctx := h.ctx()
	if _, err := h.s.Get(ctx, ""); !errors.Is(err, store.ErrInvalidKey) {
		h.t.Errorf("Get(\"\") = %v, want store.ErrInvalidKey", err)
	}
	if err := h.s.Set(ctx, "", []byte("v"), 0); !errors.Is(err, store.ErrInvalidKey) {
		h.t.Errorf("Set(\"\") = %v, want store.ErrInvalidKey", err)
	}
	if err := h.s.Delete(ctx, ""); !errors.Is(err, store.ErrInvalidKey) {
		h.t.Errorf("Delete(\"\") = %v, want store.ErrInvalidKey", err)
	}
	good := h.key("good")
	h.set(good, []byte("v"), 0)
	vals, err := store.GetMany(ctx, h.s, []string{good, ""})
	if !errors.Is(err, store.ErrInvalidKey) {
		h.t.Errorf("GetMany with an empty key = %v, want store.ErrInvalidKey", err)
	}
	var be *store.BatchError
	if errors.As(err, &be) && string(vals[0]) != "v" {
		h.t.Errorf("GetMany with an empty key: the valid key's value is %s, want \"v\"", abbrev(vals[0]))
	}
	err = store.SetMany(ctx, h.s, []store.Item{{Key: "", Value: []byte("v")}})
	if !errors.Is(err, store.ErrInvalidKey) {
		h.t.Errorf("SetMany with an empty key = %v, want store.ErrInvalidKey", err)
	}
	if err := store.DeleteMany(ctx, h.s, []string{""}); !errors.Is(err, store.ErrInvalidKey) {
		h.t.Errorf("DeleteMany with an empty key = %v, want store.ErrInvalidKey", err)
	}
}

func testKeyLength(h *harness) {
	n := h.opts.MaxKeyLen
	if n == 0 {
		k := h.key(strings.Repeat("k", 1024))
		h.set(k, []byte("v"), 0)
		h.mustGet(k, []byte("v"))
		return
	}
	pad := n - len(h.prefix)
	if pad < 1 {
		h.t.Fatalf("MaxKeyLen %d is shorter than the suite's key prefix", n)
	}
	k := h.key(strings.Repeat("k", pad))
	h.set(k, []byte("v"), 0)
	h.mustGet(k, []byte("v"))
	long := k + "k"
	if err := h.s.Set(h.ctx(), long, []byte("v"), 0); !errors.Is(err, store.ErrInvalidKey) {
		h.t.Errorf("Set of a %d-byte key = %v, want store.ErrInvalidKey", len(long), err)
	}
	if _, err := h.s.Get(h.ctx(), long); !errors.Is(err, store.ErrInvalidKey) {
		h.t.Errorf("Get of a %d-byte key = %v, want store.ErrInvalidKey", len(long), err)
	}
}

func batchValue(i int) []byte {
	v := []byte("value-" + strconv.Itoa(i) + "\r\n\x00")
	return append(v, bytes.Repeat([]byte{byte(i)}, i%37)...)
}

func testBatch(h *harness) {
	for _, n := range []int{1, 100, 5000} {
		h.t.Run(strconv.Itoa(n), func(t *testing.T) {
			hh := *h
			hh.t = t
			hh.prefix = h.prefix + strconv.Itoa(n) + ":"
			batch(&hh, n)
		})
	}
}

func batch(h *harness, n int) {
	ctx := h.ctx()
	items := make([]store.Item, n)
	for i := range items {
		items[i] = store.Item{Key: h.key(strconv.Itoa(i)), Value: batchValue(i)}
	}
	if err := store.SetMany(ctx, h.s, items); err != nil {
		h.t.Fatalf("SetMany(%d items) = %v", n, err)
	}
	// Ask for every key, a miss after each third, and every key a second
	// time in reverse: answers must stay aligned with the question.
	var keys []string
	var want [][]byte
	for i := range items {
		keys = append(keys, items[i].Key)
		want = append(want, items[i].Value)
		if i%3 == 0 {
			keys = append(keys, h.key("miss-"+strconv.Itoa(i)))
			want = append(want, nil)
		}
	}
	for i := len(items) - 1; i >= 0; i-- {
		keys = append(keys, items[i].Key)
		want = append(want, items[i].Value)
	}
	vals, err := store.GetMany(ctx, h.s, keys)
	if err != nil {
		h.t.Fatalf("GetMany(%d keys) = %v", len(keys), err)
	}
	checkAligned(h.t, "GetMany", keys, vals, want)

	// Single-key reads see batched writes.
	h.mustGet(items[n-1].Key, items[n-1].Value)

	// Delete every other key, plus some that never existed.
	var del []string
	for i := 0; i < n; i += 2 {
		del = append(del, items[i].Key)
	}
	del = append(del, h.key("never-1"), h.key("never-2"))
	if err := store.DeleteMany(ctx, h.s, del); err != nil {
		h.t.Fatalf("DeleteMany(%d keys) = %v", len(del), err)
	}
	keys, want = keys[:0], want[:0]
	for i := range items {
		keys = append(keys, items[i].Key)
		if i%2 == 0 {
			want = append(want, nil)
		} else {
			want = append(want, items[i].Value)
		}
	}
	vals, err = store.GetMany(ctx, h.s, keys)
	if err != nil {
		h.t.Fatalf("GetMany after DeleteMany = %v", err)
	}
	checkAligned(h.t, "GetMany after DeleteMany", keys, vals, want)
}

func checkAligned(t *testing.T, op string, keys []string, vals, want [][]byte) {
	t.Helper()
	if len(vals) != len(keys) {
		t.Fatalf("%s returned %d values for %d keys", op, len(vals), len(keys))
	}
	bad := 0
	for i := range keys {
		if (want[i] == nil) != (vals[i] == nil) || !bytes.Equal(vals[i], want[i]) {
			if bad < 5 {
				t.Errorf("%s: values[%d] (key %q) = %s, want %s", op, i, keys[i], abbrev(vals[i]), abbrev(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d values wrong", op, bad, len(keys))
	}
}

func testBatchEmpty(h *harness) {
	ctx := h.ctx()
	vals, err := store.GetMany(ctx, h.s, nil)
	if err != nil || len(vals) != 0 {
		h.t.Fatalf("GetMany(nil) = %d values, %v; want 0, nil", len(vals), err)
	}
	if err := store.SetMany(ctx, h.s, nil); err != nil {
		h.t.Fatalf("SetMany(nil) = %v", err)
	}
	if err := store.DeleteMany(ctx, h.s, nil); err != nil {
		h.t.Fatalf("DeleteMany(nil) = %v", err)
	}
	// An empty value in a batch is a hit, not a miss.
	k := h.key("empty")
	if err := store.SetMany(ctx, h.s, []store.Item{{Key: k, Value: []byte{}}}); err != nil {
		h.t.Fatalf("SetMany(empty value) = %v", err)
	}
	vals, err = store.GetMany(ctx, h.s, []string{k, h.key("miss")})
	if err != nil {
		h.t.Fatalf("GetMany = %v", err)
	}
	if vals[0] == nil || len(vals[0]) != 0 || vals[1] != nil {
		h.t.Fatalf("GetMany(empty value, miss) = [%s %s], want [\"\" nil]", abbrev(vals[0]), abbrev(vals[1]))
	}
}

func testBatchTTL(h *harness) {
	short, forever := h.key("short"), h.key("forever")
	err := store.SetMany(h.ctx(), h.s, []store.Item{
		{Key: short, Value: []byte("s"), TTL: 2 * time.Second},
		{Key: forever, Value: []byte("f")},
	})
	if err != nil {
		h.t.Fatalf("SetMany = %v", err)
	}
	// A key twice in one batch ends as the last item says, TTL included.
	twice := h.key("twice")
	err = store.SetMany(h.ctx(), h.s, []store.Item{
		{Key: twice, Value: []byte("first"), TTL: time.Second},
		{Key: twice, Value: []byte("last")},
	})
	if err != nil {
		h.t.Fatalf("SetMany with a key twice = %v", err)
	}
	h.mustGet(short, []byte("s"))
	h.waitMissing(short)
	h.mustGet(forever, []byte("f"))
	h.mustGet(twice, []byte("last"))
}

// ops returns every operation of the seam, for the context tests.
func (h *harness) ops() []struct {
	name string
	fn   func(ctx context.Context) error
} {
	k := h.key("k")
	keys := []string{h.key("a"), h.key("b"), h.key("c")}
	items := []store.Item{{Key: keys[0], Value: []byte("a")}, {Key: keys[1], Value: []byte("b")}}
	return []struct {
		name string
		fn   func(ctx context.Context) error
	}{
		{"Get", func(ctx context.Context) error { _, err := h.s.Get(ctx, k); return err }},
		{"Set", func(ctx context.Context) error { return h.s.Set(ctx, k, []byte("v"), 0) }},
		{"Delete", func(ctx context.Context) error { return h.s.Delete(ctx, k) }},
		{"GetMany", func(ctx context.Context) error { _, err := store.GetMany(ctx, h.s, keys); return err }},
		{"SetMany", func(ctx context.Context) error { return store.SetMany(ctx, h.s, items) }},
		{"DeleteMany", func(ctx context.Context) error { return store.DeleteMany(ctx, h.s, keys) }},
	}
}

func testContextCanceled(h *harness) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, op := range h.ops() {
		err := h.watchdog(op.name, func() error { return op.fn(ctx) })
		if !errors.Is(err, context.Canceled) {
			h.t.Errorf("%s with a canceled context = %v, want an error matching context.Canceled", op.name, err)
		}
	}
	// The store is still usable afterwards.
	h.set(h.key("after"), []byte("v"), 0)
	h.mustGet(h.key("after"), []byte("v"))
}

func testContextDeadline(h *harness) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for _, op := range h.ops() {
		err := h.watchdog(op.name, func() error { return op.fn(ctx) })
		if !errors.Is(err, context.DeadlineExceeded) {
			h.t.Errorf("%s past its deadline = %v, want an error matching context.DeadlineExceeded", op.name, err)
		}
	}
	// A deadline in the future does not get in the way.
	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	for _, op := range h.ops() {
		if err := op.fn(ctx); err != nil && !errors.Is(err, store.ErrNotFound) {
			h.t.Errorf("%s with a distant deadline = %v", op.name, err)
		}
	}
}

func testConcurrent(h *harness) {
	const workers, rounds = 32, 30
	shared := h.key("shared")
	h.set(shared, []byte("shared"), 0)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ctx := context.Background()
			for r := 0; r < rounds; r++ {
				k := h.key(fmt.Sprintf("w%d-%d", w, r%5))
				v := []byte(fmt.Sprintf("w%d-r%d", w, r))
				if err := h.s.Set(ctx, k, v, time.Minute); err != nil {
					errs <- fmt.Errorf("worker %d: Set = %v", w, err)
					return
				}
				got, err := h.s.Get(ctx, k)
				if err != nil || !bytes.Equal(got, v) {
					errs <- fmt.Errorf("worker %d: Get(%q) = %q, %v; want %q", w, k, got, err, v)
					return
				}
				if got, err := h.s.Get(ctx, shared); err != nil || string(got) != "shared" {
					errs <- fmt.Errorf("worker %d: Get(shared) = %q, %v", w, got, err)
					return
				}
				keys := []string{k, shared, h.key("nope")}
				vals, err := store.GetMany(ctx, h.s, keys)
				if err != nil || !bytes.Equal(vals[0], v) || string(vals[1]) != "shared" || vals[2] != nil {
					errs <- fmt.Errorf("worker %d: GetMany = %q, %v", w, vals, err)
					return
				}
				if r%7 == 0 {
					if err := h.s.Delete(ctx, k); err != nil {
						errs <- fmt.Errorf("worker %d: Delete = %v", w, err)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Error(err)
	}
}

func testClose(h *harness) {
	k := h.key("k")
	h.set(k, []byte("v"), 0)
	if err := h.s.Close(); err != nil {
		h.t.Fatalf("Close = %v", err)
	}
	*h.closed = true
	ctx := h.ctx()
	for _, op := range h.ops() {
		err := h.watchdog(op.name, func() error { return op.fn(ctx) })
		if !errors.Is(err, store.ErrClosed) {
			h.t.Errorf("%s after Close = %v, want an error matching store.ErrClosed", op.name, err)
		}
	}
	// A second Close must not panic; its error is the backend's business.
	_ = h.s.Close()
}
