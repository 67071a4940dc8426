package kura

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/store/health"
)

// Op names a timed operation in Stats.Latency.
type Op string

// The operations whose latency a Cache records. Store operations are timed
// at the store call, so they include the network; OpLoad times the
// caller's loader.
const (
	OpGet        Op = "get"
	OpSet        Op = "set"
	OpDelete     Op = "delete"
	OpGetMany    Op = "get_many"
	OpSetMany    Op = "set_many"
	OpDeleteMany Op = "delete_many"
	OpLoad       Op = "load"
)

var allOps = []Op{OpGet, OpSet, OpDelete, OpGetMany, OpSetMany, OpDeleteMany, OpLoad}

// LatencyBuckets are the upper bounds of the latency histogram buckets,
// from 50µs to 10s. They match Prometheus' cumulative "le" buckets.
var LatencyBuckets = []time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// Stats is a point-in-time snapshot of a Cache's counters. Counters only
// grow; take differences between two snapshots for rates.
type Stats struct {
	// Name is Options.Name.
	Name string

	// Hits counts keys found with a value; Misses keys not found (or
	// unreadable). NegativeHits counts keys found cached as "not found",
	// which spare the loader but return ErrNotFound.
	Hits, Misses, NegativeHits uint64
	// DecodeErrors counts cached values that failed to decode (counted as
	// misses too, and overwritten by the next fill).
	DecodeErrors uint64
	// SchemaMismatches counts cached values written for another Go type
	// (a field renamed or retyped since): their schema fingerprint differs
	// from V's, or they have none, and a strict decode refused them. Each
	// is counted as a miss too, not as a DecodeError.
	SchemaMismatches uint64
	// SchemaKept counts write-backs a read-through skipped because the
	// key held a value of another type written less than
	// Options.SchemaGrace ago: during a rolling deploy, old and new
	// processes do not overwrite each other's entries back and forth.
	SchemaKept uint64
	// StoreErrors counts failed store operations (per key in batches).
	StoreErrors uint64
	// LoaderCalls and LoaderErrors count calls of Fetch/FetchMany loaders.
	LoaderCalls, LoaderErrors uint64
	// LoaderPanics counts loader calls that panicked (counted in
	// LoaderErrors too).
	LoaderPanics uint64
	// BudgetSkips counts store calls a read-through skipped because the
	// call had spent its Options.StoreTimeout already (a slow or stalled
	// server): the value was served from the loader and not written back.
	BudgetSkips uint64
	// Shared counts Fetch calls that waited for another caller's load of
	// the same key instead of calling the loader (singleflight).
	Shared uint64
	// LargeValues counts writes above Options.WarnValueSize;
	// RejectedValues writes refused for exceeding the maximum size.
	LargeValues, RejectedValues uint64

	// BytesWritten is the encoded size of values written (what went over
	// the network); BytesWrittenRaw the serialized size before
	// compression. Their ratio is the compression saving.
	BytesWritten, BytesWrittenRaw uint64
	// BytesRead and BytesReadRaw are the same for values read.
	BytesRead, BytesReadRaw uint64

	// Coordination is the guarantee the Cache gives about loads of a
	// missing key: CoordinationLeases ("leases": one loader call per key
	// across every process sharing the store, and no fill that raced an
	// Invalidate is cached) or CoordinationProcess ("process": one loader
	// call per key per process; plain cache-aside between processes).
	// See docs/leases.md.
	Coordination string
	// LeaseWaits counts Fetch/FetchMany calls that waited for another
	// caller's lease (in any process) instead of loading.
	LeaseWaits uint64
	// LeaseFailOpen counts calls that gave up waiting (Options.LeaseWait
	// passed, or the store failed while waiting) and loaded without
	// writing back.
	LeaseFailOpen uint64
	// LeaseFillsLost counts fills the store refused because the lease
	// was voided meanwhile (an Invalidate, or the lease expired and
	// another caller took over): the value the loader read was not
	// cached.
	LeaseFillsLost uint64
	// StaleServed counts stale values served under
	// Options.StaleWhileRevalidate; EarlyRefreshes counts background
	// reloads started by Options.EarlyRefresh (or by a stale value).
	StaleServed, EarlyRefreshes uint64
	// BytesWrittenByDictionary splits BytesWritten (values only) by the
	// compression dictionary id in each value's header; id 0 is values
	// written without a dictionary. It shows a rotation's progress: the
	// old id stops growing, the new one takes over.
	BytesWrittenByDictionary map[uint32]uint64

	// Latency holds one histogram per operation.
	Latency map[Op]Histogram

	// Nodes is the health of each node of the store when the Cache's
	// store is (or wraps) a *health.Store, nil otherwise. It describes the
	// store, shared by every Cache on it, not this Cache alone.
	Nodes []health.NodeStats
}

