package meta_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache/meta"
)

func newClient(t *testing.T, cfg servers.MemcachedConfig) (*meta.Client, *servers.Memcached) {
	t.Helper()
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Memcached(t, cfg)
	cl := meta.NewClient(srv.Addr, meta.Options{})
	t.Cleanup(func() { cl.Close() })
	return cl, srv
}

func TestClientBasics(t *testing.T) {
	cl, _ := newClient(t, servers.MemcachedConfig{})
	ctx := context.Background()
	for _, key := range []string{"plain", "with space", "ctl\r\nmn", strings.Repeat("long", 100), "\x00nul"} {
		if _, err := cl.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get(%q) before Set = %v", key, err)
		}
		if err := cl.Set(ctx, key, []byte("v:"+key), 0); err != nil {
			t.Fatalf("Set(%q): %v", key, err)
		}
		got, err := cl.Get(ctx, key)
		if err != nil || string(got) != "v:"+key {
			t.Fatalf("Get(%q) = %q, %v", key, got, err)
		}
		if err := cl.Touch(ctx, key, time.Hour); err != nil {
			t.Fatalf("Touch(%q): %v", key, err)
		}
		if err := cl.Delete(ctx, key); err != nil {
			t.Fatalf("Delete(%q): %v", key, err)
		}
		if err := cl.Delete(ctx, key); err != nil {
			t.Fatalf("second Delete(%q): %v", key, err)
		}
	}
	// Distinct keys that could collide in a careless encoding.
	if err := cl.Set(ctx, "a b", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Get(ctx, "a_b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a_b aliased a b: %v", err)
	}
	if err := cl.Noop(ctx); err != nil {
		t.Fatal(err)
	}
	if cl.ItemSizeMax() != 1<<20 {
		t.Errorf("ItemSizeMax = %d, want %d", cl.ItemSizeMax(), 1<<20)
	}
	if err := cl.Set(ctx, "", nil, 0); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
}

// TestTTLBeyond30Days stores with TTLs memcached reads as absolute times
// and checks the remaining TTL the server reports.
func TestTTLBeyond30Days(t *testing.T) {
	cl, _ := newClient(t, servers.MemcachedConfig{})
	ctx := context.Background()
	for _, ttl := range []time.Duration{time.Hour, 30 * 24 * time.Hour, 31 * 24 * time.Hour, 365 * 24 * time.Hour} {
		key := fmt.Sprintf("ttl:%v", ttl)
		if err := cl.Set(ctx, key, []byte("x"), ttl); err != nil {
			t.Fatal(err)
		}
		var res meta.Response
		if err := cl.Do(ctx, &meta.Request{Cmd: meta.Get, Key: key, ReturnTTL: true}, &res); err != nil {
			t.Fatal(err)
		}
		// memcached's clock ticks once a second and lags the wall clock by
		// up to a second, so an absolute expiry can read one second long.
		want := int64(ttl / time.Second)
		if res.Status != meta.HD || res.TTL < want-5 || res.TTL > want+1 {
			t.Errorf("ttl %v: server reports %v t%d, want about %d", ttl, res.Status, res.TTL, want)
		}
	}
}

