package history

import (
	"strings"
	"testing"
	"time"
)

// ms0 turns milliseconds into the nanosecond times of a history.
func at(ms float64) int64 { return int64(ms * 1e6) }

func op(k Kind, proc int, start, end float64, ver int64, load string) Op {
	return Op{Kind: k, Proc: proc, Key: "k", Start: at(start), End: at(end), Ver: ver, Load: load, Via: "Fetch"}
}

// staleAfterInvalidate: a load reads v0, the source becomes v1, the key
// is invalidated, and a read that starts after that is served v0.
func staleAfterInvalidate() []Op {
	return []Op{
		op(Load, 1, 0, 1, 0, "a"),
		op(Write, 0, 2, 3, 1, ""),
		op(Invalidate, 0, 4, 5, 0, ""),
		op(Read, 2, 6, 7, 0, "a"),
	}
}

func TestLeasesProperty(t *testing.T) {
	p := Property{Leases: true}
	for _, tc := range []struct {
		name string
		ops  []Op
		ok   bool
	}{
		{"fresh load after the invalidation", append(staleAfterInvalidate()[:3], op(Load, 1, 5.5, 6, 1, "b"), op(Read, 2, 6, 7, 1, "b")), true},
		{"stale after the invalidation", staleAfterInvalidate(), false},
		{"read overlapping the invalidation", []Op{
			op(Load, 1, 0, 1, 0, "a"), op(Write, 0, 2, 3, 1, ""), op(Invalidate, 0, 4, 8, 0, ""), op(Read, 2, 6, 7, 0, "a"),
		}, true},
		{"load overlapping the invalidation, after the write", []Op{
			op(Write, 0, 2, 3, 1, ""), op(Load, 1, 3.5, 4.5, 1, "a"), op(Invalidate, 0, 4, 5, 0, ""), op(Read, 2, 6, 7, 1, "a"),
		}, true},
		{"load overlapping the invalidation, before the write", []Op{
			op(Load, 1, 1, 4.5, 0, "a"), op(Write, 0, 2, 3, 1, ""), op(Invalidate, 0, 4, 5, 0, ""), op(Read, 2, 6, 7, 0, "a"),
		}, false},
		{"load wholly between the write and the invalidation", []Op{
			op(Write, 0, 2, 3, 1, ""), op(Load, 1, 3.2, 3.8, 1, "a"), op(Invalidate, 0, 4, 5, 0, ""), op(Read, 2, 6, 7, 1, "a"),
		}, false},
		{"a load of a version the source never had", []Op{op(Load, 1, 0, 1, 5, "a"), op(Read, 2, 2, 3, 5, "a")}, false},
		{"a read of a value no load made", []Op{op(Read, 2, 2, 3, 0, "zz")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.ops, p, 10*time.Second)
			if r.OK() != tc.ok {
				t.Fatalf("OK = %v, want %v; failures:\n%s", r.OK(), tc.ok, strings.Join(r.Failures, "\n"))
			}
			if !tc.ok {
				t.Logf("the failure as printed:\n%s", strings.Join(r.Failures, "\n"))
			}
		})
	}
}

func TestStaleCount(t *testing.T) {
	r := Check(staleAfterInvalidate(), Property{Leases: true}, time.Second)
	if r.AfterInvalidate != 1 || r.Stale != 1 || r.Reads != 1 {
		t.Fatalf("after=%d stale=%d reads=%d, want 1 1 1", r.AfterInvalidate, r.Stale, r.Reads)
	}
	if !strings.Contains(r.Failures[0], "returned v0 of load a, which read the source at 0.000-1.000 ms") {
		t.Fatalf("the failure does not name the stale read:\n%s", r.Failures[0])
	}
}

func TestWindow(t *testing.T) {
	ops := staleAfterInvalidate()
	if r := Check(ops, Property{Leases: true, Window: 2 * time.Millisecond}, time.Second); !r.OK() {
		t.Fatalf("a read 1 ms after the invalidation is inside a 2 ms window:\n%s", r.Failures)
	}
	if r := Check(ops, Property{Leases: true, Window: 500 * time.Microsecond}, time.Second); r.OK() {
		t.Fatal("a read 1 ms after the invalidation is outside a 0.5 ms window")
	}
}

func TestLeasesOff(t *testing.T) {
	p := Property{}
	if r := Check(staleAfterInvalidate(), p, time.Second); !r.OK() {
		t.Fatalf("leases off allow a stale value the source held:\n%s", r.Failures)
	}
	// A version from the future: the read returns before the source has it.
	ops := []Op{op(Write, 0, 10, 11, 1, ""), op(Load, 1, 12, 13, 1, "a"), op(Read, 2, 5, 6, 1, "a")}
	if r := Check(ops, p, time.Second); r.OK() {
		t.Fatal("a read of v1 that returned before the source held v1 passed")
	}
}

