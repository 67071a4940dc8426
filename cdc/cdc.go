// Package cdc keeps a kura cache right when the database is written by
// code that never calls Invalidate: it reads the database's own change
// stream (a [Source]: PostgreSQL logical replication in cdc/pgsource),
// turns each changed row into the cache keys the application reads
// through (a [Mapping] built from the same kura.Keyed and kura.Index views),
// and invalidates them on every [Target] at commit, confirming a position
// to the database only after every invalidation up to it has landed on
// every target. This is the design of Facebook's McSqueal ("Scaling
// Memcache at Facebook", NSDI '13, §4.1) over kura's leases (§3.2.1), so a
// slow refill cannot overwrite an invalidation.
//
// Delivery is at least once: after a crash the stream resumes from the
// last confirmed position, and a transaction whose invalidation landed but
// whose position was not yet confirmed is invalidated again (invalidation
// is idempotent). See docs/cdc.md for the guarantee, its bound and every
// failure mode.
package cdc

import (
	"context"
	"errors"
	"time"
)

// Op is the kind of a row change.
type Op uint8

// The row changes a Source reports.
const (
	Insert Op = iota + 1
	Update
	Delete
)

// String names the operation as SQL does.
func (o Op) String() string {
	switch o {
	case Insert:
		return "INSERT"
	case Update:
		return "UPDATE"
	case Delete:
		return "DELETE"
	}
	return "unknown"
}

// Value is one column's value in a row image, in the database's text
// form (an integer in decimal, a uuid hyphenated, as PostgreSQL's output
// functions and Debezium's JSON print them).
type Value struct {
	// Text is the value's text form; empty for NULL.
	Text string
	// Null reports SQL NULL.
	Null bool
	// Unknown reports a value the stream left out: an unchanged TOAST
	// column in an UPDATE (PostgreSQL does not re-send it), or a column
	// outside the replica identity in an old image.
	Unknown bool
}

// Row is a row image: its columns' values by name. A column missing from
// the map is unknown, as Value.Unknown; a source may leave out the
// columns no rule reads.
type Row map[string]Value

// Change is one row change of a committed transaction.
type Change struct {
	// Table is the schema-qualified table ("public.items").
	Table string
	Op    Op
	// Old is the row before an UPDATE or DELETE as far as the replica
	// identity carries it (nil when the database sent no old image: an
	// UPDATE that changed no identity column under REPLICA IDENTITY
	// DEFAULT).
	Old Row
	// New is the row after an INSERT or UPDATE.
	New Row
	// OldPartial says a column missing or unknown in Old may have changed:
	// the source cannot tell "unchanged" from "not sent" (Debezium's before
	// image without a checked replica identity). A rule that reads such a
	// column then invalidates its table whole, instead of taking the value
	// from New as it does for PostgreSQL's own stream, where a missing old
	// column is an unchanged one.
	OldPartial bool
}

// Position is a source's opaque place in its stream (an LSN for
// PostgreSQL, partition offsets for Kafka). Delivery never compares
// positions: it confirms them in the order the source handed them out.
type Position interface {
	String() string
}

// Source is where committed changes come from. One Source is streamed by
// one Runner at a time.
type Source interface {
	// Stream connects and calls h for every change of every committed
	// transaction after the last confirmed position, in commit order,
	// until ctx ends or the stream fails. It returns the failure; the
	// Runner calls Stream again after a pause, and the source resumes
	// after the last position it confirmed upstream. An error matching
	// ErrFatal is not retried.
	Stream(ctx context.Context, h Handler) error
	// Confirm records that every change up to pos (a position handed to
	// Handler.Commit or Handler.Idle) has been applied on every target;
	// the source tells its upstream (PostgreSQL's slot, Kafka's group)
	// at its next chance. It must not block.
	Confirm(pos Position)
	// Backlog reports what the upstream retains for this consumer, for
	// metrics and the retained-WAL ceiling. It may return an error when
	// the upstream is unreachable.
	Backlog(ctx context.Context) (Backlog, error)
}

// Backlog is what a source's upstream retains.
type Backlog struct {
	// RetainedBytes is how much log the upstream keeps for this
	// consumer (PostgreSQL: the WAL between the slot's restart_lsn and
	// the current WAL position).
	RetainedBytes int64
	// Confirmed is the last position the upstream has recorded as
	// confirmed (empty when unknown).
	Confirmed string
	// Head is the upstream's current position (empty when unknown).
	Head string
	// LagRecords is how many records the upstream holds past the
	// confirmed position (Kafka: the consumer group's lag); the cache
	// is caught up only when it is 0. A source that does not count
	// records (PostgreSQL) leaves it 0; one that counts them but could
	// not read the count sets -1 (the status then says the lag is
	// unknown rather than caught up).
	LagRecords int64
}

// Handler receives a Source's stream. Its methods are called from one
// goroutine, in stream order; an error ends the Stream with that error.
type Handler interface {
	// Change reports one row change of the transaction in progress. The
	// handler does not keep c or its rows after it returns.
	Change(c *Change) error
	// Truncate reports a TRUNCATE of tables in the transaction in
	// progress: their whole keyspace is invalidated at commit.
	Truncate(tables []string) error
	// Commit ends the transaction in progress: its invalidations are
	// applied, then pos is confirmed. at is the commit time the
	// database recorded.
	Commit(pos Position, at time.Time) error
	// Idle reports that the source has seen everything up to pos and
	// that nothing up to it touches the mapping (a keepalive on an idle
	// database, transactions on unmapped tables): pos is confirmed once
	// everything before it has been applied, so the upstream retains no
	// more log than it must.
	Idle(pos Position) error
	// Reset reports that the history since the last confirmed position
	// is lost (a new or recreated slot): every mapped table is
	// invalidated whole before anything after it is confirmed. It
	// returns once that invalidation has landed on every target, so a
	// source can record that the reset is done (pgsource publishes its
	// new slot only then: a crash before leaves no slot, and the next
	// run resets again).
	Reset(reason string) error
}

// ErrFatal marks a source failure that retrying cannot fix (a missing
// privilege, a wrong wal_level, a table without the replica identity the
// mapping needs): the Runner stops with it.
var ErrFatal = errors.New("cdc: cannot stream")

// ErrRetainedCeiling is returned by Run when the upstream retains more log
// than Options.MaxRetainedBytes because a target has been failing: cdc
// stops loudly rather than let the database's disk fill or skip changes.
var ErrRetainedCeiling = errors.New("cdc: retained log above the ceiling")
