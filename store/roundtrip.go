package store

import (
	"context"
	"time"
)

// RoundTrip is one server batch of a store call: the commands of one call
// sent to one server together (a pipeline of MGETs, one per hash slot, to
// one Redis Cluster master; a pipeline of mg to one memcached server).
// It never holds keys or values.
type RoundTrip struct {
	// Op is the command, as the server names it ("MGET", "SET", "mg",
	// "EVALSHA"...).
	Op string
	// Addr is the server's address, "" when not known.
	Addr string
	// Commands is the number of commands sent (on a Redis Cluster, one
	// MGET per hash slot); Keys the number of keys they carry.
	Commands, Keys int
	// Start and End bound the batch: from sending it to its last answer.
	// On Redis the batches of one call share one pipeline (rueidis
	// DoMulti), so they report the pipeline's bounds.
	Start, End time.Time
	// Failed is the number of keys that failed on the server.
	Failed int
}

type roundTripsKey struct{}

// RoundTripFunc receives the server batches of the store calls made with
// a context from WithRoundTrips. It may be called concurrently (one
// goroutine per server) and must be fast.
type RoundTripFunc func(RoundTrip)

// WithRoundTrips returns a context that asks the store calls made with it
// to report each server batch to fn (instrumentation: kuraotel's store
// wrapper turns them into child spans). A store that does not report
// batches is simply silent.
func WithRoundTrips(ctx context.Context, fn RoundTripFunc) context.Context {
	return context.WithValue(ctx, roundTripsKey{}, fn)
}

// RoundTrips returns the function of WithRoundTrips in ctx, or nil: a
// store calls it after each server batch when it is not nil. Asking costs
// one context lookup and no allocation.
func RoundTrips(ctx context.Context) RoundTripFunc {
	fn, _ := ctx.Value(roundTripsKey{}).(RoundTripFunc)
	return fn
}
