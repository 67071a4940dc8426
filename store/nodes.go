package store

import (
	"context"
	"fmt"
	"time"
)

// NodeLocator is implemented by stores that spread keys over several
// servers (nodes), or talk to one: it says which node serves a key, so a
// circuit breaker (package store/health) can fail one node's keys fast
// while the other nodes keep serving theirs.
type NodeLocator interface {
	// NodeOf returns the address of the node that serves key, as
	// NodeError.Addr would name it, or "" when it is not known (a Redis
	// Cluster whose slot map has not been read yet).
	NodeOf(key string) string
}

// ServerLocator is implemented by a store whose node names (NodeOf) are
// not always the network address of the server a command goes to: a
// Redis Sentinel store's node is its master set, and with replica reads a
// read may be answered by a replica. Instrumentation names the server of
// a call with it (kuraotel's server.address and server.port); a store
// without it is asked NodeOf.
type ServerLocator interface {
	// ServerOf returns the address (host:port) of the server that a
	// command on key goes to now, a read (read true) or a write, or ""
	// when it is not known.
	ServerOf(key string, read bool) string
}

// NodeProber is implemented by stores that can check one node's health
// on a connection of its own, apart from the connections that carry
// application commands, so a health check never waits in a pool or
// behind a pipeline of real requests (the failure that made one
// application's pings take over 200 ms on a busy Redis).
type NodeProber interface {
	// Nodes returns the addresses of the nodes that serve keys now (the
	// masters of a Redis Cluster, every server of a memcached pool).
	Nodes() []string
	// ProbeNode sends one cheap command (PING, mn) to the node at addr on
	// its dedicated probe connection and waits for the answer within ctx.
	// Callers run at most one ProbeNode per node at a time.
	ProbeNode(ctx context.Context, addr string) error
}

// HealthReporter is implemented by a store that watches the health of its
// nodes (store/health's circuit breaker): a Cache shows it in its Stats
// without knowing the breaker's package. Find it through wrappers with
// [Find].
type HealthReporter interface {
	// NodeHealth returns one entry per watched node, sorted by address.
	NodeHealth() []NodeHealth
}

// HealthStats is a snapshot of a circuit breaker (store/health's Stats):
// its nodes and its gutter reads, for exporters such as kuraprom.
type HealthStats struct {
	// Nodes has one entry per watched node, sorted by address.
	Nodes []NodeHealth
	// GutterHits, GutterMisses and GutterErrors count reads of Down
	// nodes' keys served by the breaker's gutter pool (all zero without
	// one).
	GutterHits, GutterMisses, GutterErrors uint64
}

// NodeState is a node's health as a circuit breaker sees it (see package
// store/health for the transitions).
type NodeState int32

// The states of a node.
const (
	NodeUp NodeState = iota
	NodeSuspect
	NodeDown
	NodeProbing
	// NodeStates is the number of states.
	NodeStates
)

var nodeStateNames = [...]string{"up", "suspect", "down", "probing"}

func (s NodeState) String() string {
	if s >= 0 && s < NodeStates {
		return nodeStateNames[s]
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// probeBuckets are the upper bounds of NodeHealth.ProbeLatency's buckets,
// from 50µs to 1s.
var probeBuckets = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second,
}

// ProbeBuckets returns the upper bounds of NodeHealth.ProbeLatency's
// buckets (a copy: callers may not change them).
func ProbeBuckets() []time.Duration { return append([]time.Duration(nil), probeBuckets[:]...) }

// NodeHealth is a snapshot of one node's health. Counters only grow.
type NodeHealth struct {
	// Addr is the node's address.
	Addr string
	// State is its state now, Since when it entered it.
	State NodeState
	Since time.Time
	// Probes counts probes sent; ProbeFailures those that failed or
	// timed out.
	Probes, ProbeFailures uint64
	// LastProbe is the latency of the last successful probe.
	LastProbe time.Duration
	// ProbeLatency counts successful probes per bucket of ProbeBuckets
	// (not cumulative); the last element counts probes slower than the
	// last bound. ProbeLatencySum is their total time.
	ProbeLatency    []uint64
	ProbeLatencySum time.Duration
	// RequestFailures counts requests whose error counted against the
	// node (health.Options.IsFailure).
	RequestFailures uint64
	// InFlight is the number of keys sent to the node whose answer has
	// not come back yet.
	InFlight int64
	// FailFast counts keys not sent because the node was Down (served by
	// the loader, or by the gutter when GutterHits/GutterMisses say so).
	FailFast uint64
	// Transitions counts entries into each state, indexed by NodeState.
	Transitions [NodeStates]uint64
}
