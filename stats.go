package kura

import (
	"slices"
	"sort"
	"time"

	"github.com/kuracache/kura/internal/readthrough"
	"github.com/kuracache/kura/store"
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

// allOps names the pipeline's operations, indexed by readthrough.Op.
var allOps = [readthrough.NumOps]Op{
	readthrough.OpGet: OpGet, readthrough.OpSet: OpSet, readthrough.OpDelete: OpDelete,
	readthrough.OpGetMany: OpGetMany, readthrough.OpSetMany: OpSetMany,
	readthrough.OpDeleteMany: OpDeleteMany, readthrough.OpLoad: OpLoad,
}

// LatencyBuckets returns the upper bounds of the latency histogram
// buckets, from 50µs to 10s, as a new slice (changing it changes nothing
// else). They match Prometheus' cumulative "le" buckets.
func LatencyBuckets() []time.Duration {
	return slices.Clone(readthrough.Bounds[:])
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
	// Shared counts keys, not calls: each key of a Fetch or FetchMany
	// that took another caller's load of it (in this process) instead
	// of calling the loader (singleflight). A FetchMany of 10 keys that
	// all joined loads in flight adds 10.
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

	// L1 holds the counters of the in-process tier (Options.L1).
	L1 L1Stats

	// Nodes is the health of each node of the store when the Cache's
	// store is (or wraps) one that watches it (store.HealthReporter: a
	// store/health breaker), nil otherwise. It describes the store,
	// shared by every Cache on it, not this Cache alone.
	// (store.NodeHealth is health.NodeStats under its store name.)
	Nodes []store.NodeHealth

	// Conn is the store's connection history when it reports one
	// (store.ConnReporter: redisstore and memcache, also through
	// store/health), nil otherwise: whether it has reached its servers
	// yet, background connect attempts, and per address dials,
	// reconnects and address changes. Like Nodes, it describes the store,
	// shared by every Cache on it. kuraprom.NewConnCollector exports it.
	Conn *store.ConnStats
}

// Histogram is a latency distribution over LatencyBuckets().
type Histogram struct {
	Count uint64
	Sum   time.Duration
	// Buckets[i] counts observations <= LatencyBuckets()[i] (cumulative).
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
	if i >= len(readthrough.Bounds) {
		return readthrough.Bounds[len(readthrough.Bounds)-1]
	}
	return readthrough.Bounds[i]
}

func histogramOf(h *readthrough.Histogram) Histogram {
	s := Histogram{Count: h.Count.Load(), Sum: time.Duration(h.Sum.Load()), Buckets: make([]uint64, len(readthrough.Bounds))}
	var cum uint64
	for i := range readthrough.Bounds {
		cum += h.Buckets[i].Load()
		s.Buckets[i] = cum
	}
	return s
}

// snapshot turns the pipeline's counters into Stats.
func snapshot(c *readthrough.Counters, name, coordination string) Stats {
	s := Stats{
		Name: name, Hits: c.Hits.Load(), Misses: c.Misses.Load(), NegativeHits: c.NegHits.Load(),
		DecodeErrors: c.DecodeErrs.Load(), StoreErrors: c.StoreErrs.Load(),
		LoaderCalls: c.Loads.Load(), LoaderErrors: c.LoadErrs.Load(), Shared: c.Shared.Load(),
		LoaderPanics: c.Panics.Load(), BudgetSkips: c.BudgetSkips.Load(),
		SchemaMismatches: c.SchemaMismatches.Load(), SchemaKept: c.SchemaKept.Load(),
		LargeValues: c.Large.Load(), RejectedValues: c.Rejected.Load(),
		BytesWritten: c.BytesW.Load(), BytesWrittenRaw: c.BytesWRaw.Load(),
		BytesRead: c.BytesR.Load(), BytesReadRaw: c.BytesRRaw.Load(),
		Coordination: coordination, LeaseWaits: c.LeaseWaits.Load(), LeaseFailOpen: c.LeaseFailOpen.Load(),
		LeaseFillsLost: c.LeaseLost.Load(), StaleServed: c.StaleServed.Load(), EarlyRefreshes: c.EarlyRefreshes.Load(),
		Latency:                  make(map[Op]Histogram, len(allOps)),
		BytesWrittenByDictionary: c.DictBytes(),
	}
	for op, name := range allOps {
		s.Latency[name] = histogramOf(&c.Latency[op])
	}
	return s
}

// L1Stats are the counters of a Cache's L1 tier (all zero without one).
type L1Stats struct {
	// Hits counts reads answered by the L1, of a value or of a negative
	// entry (included in Stats.Hits and Stats.NegativeHits); Misses reads
	// that went on to the store.
	Hits, Misses uint64
	// Entries and Bytes are the L1's current size: entries, and their
	// estimated memory (L1Options.MaxBytes).
	Entries, Bytes uint64
	// Evictions counts entries evicted to stay within MaxBytes.
	Evictions uint64
	// Invalidations counts keys the server reported changed;
	// Flushes counts "drop everything" events (a tracking connection
	// broke, FLUSHALL).
	Invalidations, Flushes uint64
}

// Coordination values of Stats.Coordination: the guarantee a Cache gives.
const (
	// CoordinationLeases: loads of a missing key are coordinated through
	// the store's leases, across every process that shares the store.
	CoordinationLeases = "leases"
	// CoordinationProcess: loads are shared within this process only
	// (singleflight); processes load independently and a fill may race an
	// invalidation.
	CoordinationProcess = "process"
)
