package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kuracache/kura/store"
)

// The lease tests run for stores that implement store.Leaser (found
// through wrappers) and are skipped for the others.
var leaseTests = []struct {
	name string
	fn   func(h *harness)
}{
	{"LeaseOneWinner", testLeaseOneWinner},
	{"LeaseFillAfterInvalidate", testLeaseFillAfterInvalidate},
	{"LeaseRelease", testLeaseRelease},
	{"LeaseExpires", testLeaseExpires},
	{"LeaseBatch", testLeaseBatch},
	{"LeaseHitIsPlain", testLeaseHitIsPlain},
}

func (h *harness) leaser() store.Leaser {
	h.t.Helper()
	l, ok := store.FindLeaser(h.s)
	if !ok {
		h.t.Skip("store has no lease capability")
	}
	return l
}

func placeholder() []byte { return fmt.Appendf(nil, "storetest-lease:%016x", rand.Uint64()) }

// leaseOne takes (or fails to take) the lease on key.
func (h *harness) leaseOne(l store.Leaser, key string, ttl time.Duration) (store.LeaseResult, []byte) {
	h.t.Helper()
	ph := placeholder()
	res, err := l.LeaseGet(h.ctx(), []string{key}, store.LeaseOptions{TTL: ttl, Placeholder: ph})
	if err != nil {
		h.t.Fatalf("LeaseGet(%q) = %v", key, err)
	}
	if len(res) != 1 {
		h.t.Fatalf("LeaseGet of 1 key returned %d results", len(res))
	}
	return res[0], ph
}

// notWon requires a second reader of a leased key to see the lease: Held,
// or (stores that write placeholders) the first reader's placeholder.
func (h *harness) notWon(r store.LeaseResult, firstPlaceholder []byte) {
	h.t.Helper()
	if r.Won {
		h.t.Fatal("a second reader won a lease that is held")
	}
	if !r.Held && !bytes.Equal(r.Value, firstPlaceholder) {
		h.t.Fatalf("a second reader saw neither Held nor the placeholder: %+v", r)
	}
}

func testLeaseOneWinner(h *harness) {
	l := h.leaser()
	k := h.key("k")
	first, ph := h.leaseOne(l, k, 30*time.Second)
	if !first.Won || first.Value != nil {
		h.t.Fatalf("the first reader of a missing key: %+v, want Won and no value", first)
	}
	second, _ := h.leaseOne(l, k, 30*time.Second)
	h.notWon(second, ph)
	if err := l.Fill(h.ctx(), []store.Fill{{Lease: first.Lease, Value: []byte("v1"), TTL: time.Minute}}); err != nil {
		h.t.Fatalf("Fill under a held lease = %v", err)
	}
	h.mustGet(k, []byte("v1"))
	third, _ := h.leaseOne(l, k, 30*time.Second)
	if third.Won || third.Held || !bytes.Equal(third.Value, []byte("v1")) {
		h.t.Fatalf("a reader after the fill: %+v, want the value and no lease", third)
	}
	// A second fill with the spent lease is refused: the key holds a
	// value now, not the lease.
	err := l.Fill(h.ctx(), []store.Fill{{Lease: first.Lease, Value: []byte("v2"), TTL: time.Minute}})
	if !errors.Is(err, store.ErrNotStored) {
		h.t.Fatalf("Fill with a spent lease = %v, want ErrNotStored", err)
	}
	h.mustGet(k, []byte("v1"))
}

func testLeaseFillAfterInvalidate(h *harness) {
	l := h.leaser()
	for _, stale := range []time.Duration{0, 30 * time.Second} {
		k := h.key(fmt.Sprintf("k-%v", stale))
		first, _ := h.leaseOne(l, k, 30*time.Second)
		if !first.Won {
			h.t.Fatalf("no lease on a missing key: %+v", first)
		}
		if err := l.Invalidate(h.ctx(), []string{k}, stale); err != nil {
			h.t.Fatalf("Invalidate = %v", err)
		}
		err := l.Fill(h.ctx(), []store.Fill{{Lease: first.Lease, Value: []byte("old"), TTL: time.Minute}})
		if !errors.Is(err, store.ErrNotStored) {
			h.t.Fatalf("a fill that raced Invalidate(stale %v) = %v, want ErrNotStored", stale, err)
		}
		var be *store.BatchError
		if !errors.As(err, &be) || len(be.Errors) != 1 || be.Errors[0].Key != k {
			h.t.Fatalf("the lost fill is not reported per key: %v", err)
		}
		// The next reader takes a new lease and its fill lands.
		next, _ := h.leaseOne(l, k, 30*time.Second)
		if !next.Won {
			h.t.Fatalf("after Invalidate, the next reader: %+v, want a lease", next)
		}
		if err := l.Fill(h.ctx(), []store.Fill{{Lease: next.Lease, Value: []byte("new"), TTL: time.Minute}}); err != nil {
			h.t.Fatalf("Fill under the new lease = %v", err)
		}
		h.mustGet(k, []byte("new"))
	}
	// Stale-while-revalidate: a value invalidated with stale > 0 either
	// disappears (stores without it) or stays marked stale, with exactly
	// one reader handed the refill.
	k := h.key("swr")
	h.set(k, []byte("old"), time.Minute)
	if err := l.Invalidate(h.ctx(), []string{k}, 30*time.Second); err != nil {
		h.t.Fatal(err)
	}
	a, _ := h.leaseOne(l, k, 30*time.Second)
	b, _ := h.leaseOne(l, k, 30*time.Second)
	if a.Value != nil && !(a.Stale && bytes.Equal(a.Value, []byte("old"))) {
		h.t.Fatalf("an invalidated value came back as fresh: %+v", a)
	}
	if !a.Won || b.Won {
		h.t.Fatalf("after Invalidate: first %+v, second %+v; want exactly the first to win", a, b)
	}
	if err := l.Fill(h.ctx(), []store.Fill{{Lease: a.Lease, Value: []byte("new"), TTL: time.Minute}}); err != nil {
		h.t.Fatalf("refill of an invalidated key = %v", err)
	}
	c, _ := h.leaseOne(l, k, 30*time.Second)
	if c.Stale || c.Won || !bytes.Equal(c.Value, []byte("new")) {
		h.t.Fatalf("after the refill: %+v, want the fresh value", c)
	}
}

