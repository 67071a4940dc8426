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
// What it is not: no failover to another server (a down server's keys
// fail fast and the Cache above falls back to its loader), no codec (the
// Cache encodes values), no health checks of its own beyond [Store.Ping].
// The wire protocol lives in package meta, which can be used alone.
package memcache
