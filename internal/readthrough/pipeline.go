// Package readthrough is the read path of a kura Cache: one pipeline that
// Fetch and FetchMany both run, in five steps.
//
//  1. lookup: the L1 (if any), then the store: a plain or tracked read, or
//     a lease read, which reads and takes leases on misses in one call;
//  2. classify: each key is a hit (a value or a negative entry), stale or
//     due for early refresh (served, reloaded in the background), not
//     understood or kept (load, never overwrite), or a miss that this
//     caller holds the lease of, waits for, or loads without a lease;
//  3. acquire: the strategy that decides who loads: the process flight
//     (one load per key per process) or the lease (one load per key across
//     every process sharing the store);
//  4. load: one loader call for the keys a caller leads, on the goroutine
//     of their flights;
//  5. fill: the write-back, conditional on the lease when there is one.
//
// The files follow the steps, in call order: fetch.go (Fetch and
// FetchMany), lookup.go, classify.go, acquire.go (with wait.go, the
// poller of the keys another caller holds the lease of), load.go and
// fill.go; refresh.go reloads in the background what a lookup served
// early or stale. The mechanisms the steps share have files of their
// own: l1.go (the L1's placeholders and fills), leases.go (the lease
// coordination, the only holder of the store's lease capability),
// isolation.go (what keeps an Invalidate's promise among the callers of
// one process), entry.go (the envelope of one value), budget.go (the
// store time of a call, over the deadline clock of package clock),
// trace.go and counters.go; ops.go holds the plain operations (Get, Set,
// Delete, Invalidate, ...). faults.go is the fault suites' seam: a broken
// isolation that New installs only when a test injected it.
//
// Fetch is the one-key case: its keys are a slice of one. The store time
// of a call is one budget over all its steps. The package knows nothing of
// the kura API; the root package is its face.
package readthrough

import (
	"context"
	"sync"
	"time"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/flight"
	"github.com/kuracache/kura/internal/l1"
	"github.com/kuracache/kura/internal/readthrough/clock"
	"github.com/kuracache/kura/observe"
	"github.com/kuracache/kura/store"
)

// Loader loads one key; ManyLoader many (see the kura package).
type (
	Loader[V any]     func(ctx context.Context, key string) (V, error)
	ManyLoader[V any] func(ctx context.Context, keys []string) (map[string]V, error)
)

// Config is what the pipeline needs of the Cache's options, defaults
// applied.
type Config struct {
	Codec                                  *codec.Codec
	Schema                                 uint32 // V's fingerprint
	NegativeTTL, StoreTimeout, LoadTimeout time.Duration
	SchemaGrace                            time.Duration
	LeaseTTL, LeaseWait                    time.Duration
	StaleWhileRevalidate, EarlyRefresh     time.Duration
	MaxValueSize, WarnValueSize            int
	OnLargeValue                           func(key string, n int)
	OnError                                func(op Op, key string, err error)
	Jitter                                 func(time.Duration) time.Duration
	Leaser                                 store.Leaser   // nil: process coordination
	Tracker                                store.Tracker  // the L1's reports, nil: TTL-bounded L1
	Tracer                                 observe.Tracer // nil: no spans
}

// Pipeline is the read path of one Cache of values of type V.
type Pipeline[V any] struct {
	// coord and reads are the coordination of loads and the read
	// strategy of the lookup step, chosen once in New.
	coord coordination
	reads readStrategy
	// iso keeps Invalidate's promise among the callers of this process
	// (strict; a fault suite's, see isolationFor), chosen once in New.
	iso     isolation[V]
	cfg     Config
	store   store.Store
	l1      *l1.Tier[V]
	tracker store.Tracker
	st      *Counters
	// group runs the process flights (one load per key per process)
	// and, with leases, the loads that write nothing back.
	group flight.Group[vouched[V]]
	// holders runs the loads of lease holders, apart from group, so a
	// caller that wins a lease never joins a load it may not take.
	holders flight.Group[vouched[V]]
	// hub polls, for Fetch and FetchMany, the keys other callers hold
	// leases on: one batched read per tick for the whole process.
	hub waitHub
	// clock bounds the first store call of reads (see budget.bound).
	clock clock.Clock
	// batches are the slots of batch reads (*batch[V]), reused.
	batches sync.Pool

	// The steps, each a view of the pipeline with the methods of its
	// own file (set once in New).
	lk     lookupStep[V]
	ent    entryStep[V]
	l1f    l1Step[V]
	rd     readStep[V]
	lr     leaseReadStep[V]
	cl     classifyStep[V]
	tr     traceStep[V]
	loads  loadStep[V]
	fills  fillStep[V]
	leases leaseCoord[V] // the lease capability, held only there
	waits  waitStep[V]
}

