// Package memcache is kura's memcached backend: a store.Store over a pool
// of memcached servers speaking the meta protocol.
//
// Keys are placed by ketama consistent hashing ([Ring]: libketama's MD5
// layout, 160 points per server at weight 1), so adding a server moves
// only about 1/(n+1) of the keys. Batches ([Store.GetMany],
// [Store.SetMany], [Store.DeleteMany]) cost one round trip per server:
// the keys of each server go out as one pipeline of quiet meta commands
// closed by mn, to all servers at once, read while written so no batch
// size can deadlock, and only failures come back. Every failure is
// reported per key with its server in a *store.BatchError; none is
// dropped.
//
// Values over [Store.MaxValueSize] (the server's item_size_max, read with
// stats settings, minus [ItemOverhead]) fail with store.ErrValueTooLarge
// before they are sent. Keys memcached cannot take as they are travel
// base64-encoded or hashed (see meta.KeyForm); the empty key fails with
// store.ErrInvalidKey. TTLs beyond 30 days are sent as absolute times, as
// memcached requires.
//
// [New] does not need the servers: it waits at most Options.StartWait
// (500 ms) for their first answers (which tell item_size_max), a refused
// or unresolvable server not at all, and a server that is down only fails
// its own keys (store.NodeError naming it; a Cache goes to the loader)
// until it answers. Every new connection looks the server's host name up
// again (Options.Resolver), so a node replaced under the same name at a
// new address is used once the old connections fail. While a server has
// not answered since a failure, each new connection proves it answers (an
// mn, or the settings read) before a command is sent on it, so a stopped
// server that resumes does not run requests whose callers gave up long
// ago. [Store.ConnStats] shows the connections per server.
//
// What it is not: no failover to another server (a down server's keys
// fail fast and the Cache above falls back to its loader), no codec (the
// Cache encodes values), no health checks of its own beyond [Store.Ping].
// The wire protocol lives in package meta, which can be used alone.
package memcache
