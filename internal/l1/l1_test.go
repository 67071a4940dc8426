package l1

import (
	"sync"
	"testing"
	"time"
)

// TestMaxAgeIsExact: an entry of a tier with a staleness bound is served
// for at most the bound after the read that filled it began, whatever
// otter's coarser expiry clock says; a drop during the read stops the fill.
func TestMaxAgeIsExact(t *testing.T) {
	const bound = 30 * time.Millisecond
	l, err := New[string](1<<20, time.Hour, bound, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tok := l.Begin("k")
	began := time.Now()
	l.Finish("k", tok, "v", false, 1, true)
	for {
		age := time.Since(began) // the entry is at least this old in Get
		v, _, ok := l.Get("k")
		if !ok {
			break
		}
		if v != "v" {
			t.Fatalf("Get = %q", v)
		}
		if age > bound {
			t.Fatalf("entry served %v after its read began, bound %v", age, bound)
		}
		time.Sleep(time.Millisecond)
	}
	tok = l.Begin("k")
	l.Drop("k")
	l.Finish("k", tok, "old", false, 1, true)
	if _, _, ok := l.Get("k"); ok {
		t.Fatal("a read overtaken by a drop filled the tier")
	}
}

// TestStatsExact: hits, negative hits and misses from parallel readers are
// each counted once (the hit counters are striped; Stats sums them).
func TestStatsExact(t *testing.T) {
	l, err := New[int](1<<20, time.Hour, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Finish("v", l.Begin("v"), 1, false, 8, true)
	l.Finish("neg", l.Begin("neg"), 0, true, 0, true)
	const readers, each = 8, 3000
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for j := range each {
				k := [...]string{"v", "neg", "absent"}[j%3]
				if _, neg, ok := l.Get(k); ok != (k != "absent") || neg != (k == "neg") {
					t.Errorf("Get(%q) = neg %v, ok %v", k, neg, ok)
					return
				}
			}
		})
	}
	wg.Wait()
	st := l.Stats()
	if want := uint64(readers * each / 3); st.Hits != want || st.NegativeHits != want || st.Misses != want {
		t.Fatalf("Stats = %+v, want %d hits, negative hits and misses", st, want)
	}
}

// TestSharedClock: the tiers share one coarse clock, which moves while a
// tier is open, is stopped when the last one closes, and still lets
// entries expire after their TTL.
func TestSharedClock(t *testing.T) {
	a, err := New[int](1<<20, 40*time.Millisecond, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New[int](1<<20, time.Hour, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock.mu.Lock()
	refs, c := clock.refs, clock.c
	clock.mu.Unlock()
	if refs < 2 || c == nil {
		t.Fatalf("two open tiers: %d references to the clock %p", refs, c)
	}
	t0 := c.NowNano()
	a.Finish("k", a.Begin("k"), 1, false, 8, true)
	if _, _, ok := a.Get("k"); !ok {
		t.Fatal("a fresh entry missed")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, _, ok := a.Get("k"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an entry with a TTL of 40ms was still served after 10s")
		}
	}
	if c.NowNano() == t0 {
		t.Fatal("the shared clock did not move")
	}
	a.Close()
	a.Close() // a second Close releases nothing more
	clock.mu.Lock()
	if clock.refs != refs-1 || clock.c != c {
		t.Errorf("after one Close: %d references (want %d), clock %p (want %p)", clock.refs, refs-1, clock.c, c)
	}
	clock.mu.Unlock()
	b.Close()
	clock.mu.Lock()
	defer clock.mu.Unlock()
	if refs == 2 && (clock.refs != 0 || clock.c != nil) {
		t.Errorf("after the last Close: %d references, clock %p", clock.refs, clock.c)
	}
}

// TestPanickingCloneReleasesTheRead: a Clone that panics while the tier
// copies a fill stores nothing and leaves no placeholder behind (one
// leaked per key before).
func TestPanickingCloneReleasesTheRead(t *testing.T) {
	l, err := New[[]int](1<<20, time.Hour, 0, func([]int) []int { panic("clone") })
	if err != nil {
		t.Fatal(err)
	}
	tok := l.Begin("k")
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the Clone's panic was swallowed")
			}
		}()
		l.Finish("k", tok, []int{1}, false, 8, true)
	}()
	s := l.shard("k")
	s.mu.Lock()
	n := len(s.pending)
	s.mu.Unlock()
	if n != 0 {
		t.Errorf("%d placeholders left after a panicking Clone, want 0", n)
	}
	if _, ok := l.c.GetIfPresent("k"); ok {
		t.Error("a panicking Clone filled the tier")
	}
}
