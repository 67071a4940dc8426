package readthrough

import (
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/store"
)

// countBatchErr counts the keys a batch call failed: those named in a
// *store.BatchError, or all n when the whole call failed.
func (p *Pipeline[V]) countBatchErr(err error, n int) {
	if err == nil {
		return
	}
	var be *store.BatchError
	if errors.As(err, &be) {
		n = len(be.Errors)
	}
	p.st.StoreErrs.Add(uint64(n))
}

// Op is a timed operation, an index into Counters.Latency.
type Op int

// The timed operations. Store operations are timed at the store call;
// OpLoad times the caller's loader.
const (
	OpGet Op = iota
	OpSet
	OpDelete
	OpGetMany
	OpSetMany
	OpDeleteMany
	OpLoad
	NumOps
)

// Bounds are the upper bounds of the latency buckets, 50µs to 10s; the
// root package hands out copies.
var Bounds = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// Histogram is a latency histogram over Bounds; the last bucket is +Inf.
type Histogram struct {
	Count   atomic.Uint64
	Sum     atomic.Int64
	Buckets [len(Bounds) + 1]atomic.Uint64 // not cumulative
}

func (h *Histogram) observe(d time.Duration) {
	i := sort.Search(len(Bounds), func(i int) bool { return Bounds[i] >= d })
	h.Buckets[i].Add(1)
	h.Sum.Add(int64(d))
	h.Count.Add(1)
}

// Counters are a pipeline's counters; the root package turns them into
// its Stats.
type Counters struct {
	Hits, Misses, NegHits, DecodeErrs, StoreErrs atomic.Uint64
	Loads, LoadErrs, Shared, Large, Rejected     atomic.Uint64
	Panics, BudgetSkips                          atomic.Uint64
	LeaseWaits, LeaseFailOpen, LeaseLost         atomic.Uint64
	StaleServed, EarlyRefreshes                  atomic.Uint64
	SchemaMismatches, SchemaKept                 atomic.Uint64
	BytesW, BytesWRaw, BytesR, BytesRRaw         atomic.Uint64
	Latency                                      [NumOps]Histogram
	dict                                         sync.Map // uint32 -> *atomic.Uint64
}

// Since records the time since start under op.
func (c *Counters) Since(op Op, start time.Time) { c.Latency[op].observe(time.Since(start)) }

// addDict counts bytes written with dictionary id. A Cache writes with one
// or two ids at a time, so the map stays tiny and reads are lock-free.
func (c *Counters) addDict(id uint32, n int) {
	v, ok := c.dict.Load(id)
	if !ok {
		v, _ = c.dict.LoadOrStore(id, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(uint64(n))
}

// DictBytes returns the bytes written per dictionary id.
func (c *Counters) DictBytes() map[uint32]uint64 {
	out := map[uint32]uint64{}
	c.dict.Range(func(k, v any) bool {
		out[k.(uint32)] = v.(*atomic.Uint64).Load()
		return true
	})
	return out
}