// TestTTLPast2038IsForever stores with a TTL whose absolute expiry lies past
// memcached's signed 32-bit exptime: memcached answers HD to such a set and
// drops the item at once, so the client must send "no expiry" instead.
func TestTTLPast2038IsForever(t *testing.T) {
	cl, _ := newClient(t, servers.MemcachedConfig{})
	ctx := context.Background()
	past := time.Until(time.Unix(math.MaxInt32, 0)) + 365*24*time.Hour
	if err := cl.Set(ctx, "ttl:2038", []byte("x"), past); err != nil {
		t.Fatal(err)
	}
	var res meta.Response
	if err := cl.Do(ctx, &meta.Request{Cmd: meta.Get, Key: "ttl:2038", ReturnTTL: true}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != meta.HD || res.TTL != -1 {
		t.Fatalf("a TTL ending past 2038: server reports %v t%d, want the item kept with no expiry (t-1)", res.Status, res.TTL)
	}
	if got := meta.TTL(past, time.Now()); got != 0 {
		t.Fatalf("TTL(%v) = %d, want 0 (no expiry)", past, got)
	}
}

// TestLeaseFlags shows the design for stampede protection: the first mg
// with N wins (W), the next sees Z; md with I marks stale (X) and hands
// out one more win.
func TestLeaseFlags(t *testing.T) {
	cl, _ := newClient(t, servers.MemcachedConfig{})
	ctx := context.Background()
	var r1, r2 meta.Response
	req := meta.Request{Cmd: meta.Get, Key: "lease", ReturnValue: true, ReturnCAS: true, Vivify: 30}
	if err := cl.Do(ctx, &req, &r1); err != nil {
		t.Fatal(err)
	}
	if err := cl.Do(ctx, &req, &r2); err != nil {
		t.Fatal(err)
	}
	if !r1.Won || r2.Won || !r2.AlreadyWon {
		t.Fatalf("first %+v, second %+v", r1, r2)
	}
	// The winner fills with CAS, so a fill racing an invalidation loses.
	var rs meta.Response
	set := meta.Request{Cmd: meta.Set, Key: "lease", Value: []byte("v1"), CompareCAS: r1.CAS, TTL: 60}
	if err := cl.Do(ctx, &set, &rs); err != nil || rs.Status != meta.HD {
		t.Fatalf("CAS fill: %v %v", rs.Status, err)
	}
	if err := cl.Do(ctx, &set, &rs); err != nil || rs.Status != meta.EX {
		t.Fatalf("second CAS fill with the old token: %v %v, want EX", rs.Status, err)
	}
	if err := cl.Do(ctx, &meta.Request{Cmd: meta.Delete, Key: "lease", Invalidate: true, TTL: 30}, &rs); err != nil || rs.Status != meta.HD {
		t.Fatalf("md I: %v %v", rs.Status, err)
	}
	if err := cl.Do(ctx, &req, &r1); err != nil || !r1.Stale || !r1.Won || string(r1.Value) != "v1" {
		t.Fatalf("after invalidation: %+v %v", r1, err)
	}
	var ra meta.Response
	if err := cl.Do(ctx, &meta.Request{Cmd: meta.Arith, Key: "ctr", Vivify: 60, Initial: 10, Delta: 5, ReturnValue: true}, &ra); err != nil {
		t.Fatal(err)
	}
	if err := cl.Do(ctx, &meta.Request{Cmd: meta.Arith, Key: "ctr", Delta: 5, ReturnValue: true}, &ra); err != nil || string(ra.Value) != "15" {
		t.Fatalf("ma: %q %v", ra.Value, err)
	}
}

// TestExecAttribution mixes quiet sets that the server refuses for size
// (under item_size_max, over it once memcached adds its item header) with
// ones it stores, and an add that is not stored: every failure names its
// own request.
func TestExecAttribution(t *testing.T) {
	cl, _ := newClient(t, servers.MemcachedConfig{MaxItemSize: 256 << 10, Args: []string{"-o", "slab_chunk_max=131072"}})
	ctx := context.Background()
	if err := cl.Noop(ctx); err != nil { // reads item_size_max
		t.Fatal(err)
	}
	limit := cl.ItemSizeMax()
	if err := cl.Set(ctx, "exists", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	var reqs []meta.Request
	want := map[int]error{}
	for i := 0; i < 200; i++ {
		r := meta.Request{Cmd: meta.Set, Key: fmt.Sprintf("k%d", i), Value: []byte("small"), Quiet: true}
		switch i % 50 {
		case 7:
			r.Value = make([]byte, limit-20) // under the limit, refused by the server
			want[i] = store.ErrValueTooLarge
		case 8:
			r.Value = make([]byte, limit+1) // refused before sending
			want[i] = store.ErrValueTooLarge
		case 9:
			r.Key = "exists"
			r.Mode = meta.ModeAdd
		case 10:
			r.Key = ""
			want[i] = store.ErrInvalidKey
		}
		reqs = append(reqs, r)
	}
	got := map[int]error{}
	ns := map[int]bool{}
	err := cl.Exec(ctx, reqs, func(i int, res *meta.Response, err error) {
		if err != nil {
			got[i] = err
			return
		}
		if res.Status == meta.NS {
			ns[i] = true
			return
		}
		t.Errorf("request %d: unexpected answer %v", i, res.Status)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if !errors.Is(got[i], w) {
			t.Errorf("request %d: got %v, want %v", i, got[i], w)
		}
	}
	for i, e := range got {
		if want[i] == nil {
			t.Errorf("request %d failed but should not: %v", i, e)
		}
		if errors.Is(e, meta.ErrAmbiguous) {
			t.Errorf("request %d: ambiguous: %v", i, e)
		}
	}
	if len(ns) != 4 {
		t.Errorf("NS answers for %v, want the 4 adds", ns)
	}
	for i := range reqs {
		if want[i] != nil || reqs[i].Key == "exists" {
			continue
		}
		v, err := cl.Get(ctx, reqs[i].Key)
		if err != nil || !bytes.Equal(v, reqs[i].Value) {
			t.Fatalf("%s not stored: %v", reqs[i].Key, err)
		}
	}
	// The connection is still good: nothing was left on the stream.
	if err := cl.Noop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestExecLarge sends 50,000 quiet sets of 1 KiB, then 50,000 gets, on
// one connection each: reading while writing keeps both sides moving.
func TestExecLarge(t *testing.T) {
	cl, _ := newClient(t, servers.MemcachedConfig{MemoryMB: 256})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 50000
	val := bytes.Repeat([]byte("v"), 1024)
	reqs := make([]meta.Request, n)
	for i := range reqs {
		reqs[i] = meta.Request{Cmd: meta.Set, Key: fmt.Sprintf("big:%d", i), Value: val, Quiet: true}
	}
	fails := 0
	if err := cl.Exec(ctx, reqs, func(i int, res *meta.Response, err error) { fails++ }); err != nil || fails != 0 {
		t.Fatalf("set: %v, %d failures", err, fails)
	}
	for i := range reqs {
		reqs[i] = meta.Request{Cmd: meta.Get, Key: reqs[i].Key, ReturnValue: true, Quiet: true}
	}
	hits := 0
	err := cl.Exec(ctx, reqs, func(i int, res *meta.Response, err error) {
		if err != nil || res.Status != meta.VA || len(res.Value) != len(val) {
			t.Errorf("get %d: %v %v", i, res, err)
			return
		}
		hits++
	})
	if err != nil || hits != n {
		t.Fatalf("get: %v, %d hits of %d", err, hits, n)
	}
}

// TestPausedServer checks that a context deadline ends a call to a
// SIGSTOPped server promptly, with an error that says what happened, and
// that the connection is not reused afterwards.
func TestPausedServer(t *testing.T) {
	cl, srv := newClient(t, servers.MemcachedConfig{})
	if err := cl.Noop(context.Background()); err != nil {
		t.Fatal(err)
	}
	pause(t, srv)
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := cl.Get(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), srv.Addr) {
		t.Fatalf("Get on a paused server = %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %v", el)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel2() }()
	reqs := []meta.Request{{Cmd: meta.Get, Key: "a", Quiet: true}}
	var got error
	err = cl.Exec(ctx2, reqs, func(i int, res *meta.Response, err error) { got = err })
	if !errors.Is(err, context.Canceled) || !errors.Is(got, context.Canceled) {
		t.Fatalf("Exec on a paused server after cancel = %v / %v", err, got)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Noop(context.Background()); err != nil {
		t.Fatalf("after resume: %v", err)
	}
}

// pause SIGSTOPs srv; servers.Proc.Pause waits until every thread is
// stopped, so no worker answers one more request.
func pause(t *testing.T, srv *servers.Memcached) {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
}
