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
//   - rueidis's client-side caching is turned off: kura keeps its own L1
//     (package memstore) and invalidation policy above the seam.
//   - A read that fails on the network is retried at most
//     Options.MaxRetries times, so a dead server fails a call promptly
//     instead of being retried until the context ends.
//   - Values are binary-safe. The largest value is the server's
//     proto-max-bulk-len (512 MiB by default), read once when the Store is
//     created; larger values are refused with store.ErrValueTooLarge before
//     anything is sent.
//   - Values returned by Get and GetMany are not copied again: rueidis
//     reads every bulk string into a fresh buffer that nothing else holds
//     (client-side caching being off), so it is handed to the caller.
//
// This package is not the place for codecs, TTL jitter or read-through:
// those live above the seam in package kura.
package redisstore