// coordination is who a load of a missing key is shared with, chosen once
// in New from Config.Leaser.
type coordination uint8

const (
	// processCoord: the process flight, one load per key per process.
	processCoord coordination = iota
	// leasesCoord: the store's leases, one load per key across every
	// process that shares the store; fills conditional on the lease.
	leasesCoord
)

// New returns the pipeline over s, with tier as its L1 (nil: none).
func New[V any](s store.Store, cfg Config, tier *l1.Tier[V]) *Pipeline[V] {
	p := &Pipeline[V]{cfg: cfg, store: s, tracker: cfg.Tracker, st: new(Counters), l1: tier}
	if cfg.Leaser != nil {
		p.coord = leasesCoord
	}
	p.reads = chooseReads(p.coord, tier != nil, cfg.Tracker != nil)
	p.iso = isolationFor(p)
	p.lk = lookupStep[V]{p}
	p.ent, p.l1f, p.rd, p.lr, p.cl = entryStep[V]{p}, l1Step[V]{p}, readStep[V]{p}, leaseReadStep[V]{p}, classifyStep[V]{p}
	p.tr, p.loads, p.fills, p.leases, p.waits = traceStep[V]{p}, loadStep[V]{p}, fillStep[V]{p}, newLeaseCoord(p, cfg.Leaser), waitStep[V]{p}
	if p.cfg.Jitter == nil {
		p.cfg.Jitter = func(d time.Duration) time.Duration { return d }
	}
	return p
}

// Counters returns the pipeline's counters.
func (p *Pipeline[V]) Counters() *Counters { return p.st }

// class is what a lookup found for a key: what the caller does next.
type class uint8

const (
	miss    class = iota // nothing usable: load (and fill)
	hit                  // e holds a value or a negative entry to serve
	won                  // this caller holds the lease: load and fill under it
	wait                 // another caller holds the lease: wait for its fill
	noFill               // load, but write nothing back
	corrupt              // undecodable bytes under no lease: remove, look again
)

// slot is one key on its way through the pipeline.
type slot[V any] struct {
	key string
	e   entry[V]
	// lease, won, stale: what a lease read found (see store.LeaseResult);
	// the slot keeps no more of it, since FetchMany holds one per key.
	lease      store.Lease
	won, stale bool
	// refresh: serve e and reload the key in the background under r.Lease
	// (a stale value, or one due for early refresh).
	refresh bool
	failed  bool // the store failed: a second look would wait it out again
	// class last, with the flags: FetchMany holds a slot per key (128
	// bytes for a []byte V).
	class class
}

// batch is the slots of one batch read, reused from call to call: a warm
// FetchMany or GetMany allocates none (a slot is 128 bytes for a []byte V,
// so 100 keys would cost 12.8 KB of garbage per call).
type batch[V any] struct{ slots []slot[V] }

// maxPooledSlots is the most slots a batch keeps for reuse.
const maxPooledSlots = 1024

// getBatch returns a batch with room for n slots.
func (p *Pipeline[V]) getBatch(n int) *batch[V] {
	bt, _ := p.batches.Get().(*batch[V])
	if bt == nil {
		bt = new(batch[V])
	}
	if cap(bt.slots) < n {
		bt.slots = make([]slot[V], 0, n)
	}
	return bt
}

// putBatch gives bt back once nothing holds its slots any more; used are
// the slots this call filled, cleared so that the pool keeps no value or
// key alive.
func (p *Pipeline[V]) putBatch(bt *batch[V], used []slot[V]) {
	clear(used)
	if cap(bt.slots) <= maxPooledSlots {
		p.batches.Put(bt)
	}
}

func (p *Pipeline[V]) report(op Op, key string, err error) {
	if p.cfg.OnError != nil {
		p.cfg.OnError(op, key, err)
	}
}
