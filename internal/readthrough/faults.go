package readthrough

import (
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/internal/flight"
)

// Fault is a guarantee of the pipeline that a test breaks on purpose, so
// that a checker of recorded histories can show it catches the break.
type Fault uint32

const (
	// NoFault: every guarantee holds (the only value outside tests).
	NoFault Fault = iota
	// JoinAfterInvalidate lets callers that start after an Invalidate
	// join a load that began before it: Invalidate no longer makes the
	// flights of its keys invisible, and a lease holder whose fill the
	// store refused (its lease was voided by an Invalidate, in any
	// process) no longer makes the callers that joined it load again.
	JoinAfterInvalidate
)

// injected is the fault of the pipelines New makes, process-wide; read
// only by isolationFor.
var injected atomic.Uint32

// InjectFault makes every pipeline that New makes from now on, in this
// process, break f's guarantee (NoFault: none again). Test-only: nothing
// in the library calls it (internal/harness/layers checks), and the
// pipelines made before keep their isolation.
func InjectFault(f Fault) { injected.Store(uint32(f)) }

// isolationFor is the isolation of p, chosen in New: strict, unless a
// fault suite injected JoinAfterInvalidate.
func isolationFor[V any](p *Pipeline[V]) isolation[V] {
	if Fault(injected.Load()) == JoinAfterInvalidate {
		return joinAfterInvalidate[V]{p}
	}
	return strict[V]{p}
}

// joinAfterInvalidate is the isolation of the JoinAfterInvalidate fault:
// none.
type joinAfterInvalidate[V any] struct{ *Pipeline[V] }

func (joinAfterInvalidate[V]) forget([]string) {}

// claimHolder joins a holder's flight in progress; the caller then
// releases the lease it won (acquisition.claim).
func (p joinAfterInvalidate[V]) claimHolder(key string) (*flight.Call[vouched[V]], bool) {
	return p.holders.Claim(key, false)
}

func (joinAfterInvalidate[V]) takes(vouched[V], time.Time) bool { return true }
func (joinAfterInvalidate[V]) voided(err error) error           { return err }
func (joinAfterInvalidate[V]) late(uint64, uint64) bool         { return false }
