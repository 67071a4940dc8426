// Package health watches the nodes of a store and opens a circuit breaker
// in front of a node that is down, so its keys go straight to the loader
// instead of waiting out a timeout, while the other nodes keep serving.
//
// Wrap a store that has nodes (redisstore on a standalone server or a
// Cluster, memcache on a pool) and give the wrapper to kura.New:
//
//	rs, _ := redisstore.New(ctx, redisstore.Options{Addrs: addrs})
//	hs, _ := health.New(rs, health.Options{})
//	defer hs.Close()
//	c, _ := kura.New[User](hs, kura.Options{})
//
// Every Cache on the wrapper shares one monitor: per node, one probe at a
// time, on a connection of its own (store.NodeProber), never one that
// carries application commands, so a probe never queues in a client pool
// or behind a pipeline of real requests.
//
// # States
//
//   - Up: requests flow. A failed request or probe makes the node Suspect.
//   - Suspect: requests still flow; a probe is sent at once. A success
//     (probe or request) makes it Up again. A failed probe, or
//     Options.FailureThreshold failed requests in a row, makes it Down.
//   - Down: the circuit is open. Requests for the node's keys fail at once
//     with an error matching ErrNodeDown (no network), which a Cache's
//     Fetch and FetchMany absorb by calling the loader; batches are split
//     so the other nodes' keys are still read. Probes continue with
//     exponential back-off (Options.BackoffMin doubling to
//     Options.BackoffMax). A successful probe makes it Probing.
//   - Probing: half-open. Requests flow again; Options.RecoverAfter
//     successes in a row (probes or requests) make the node Up, any
//     failure makes it Down again with a longer back-off.
//
// Real request errors feed the same machine. What counts as a node
// failure is Options.IsFailure: by default every error except a miss, an
// invalid key, a value too large, a refused conditional write, a closed
// store and a context canceled by the caller.
//
// # memcached pools: skip, or a gutter pool
//
// The default policy while a node is down is skip: its keys go to the
// loader and nothing is remapped, so when the node returns no key was
// written elsewhere in the meantime and none can be read stale. With
// Options.Gutter set, the keys of a down node are read from and written to
// that spare store instead, with TTLs capped at Options.GutterTTL
// ("Scaling Memcache at Facebook", §3.3): the database sees less load
// during an outage, at the price of values up to GutterTTL old and of
// deletes that reach only the gutter (the node keeps its copy; if the node
// comes back with its memory intact, as after a network partition or a
// SIGSTOP, it can serve a value deleted during the outage until that
// value's own TTL ends). Rehashing a down node's keys onto the other nodes
// of the ring (twemproxy's auto_eject_hosts) is not offered: it has the
// same stale-read risk without the short TTL that bounds it.
//
// # Observability
//
// Stats returns each node's state, probe counts and latency histogram,
// fail-fast counts and transitions; kuraprom exports them. OnStateChange
// is called on every transition. The package never logs.
package health
