package kura

import (
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/flight"
	"github.com/kuracache/kura/store"
)

// Sentinel errors, checked with errors.Is. They are the same values as the
// store and codec sentinels, so an error from any layer matches.
var (
	// ErrNotFound reports a miss from Get, or a key the loader says does
	// not exist. A loader returns it (possibly wrapped) to have the
	// absence cached negatively for Options.NegativeTTL.
	ErrNotFound = store.ErrNotFound
	// ErrValueTooLarge reports a value over Options.MaxValueSize or the
	// server's own limit; nothing was sent.
	ErrValueTooLarge = store.ErrValueTooLarge
	// ErrInvalidKey reports a key the store cannot take.
	ErrInvalidKey = store.ErrInvalidKey
	// ErrMalformed reports cached bytes that do not decode. Get returns
	// it; Fetch treats it as a miss and overwrites the entry.
	ErrMalformed = codec.ErrMalformed
	// ErrNotUnderstood reports a cached entry written by a newer writer
	// (a newer format version, entry kind or critical field). Get returns
	// it; Fetch and FetchMany treat it as a miss, call the loader, and do
	// not overwrite the entry, so a rolling deploy's new processes keep
	// what they wrote. It does not match ErrMalformed.
	ErrNotUnderstood = codec.ErrNotUnderstood
	// ErrSchemaMismatch reports cached bytes written for another Go type
	// (a field renamed or retyped since they were written; see
	// Options.SchemaGrace and docs/FORMAT.md, "Schema evolution"). It
	// matches ErrMalformed. Get returns it; Fetch and FetchMany treat it
	// as a miss and overwrite the entry once it is older than
	// Options.SchemaGrace.
	ErrSchemaMismatch = codec.ErrSchemaMismatch
	// ErrLoaderPanicked is matched by the error a Fetch gets when the
	// load it shared with another caller panicked. The Fetch that started
	// that load panics instead (with a value that also matches it), in
	// its own goroutine, where the caller's recover works.
	ErrLoaderPanicked = flight.ErrPanicked
)