// Histogram is a latency distribution over LatencyBuckets.
type Histogram struct {
	Count uint64
	Sum   time.Duration
	// Buckets[i] counts observations <= LatencyBuckets[i] (cumulative).
	Buckets []uint64
}

// Quantile estimates the q-quantile (0..1) as the upper bound of the
// bucket holding it; it returns 0 for an empty histogram and the last
// bound for observations beyond it.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(q * float64(h.Count))
	i := sort.Search(len(h.Buckets), func(i int) bool { return h.Buckets[i] >= rank })
	if i >= len(LatencyBuckets) {
		return LatencyBuckets[len(LatencyBuckets)-1]
	}
	return LatencyBuckets[i]
}

type histogram struct {
	count   atomic.Uint64
	sum     atomic.Int64
	buckets []atomic.Uint64 // non-cumulative; the last one is +Inf
}

func newHistogram() *histogram {
	return &histogram{buckets: make([]atomic.Uint64, len(LatencyBuckets)+1)}
}

func (h *histogram) observe(d time.Duration) {
	i := sort.Search(len(LatencyBuckets), func(i int) bool { return LatencyBuckets[i] >= d })
	h.buckets[i].Add(1)
	h.sum.Add(int64(d))
	h.count.Add(1)
}

func (h *histogram) snapshot() Histogram {
	s := Histogram{Count: h.count.Load(), Sum: time.Duration(h.sum.Load()), Buckets: make([]uint64, len(LatencyBuckets))}
	var cum uint64
	for i := range LatencyBuckets {
		cum += h.buckets[i].Load()
		s.Buckets[i] = cum
	}
	return s
}

type counters struct {
	hits, misses, negHits, decodeErrs, storeErrs atomic.Uint64
	loads, loadErrs, shared, large, rejected     atomic.Uint64
	panics, budgetSkips                          atomic.Uint64
	leaseWaits, leaseFailOpen, leaseLost         atomic.Uint64
	staleServed, earlyRefreshes                  atomic.Uint64
	coordination                                 string
	schemaMismatches, schemaKept                 atomic.Uint64
	bytesW, bytesWRaw, bytesR, bytesRRaw         atomic.Uint64
	dictBytes                                    dictCounters
	lat                                          map[Op]*histogram
}

func newCounters() *counters {
	c := &counters{lat: make(map[Op]*histogram, len(allOps))}
	for _, op := range allOps {
		c.lat[op] = newHistogram()
	}
	return c
}

func (c *counters) since(op Op, start time.Time) { c.lat[op].observe(time.Since(start)) }

func (c *counters) observe(op Op, d time.Duration) { c.lat[op].observe(d) }

func (c *counters) snapshot(name string) Stats {
	s := Stats{
		Name: name, Hits: c.hits.Load(), Misses: c.misses.Load(), NegativeHits: c.negHits.Load(),
		DecodeErrors: c.decodeErrs.Load(), StoreErrors: c.storeErrs.Load(),
		LoaderCalls: c.loads.Load(), LoaderErrors: c.loadErrs.Load(), Shared: c.shared.Load(),
		LoaderPanics: c.panics.Load(), BudgetSkips: c.budgetSkips.Load(),
		SchemaMismatches: c.schemaMismatches.Load(), SchemaKept: c.schemaKept.Load(),
		LargeValues: c.large.Load(), RejectedValues: c.rejected.Load(),
		BytesWritten: c.bytesW.Load(), BytesWrittenRaw: c.bytesWRaw.Load(),
		BytesRead: c.bytesR.Load(), BytesReadRaw: c.bytesRRaw.Load(),
		Coordination: c.coordination, LeaseWaits: c.leaseWaits.Load(), LeaseFailOpen: c.leaseFailOpen.Load(),
		LeaseFillsLost: c.leaseLost.Load(), StaleServed: c.staleServed.Load(), EarlyRefreshes: c.earlyRefreshes.Load(),
		Latency:                  make(map[Op]Histogram, len(allOps)),
		BytesWrittenByDictionary: c.dictBytes.snapshot(),
	}
	for op, h := range c.lat {
		s.Latency[op] = h.snapshot()
	}
	return s
}
