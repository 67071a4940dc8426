package readthrough

import (
	"time"

	"github.com/kuracache/kura/internal/flight"
)

// isolation keeps an Invalidate's promise inside one process: a caller
// that starts after an Invalidate returned never takes the result of a
// load the Invalidate overtook (see vouched). The steps ask it at each
// place where a caller could take another caller's load: Invalidate
// (forget), a lease winner's claim (claimHolder), a shared result
// (takes), a holder's refused fill (voided) and the poller's hand-out
// (late). Chosen once in New: every Cache's is strict; the fault suites
// install one that breaks the promise (faults.go), to show that their
// history checkers catch the break.
type isolation[V any] interface {
	// forget makes the flights of keys invisible to later callers.
	forget(keys []string)
	// claimHolder claims the holders' flight of key for a caller that
	// won its lease: a new one, led by that caller (true).
	claimHolder(key string) (*flight.Call[vouched[V]], bool)
	// takes reports whether a caller that asked at asked may take r.
	takes(r vouched[V], asked time.Time) bool
	// voided is the error of a holder's result (err) whose fill the
	// store refused because its lease was voided.
	voided(err error) error
	// late reports whether a waiter that registered with the hub in
	// round registered may have asked after the hub's read sent in round
	// sent was sent: it then waits for the next read.
	late(registered, sent uint64) bool
}

// strict is the isolation of every Cache.
type strict[V any] struct{ *Pipeline[V] }

func (p strict[V]) forget(keys []string) {
	for _, k := range keys {
		p.group.Forget(k)
		p.holders.Forget(k)
	}
}

// claimHolder never joins an older holder's flight: that holder's lease
// may have been voided by an Invalidate this caller came after.
func (p strict[V]) claimHolder(key string) (*flight.Call[vouched[V]], bool) {
	return p.holders.Claim(key, true)
}

func (strict[V]) takes(r vouched[V], asked time.Time) bool { return asked.Before(r.at) }

// voided makes the callers that joined the holder look again: they may
// have joined after the Invalidate that voided its lease.
func (strict[V]) voided(err error) error {
	if err == nil {
		return errVoided
	}
	return err
}

// late: a waiter that registered while the read was in flight may have
// asked after an Invalidate that read did not see.
func (strict[V]) late(registered, sent uint64) bool { return registered > sent }