func testLeaseRelease(h *harness) {
	l := h.leaser()
	k := h.key("k")
	first, _ := h.leaseOne(l, k, 30*time.Second)
	if !first.Won {
		h.t.Fatalf("no lease on a missing key: %+v", first)
	}
	if err := l.Release(h.ctx(), []store.Lease{first.Lease}); err != nil {
		h.t.Fatalf("Release = %v", err)
	}
	next, _ := h.leaseOne(l, k, 30*time.Second)
	if !next.Won {
		h.t.Fatalf("after Release, the next reader: %+v, want the lease", next)
	}
	// Releasing a lease that was lost leaves the new holder alone.
	if err := l.Release(h.ctx(), []store.Lease{first.Lease}); err != nil {
		h.t.Fatalf("Release of a lost lease = %v", err)
	}
	if err := l.Fill(h.ctx(), []store.Fill{{Lease: next.Lease, Value: []byte("v"), TTL: time.Minute}}); err != nil {
		h.t.Fatalf("the new holder's fill after an old Release = %v", err)
	}
	h.mustGet(k, []byte("v"))
}

// testLeaseExpires: a holder that dies leaves a lease that expires; then
// another reader takes over. It polls with a generous deadline.
func testLeaseExpires(h *harness) {
	l := h.leaser()
	k := h.key("k")
	first, _ := h.leaseOne(l, k, time.Second)
	if !first.Won {
		h.t.Fatalf("no lease on a missing key: %+v", first)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, _ := h.leaseOne(l, k, time.Second)
		if r.Won {
			break
		}
		if time.Now().After(deadline) {
			h.t.Fatal("a lease of 1s was still held 20s later")
		}
		time.Sleep(100 * time.Millisecond)
	}
	err := l.Fill(h.ctx(), []store.Fill{{Lease: first.Lease, Value: []byte("late"), TTL: time.Minute}})
	if !errors.Is(err, store.ErrNotStored) {
		h.t.Fatalf("a fill under an expired lease that another reader took over = %v, want ErrNotStored", err)
	}
}

func testLeaseBatch(h *harness) {
	l := h.leaser()
	keys := make([]string, 60)
	for i := range keys {
		keys[i] = h.key(fmt.Sprintf("k%d", i))
	}
	h.set(keys[0], []byte("cached"), time.Minute)
	ph := placeholder()
	res, err := l.LeaseGet(h.ctx(), keys, store.LeaseOptions{TTL: 30 * time.Second, Placeholder: ph})
	if err != nil {
		h.t.Fatalf("LeaseGet of %d keys = %v", len(keys), err)
	}
	if res[0].Won || !bytes.Equal(res[0].Value, []byte("cached")) {
		h.t.Fatalf("a cached key in a lease batch: %+v", res[0])
	}
	fills := make([]store.Fill, 0, len(keys))
	for i, r := range res[1:] {
		if !r.Won {
			h.t.Fatalf("missing key %q: %+v, want a lease", keys[i+1], r)
		}
		fills = append(fills, store.Fill{Lease: r.Lease, Value: []byte(keys[i+1]), TTL: time.Minute})
	}
	again, err := l.LeaseGet(h.ctx(), keys[1:], store.LeaseOptions{TTL: 30 * time.Second, Placeholder: placeholder()})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range again {
		h.notWon(r, ph)
	}
	// Invalidate two keys: their fills are dropped, the rest land.
	if err := l.Invalidate(h.ctx(), keys[1:3], 0); err != nil {
		h.t.Fatal(err)
	}
	err = l.Fill(h.ctx(), fills)
	var be *store.BatchError
	if !errors.As(err, &be) || len(be.Failed()) != 2 {
		h.t.Fatalf("Fill after 2 of %d leases were invalidated = %v, want those 2 reported", len(fills), err)
	}
	for _, k := range keys[1:3] {
		if !errors.Is(be.Failed()[k], store.ErrNotStored) {
			h.t.Fatalf("key %q: %v, want ErrNotStored", k, be.Failed()[k])
		}
		h.mustMiss(k)
	}
	for _, k := range keys[3:] {
		h.mustGet(k, []byte(k))
	}
}

// testLeaseHitIsPlain: reading a cached key hands out no lease and leaves
// the value alone, however many times it is read.
func testLeaseHitIsPlain(h *harness) {
	l := h.leaser()
	k := h.key("k")
	h.set(k, []byte("v"), time.Minute)
	for i := 0; i < 3; i++ {
		r, _ := h.leaseOne(l, k, 30*time.Second)
		if r.Won || r.Held || r.Stale || !bytes.Equal(r.Value, []byte("v")) {
			h.t.Fatalf("read %d of a cached key: %+v", i, r)
		}
	}
	h.mustGet(k, []byte("v"))
}
