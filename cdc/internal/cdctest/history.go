package cdctest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/kuracache/kura"
)

// Write is one committed plain-SQL write of a key: the version it
// wrote and its place in the source's stream (an LSN, a Kafka offset).
type Write struct {
	Version int64
	Pos     uint64
}

// Read is one read through kura.
type Read struct {
	Key        int64
	Backend    string
	Start, End time.Time
	Value      int64         // -1: absent
	Clock      time.Duration // how far Start may be off the Go clock (another process's)
}

// Report is the change stream saying, at At, that every write up to Pos
// has been applied on every target.
type Report struct {
	At  time.Time
	Pos uint64
}

// Violation is a read that returned a version older than one the stream
// had reported applied before the read began.
type Violation struct {
	Read Read
	// Must is the version the read had to return at least; Applied the
	// highest position reported before the read began.
	Must    int64
	Applied uint64
}

// Check is the per-read history checker of the change-stream tests: a
// read that starts after the stream reported a write's position applied
// must return that write's version or a later one. slack widens the
// bound for a read path that docs/leases.md allows to lag (an L1's
// MaxStaleness): only reports from slack before the read's start bind it.
// writes is indexed by key; reports may come in any order.
func Check(reads []Read, writes [][]Write, reports []Report, slack time.Duration) []Violation {
	reports = append([]Report(nil), reports...)
	sort.Slice(reports, func(i, j int) bool { return reports[i].At.Before(reports[j].At) })
	// for each report, the highest position reported up to it
	maxPos := make([]uint64, len(reports))
	for i, r := range reports {
		maxPos[i] = r.Pos
		if i > 0 {
			maxPos[i] = max(maxPos[i], maxPos[i-1])
		}
	}
	var out []Violation
	for _, rd := range reads {
		bound := rd.Start.Add(-slack - rd.Clock)
		i := sort.Search(len(reports), func(i int) bool { return !reports[i].At.Before(bound) }) - 1
		if i < 0 || rd.Key < 0 || rd.Key >= int64(len(writes)) {
			continue
		}
		applied := maxPos[i]
		var must int64 = -1
		for _, w := range writes[rd.Key] {
			if w.Pos <= applied {
				must = max(must, w.Version)
			}
		}
		if rd.Value < must {
			out = append(out, Violation{Read: rd, Must: must, Applied: applied})
		}
	}
	return out
}

// Stale is the end check of the crash tests: for ids 1 to rows, a value
// a view still caches must equal what load reads from the database (or be
// absent). It returns one line per cached value that does not.
func Stale(tb testing.TB, views []*kura.Keyed[int64, int64], rows int64, load func(context.Context, int64) (int64, error)) []string {
	tb.Helper()
	ctx := context.Background()
	var stale []string
	for id := int64(1); id <= rows; id++ {
		want, err := load(ctx, id)
		if err != nil {
			tb.Fatal(err)
		}
		for _, v := range views {
			got, err := v.Get(ctx, id)
			if errors.Is(err, kura.ErrNotFound) {
				continue
			}
			if err != nil {
				tb.Fatalf("%s: %v", v.Key(id), err)
			}
			if got != want {
				stale = append(stale, fmt.Sprintf("%s in %s: cached %d, database %d", v.Key(id), v.Cache().Name(), got, want))
			}
		}
	}
	return stale
}

// Reads fetches random keys 1 to keys through view, loading misses with
// load, until ctx ends, and returns the reads that succeeded: the readers
// of the history tests.
func Reads(ctx context.Context, backend string, view *kura.Keyed[int64, int64], keys int, load func(context.Context, int64) (int64, error)) []Read {
	var out []Read
	for ctx.Err() == nil {
		id := int64(1 + rand.IntN(keys))
		start := time.Now()
		v, err := view.Fetch(ctx, id, load)
		end := time.Now()
		if err != nil {
			continue
		}
		out = append(out, Read{Key: id, Backend: backend, Start: start, End: end, Value: v})
	}
	return out
}
