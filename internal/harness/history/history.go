// Package history records what concurrent callers of a kura Cache did,
// in one or many processes, and checks the record against the guarantee
// the documentation gives for the Cache's configuration (docs/leases.md,
// docs/l1.md), with the porcupine linearizability checker.
//
// A history is a list of operations on keys, each with the wall-clock
// interval (unix nanoseconds) in which it ran: every process on one
// machine reads the same clock. The operations are the writes to the
// source of truth (a counter per key, so a value names the version it
// holds), the invalidations, the loads (the loader's read of the source)
// and the reads (Fetch, FetchMany, Keyed and Index reads, each returning
// the value of one load). With an L1 over a store whose server reports
// changes, the history also holds each process's store reads that fill
// its L1 and the reports it handled.
//
// The package is a test harness: it is imported by tests only.
package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Kind is what an operation did.
type Kind uint8

// The kinds of operation.
const (
	// Write sets the source's version of Key to Ver (one INCR).
	Write Kind = iota + 1
	// Invalidate is a Cache.Invalidate of Key that returned nil.
	Invalidate
	// Load is the loader's read of the source: it read version Ver and
	// made the value Load.
	Load
	// Read is a read through the Cache that returned the value of load
	// Load (version Ver).
	Read
	// Tracked is a store read, made for process Proc's L1, that found the
	// value of load Load (or nothing, when Load is empty).
	Tracked
	// Report is process Proc's L1 handling a server report that Key
	// changed (or, with Flush, that everything must be dropped).
	Report
)

func (k Kind) String() string {
	switch k {
	case Write:
		return "write"
	case Invalidate:
		return "invalidate"
	case Load:
		return "load"
	case Read:
		return "read"
	case Tracked:
		return "l1-read"
	case Report:
		return "report"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Op is one operation of a history.
type Op struct {
	Kind Kind `json:"k"`
	// Proc is the process, Client the goroutine within it.
	Proc   int    `json:"p"`
	Client int    `json:"c"`
	Key    string `json:"key,omitempty"`
	// Start and End are wall-clock unix nanoseconds.
	Start int64 `json:"s"`
	End   int64 `json:"e"`
	// Ver is the version written (Write), read (Load) or returned (Read,
	// Tracked).
	Ver int64 `json:"v,omitempty"`
	// Load names the load whose value a Read or Tracked returned, or the
	// load a Load op is.
	Load string `json:"l,omitempty"`
	// Via is the API a Read came through: Fetch, FetchMany, Keyed, Index.
	Via string `json:"via,omitempty"`
	// Flush marks a Report that dropped every key.
	Flush bool `json:"f,omitempty"`
}

// Value is the cached value of the checked caches: what a load read, so
// that a read names the load it was served from.
type Value struct {
	Key  string `msgpack:"k"`
	Ver  int64  `msgpack:"v"`
	Load string `msgpack:"l"`
}

// Recorder collects operations from many goroutines.
type Recorder struct {
	mu  sync.Mutex
	ops []Op
}

// Add appends op.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns a copy of the operations recorded so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// Now is the clock of every history: the wall clock, which all processes
// of a machine share (a monotonic reading is per process).
func Now() int64 { return time.Now().UnixNano() }

// Format prints ops as a person reads a history: one line per operation,
// sorted by start, times in milliseconds after base.
func Format(ops []Op, base int64) string {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.Start, b.Start) })
	var b strings.Builder
	for _, op := range ops {
		b.WriteString("  ")
		b.WriteString(describe(op, base))
		b.WriteByte('\n')
	}
	return b.String()
}

func ms(t, base int64) string { return fmt.Sprintf("%9.3f", float64(t-base)/1e6) }

func describe(op Op, base int64) string {
	who := fmt.Sprintf("p%d/g%-3d", op.Proc, op.Client)
	iv := "[" + ms(op.Start, base) + " " + ms(op.End, base) + "]"
	var what string
	switch op.Kind {
	case Write:
		what = fmt.Sprintf("source := v%d", op.Ver)
	case Invalidate:
		what = "Invalidate"
	case Load:
		what = fmt.Sprintf("loader read the source: v%d (load %s)", op.Ver, op.Load)
	case Read:
		what = fmt.Sprintf("%s -> v%d (load %s)", op.Via, op.Ver, op.Load)
	case Tracked:
		if op.Load == "" {
			what = "L1 store read -> nothing"
		} else {
			what = fmt.Sprintf("L1 store read -> v%d (load %s)", op.Ver, op.Load)
		}
	case Report:
		what = "L1 handled a report"
		if op.Flush {
			what = "L1 handled a flush"
		}
	}
	return fmt.Sprintf("%s %-10s %s %-14s %s", who, op.Kind, iv, op.Key, what)
}
