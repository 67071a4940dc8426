// Package redisstore is the kura store for Redis, standalone or Redis
// Cluster, over github.com/redis/rueidis.
//
// One Store serves both topologies: rueidis asks the seed address whether
// it is a cluster node and routes by hash slot when it is. Connect with
// [New] (an [Options] struct), [NewFromURL]
// ("redis://[user:pass@]host:port[/db][?addr=host2:port2...]", or
// "rediss://" for TLS), or [NewFromClient] to reuse a rueidis.Client the
// application already has.
//
// # Starting with the servers down
//
// A process that starts while Redis is down, restarting or not yet
// resolvable still gets a Store: New and NewFromURL wait at most
// Options.StartWait (500 ms) for the first connection attempt, and a
// refused port or a name that does not resolve ends that attempt at once.
// Until a seed answers, requests fail with an error matching
// store.ErrNotConnected (and, inside it, why the last attempt failed:
// ErrAuth, a refused dial), which a Cache's Fetch and FetchMany absorb by
// calling the loader. The Store keeps trying in the background, with
// back-off from 10 ms to 500 ms; a request that finds it not connected
// starts the next attempt early, at most 20 attempts a second, so under
// traffic a server that comes up is used within about 50 ms. Requests in
// the Store's first second wait (within their context) for the first
// attempt; later ones fail at once. Options.FailFast keeps the old start:
// New connects, or fails.
//
// Standalone or Cluster is not decided before a seed answers: rueidis asks
// the first seed that answers (CLUSTER SLOTS) and the Store takes that
// client for good. Until then the Store has no mode: IsCluster is false,
// Nodes and NodeOf name the first seed (so store/health counts the
// failures there), and once connected they follow the Cluster's masters.
// A Cluster whose nodes come up after the process is found the same way.
//
// # Addresses that move
//
// Every new connection (the first, a reconnect after a failure, a
// Cluster node's) looks the seed's host name up again, through
// Options.Resolver (net.DefaultResolver if nil): when a managed service
// moves a name to a new address on failover, the next reconnect follows
// it. A Cluster keeps its seeds' connections beside the announced nodes,
// so a slot-map refresh can still reach the Cluster through the name.
// [Store.ConnStats] (store.ConnReporter, exported by kuraprom's
// ConnCollector) shows whether the Store has connected, its attempts,
// and per address the connections, failures, reconnects, lookups and
// address changes.
//
// # Round trips
//
// The batch methods cost one round trip per server, sent to all servers at
// once:
//
//   - GetMany sends one MGET per hash slot (a single MGET on a standalone
//     server), all pipelined together in one rueidis DoMulti. Keys that
//     share a hash tag ("{user:42}:profile", "{user:42}:prefs") share a
//     slot and so share an MGET.
//   - SetMany pipelines one SET key value [PX ttl] per item. Per-slot
//     alternatives (MULTI + MSET + PEXPIRE, MSET + PEXPIRE, one Lua script
//     per slot) were measured: none reliably faster on a standalone
//     server, and 1.25x to 5.8x slower on a cluster when the batch spreads
//     over many slots (the usual case); see docs/benchmarks/redis.md.
//   - DeleteMany sends one DEL per hash slot. UNLINK would only help for
//     values whose memory Redis frees lazily, and Redis frees a string
//     value at once either way, so DEL is the same cost and works on every
//     version.
//
// Failures are reported per key in a *store.BatchError whose KeyError.Addr
// names the server the key lives on; keys on the other servers still get
// their answers.
//
// # Behaviour worth knowing
//
//   - rueidis's own client-side cache is not used: kura's L1 tier
//     (kura.Options.L1, package internal/l1) keeps decoded values above the
//     seam, and the Store only runs the server side of it, CLIENT TRACKING
//     and its invalidation pushes, when Options.Tracking asks ([Tracking]).
//   - A read that fails on the network is retried at most
//     Options.MaxRetries times, so a dead server fails a call promptly
//     instead of being retried until the context ends.
//   - A stalled server (SIGSTOP, a frozen host) does not hold callers past
//     their own deadline, however many calls ran out of time before them:
//     rueidis keeps each timed-out command's place in its connection's
//     queue (1,024 places) until the server answers, and a command that
//     finds the queue full waits without looking at its context. Once 256
//     calls in a row to one server have ended by their context with no
//     answer in between, the Store sends that server a PING of its own (1 s
//     to answer): an answer means the server is slow for those callers,
//     not stalled, and the count starts again; calls still go out while it
//     waits, up to 512 such calls. A server that leaves the PING, or 512
//     calls, unanswered has its calls failed at once (without sending
//     them), one let through every 100 ms and the PING sent again (one
//     at a time) to notice when it answers again (stallguard.go). On a
//     Cluster the count is kept per master (by hash slot, as CLUSTER
//     SLOTS last said): a
//     stalled master's keys fail fast while the others' are read and
//     written as before, and a batch over several masters fails only the
//     stalled one's keys. With replica reads (Sentinel or Cluster), the
//     calls sent to replicas are counted apart from the primary's: a
//     stalled replica does not stop writes (replicas get no PING: their
//     calls fail fast from the 256th).
//   - A call ends at its own context's deadline (or cancellation, where
//     rueidis watches it) whatever the connection's history. rueidis runs
//     a connection that has only ever had one call at a time
//     synchronously, bound by the call's deadline alone; on a stalled
//     server that deadline closes the connection, the next call redials
//     it on its own context (a write-back with the rest of its 250 ms
//     budget), and every other call waits for that dial whatever its own
//     deadline (callers with 40 ms took about 200 ms). So once a call to
//     a server has ended by its context, until the server answers again,
//     the Store waits for each call's answer apart from rueidis, on the
//     call's own context (stallguard.go, detach): a call that finds the
//     server answering costs nothing more
//     (TestStalledServerDeadlineWhateverHistory, docs/benchmarks/deadline.md).
//   - Values are binary-safe. The largest value is the server's
//     proto-max-bulk-len (512 MiB by default), read once when the Store is
//     created; larger values are refused with store.ErrValueTooLarge before
//     anything is sent.
//   - Values returned by Get and GetMany are not copied again: rueidis
//     reads every bulk string into a fresh buffer that nothing else holds
//     (client-side caching being off), so it is handed to the caller.
//   - Lease waiters are woken by the server (store.LeaseWaker): the first
//     wait opens a second client, one connection per server named
//     WakeClientName, with CLIENT TRACKING ON, through which the waiters'
//     reads go; the server reports the next change of each key read there.
//     It is opened whatever Options.Tracking says and closed by Close
//     (docs/leases.md, "Waiting").
//
// This package is not the place for codecs, TTL jitter or read-through:
// those live above the seam in package kura.
package redisstore
