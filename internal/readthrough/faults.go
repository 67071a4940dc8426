package readthrough

import "sync/atomic"

// Faults are test-only switches that break a guarantee of the pipeline on
// purpose, so that a checker of recorded histories can show it catches the
// break. They are process-wide; the zero value (all off) is the only value
// outside tests, and nothing in the library sets them.
var Faults struct {
	// JoinAfterInvalidate lets callers that start after an Invalidate
	// join a load that began before it: Invalidate no longer makes the
	// flights of its keys invisible, and a lease holder whose fill the
	// store refused (its lease was voided by an Invalidate, in any
	// process) no longer makes the callers that joined it load again.
	JoinAfterInvalidate atomic.Bool
	// FillIgnoresLease makes a lease holder write its value with a plain
	// Set instead of a fill conditional on its lease, so a load that an
	// Invalidate overtook is cached.
	FillIgnoresLease atomic.Bool
}
