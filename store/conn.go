package store

import (
	"context"
	"errors"
)

// ErrNotConnected reports a request to a store that has not reached its
// servers yet: it was created while they were down (or their names did
// not resolve) and keeps trying in the background. Like any store
// failure, a Cache's Fetch and FetchMany absorb it by calling the loader.
var ErrNotConnected = errors.New("kura: store not connected yet")

// ConnReporter is implemented by stores that connect to servers over the
// network (redisstore, memcache): what an operator needs to see when a
// process started with its cache down, or when the servers' addresses
// move. Find it through wrappers with [Find].
type ConnReporter interface {
	ConnStats() ConnStats
}

// ConnStats is a snapshot of a store's connections. Counters only grow.
type ConnStats struct {
	// Connected is false until the store has reached its servers: for
	// Redis, until a seed answered the handshake and the client was
	// created; for a memcached pool, until every server has answered
	// once.
	Connected bool
	// ConnectAttempts and ConnectFailures count the background attempts
	// to create the client of a store started while its servers were
	// down (Redis); zero for stores that connect per request.
	ConnectAttempts, ConnectFailures uint64
	// Nodes has one entry per address the store has dialed or been
	// configured with, sorted by address.
	Nodes []NodeConnStats
	// Primary is the server a store with failover (Redis Sentinel)
	// follows now ("" for other stores, or before it has connected), and
	// Failovers counts the times it changed: a replica was promoted.
	Primary   string
	Failovers uint64
	// TrackingFlushes counts the times the server-assisted invalidation
	// of a store with tracking (Redis CLIENT TRACKING) had to drop every
	// key: a tracking connection broke (a failover, a restart), or the
	// server was flushed. Each one flushes the L1 of every Cache on it.
	TrackingFlushes uint64
	// NotReplicated counts invalidations that the primary applied but not
	// enough replicas acknowledged in time (redisstore.InvalidateWait).
	NotReplicated uint64
	// ReplicaReads counts the commands sent to a replica (redisstore's
	// Options.ReadFromReplicas): only those a known replica answers, not
	// the reads that go to the primary because the client knows no
	// replica for them yet.
	ReplicaReads uint64
	// SlotSplits counts the batches on a Redis Cluster (an MGET or DEL of
	// several keys of one hash slot) that met TRYAGAIN while the slot was
	// being migrated between masters, and were sent again one key per
	// command: how much a reshard touched this store's traffic.
	SlotSplits uint64
	// OrphanedLeases counts the leases whose Fill or Release got no
	// answer (a broken connection: a failover, a restart) and that the
	// store released in the background once the server answered again,
	// so readers stop waiting for a fill that would never come.
	OrphanedLeases uint64
}

// NodeConnStats is one server address's connection history.
type NodeConnStats struct {
	// Addr is the address as configured or announced (host:port).
	Addr string
	// Resolved is the ip:port that the last successful connection used
	// ("" before one).
	Resolved string
	// Dials counts connections opened; DialFailures the attempts that
	// failed (name not resolved, refused, timed out).
	Dials, DialFailures uint64
	// Reconnects counts connections opened after a failed attempt: the
	// server came back (restart, failover, a name that resolves again).
	Reconnects uint64
	// Resolves counts lookups of Addr's host name (none for an IP
	// address); ResolveFailures those that failed.
	Resolves, ResolveFailures uint64
	// AddrChanges counts connections whose address differed from the
	// previous connection's: the name now points elsewhere (a managed
	// service replaced the node, a failover moved it).
	AddrChanges uint64
}

// Resolver looks up the addresses of a host name; *net.Resolver
// implements it. Stores that take one look their servers' names up again
// on every new connection, so a name that moves to a new address is
// followed; tests give a resolver they control.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}