func TestTrackedL1(t *testing.T) {
	p := Property{Leases: true, L1: true}
	base := []Op{
		op(Load, 1, 0, 1, 0, "a"),
		op(Tracked, 2, 1.2, 1.5, 0, "a"),
		op(Write, 0, 2, 3, 1, ""),
		op(Invalidate, 0, 4, 5, 0, ""),
	}
	// Before the report: the L1 may still serve v0.
	ok := append(append([]Op{}, base...), op(Read, 2, 6, 7, 0, "a"))
	if r := Check(ok, p, time.Second); !r.OK() {
		t.Fatalf("an L1 hit before its process handled the report failed:\n%s", r.Failures)
	}
	// With a staleness bound instead of reports: 4.5 ms after the store read.
	ps := Property{Leases: true, L1: true, Staleness: 5 * time.Millisecond}
	if r := Check(ok, ps, time.Second); !r.OK() {
		t.Fatalf("an L1 hit 4.5 ms after its store read, bound 5 ms, failed:\n%s", r.Failures)
	}
	ps.Staleness = 4 * time.Millisecond
	if r := Check(ok, ps, time.Second); r.OK() {
		t.Fatal("an L1 hit 4.5 ms after its store read passed a 4 ms bound")
	}
	// A store read for the L1 is itself held to the property.
	late := []Op{op(Load, 1, 0, 1, 0, "a"), op(Write, 0, 2, 3, 1, ""), op(Invalidate, 0, 4, 5, 0, ""), op(Tracked, 2, 6, 6.5, 0, "a"), op(Read, 2, 6.6, 7, 0, "a")}
	if r := Check(late, p, time.Second); r.OK() {
		t.Fatal("an L1 store read of a value invalidated before it began passed")
	}
	// Another process never read it into its L1.
	other := append(append([]Op{}, base...), op(Read, 3, 6, 7, 0, "a"))
	if r := Check(other, p, time.Second); r.OK() {
		t.Fatal("a process whose L1 never held v0 was served v0 after the invalidation")
	}
	// After the report was handled: never.
	for _, rep := range []Op{op(Report, 2, 5.2, 5.5, 0, ""), {Kind: Report, Proc: 2, Flush: true, Start: at(5.2), End: at(5.5)}} {
		bad := append(append([]Op{}, base...), rep, op(Read, 2, 6, 7, 0, "a"))
		if r := Check(bad, p, time.Second); r.OK() {
			t.Fatalf("an L1 hit after its process handled %+v passed", rep)
		}
	}
}

// TestOverlappingLoads shows why the model is not a plain register: two
// callers load v0 at once (a lease that timed out, or leases off), each
// is served its own load while the other's is cached, so readers see a,
// b, a. A register holding "the value of the latest fill" rejects that
// history; the docs allow it (both loads read the current source).
func TestOverlappingLoads(t *testing.T) {
	ops := []Op{
		op(Load, 1, 0, 1, 0, "a"),
		op(Load, 2, 0.5, 1.5, 0, "b"),
		op(Read, 3, 2, 3, 0, "a"),
		op(Read, 3, 3, 4, 0, "b"),
		op(Read, 3, 4, 5, 0, "a"),
	}
	allowed(t, ops, Property{Leases: true}, "two loads of the same version, read in turn")
}

// allowed fails the test unless ops satisfy p.
func allowed(t *testing.T, ops []Op, p Property, what string) {
	t.Helper()
	if r := Check(ops, p, time.Second); !r.OK() {
		t.Fatalf("%s: the docs allow it, the check failed:\n%s", what, r.Failures)
	}
}

func TestAddSorted(t *testing.T) {
	if a, b := add(add("", "x"), "a"), add(add("", "a"), "x"); a != b || a != "|a|x|" {
		t.Fatalf("add is not canonical: %q %q", a, b)
	}
}

// TestPerReadNotRegister: a read that overlaps an Invalidate returns the
// old value although another read, which ended before it began, already
// returned the new one. The docs allow it (the Invalidate had not
// returned); a linearizable register would not.
func TestPerReadNotRegister(t *testing.T) {
	ops := []Op{
		op(Load, 1, 0, 1, 0, "a"),
		op(Write, 0, 2, 3, 1, ""),
		op(Invalidate, 0, 4, 20, 0, ""),
		op(Load, 2, 6, 7, 1, "b"),
		op(Read, 2, 5, 8, 1, "b"),
		op(Read, 3, 9, 10, 0, "a"),
	}
	allowed(t, ops, Property{Leases: true}, "an old value during an Invalidate, after a new one")
}
