// Package meta is a client for memcached's meta protocol (mg, ms, md, ma,
// mn) against one server: request encoding, a response parser that
// accepts every answer the protocol defines, a connection pool with
// context deadlines and idle timeouts, and pipelines of quiet commands.
//
// It is the wire layer under package memcache, which adds the
// consistent-hash server pool and the kura store.Store; it is usable on its
// own (a store's key walker and the tests use it directly; `kura bench`
// has its own encoder and reply counter, package loadgen).
//
// # Pipelines
//
// [Client.Exec] writes many requests on one connection and reads the
// answers while it writes, so a batch of any size never deadlocks on full
// socket buffers. Requests go out in windows of at most 32, each closed by
// mn; with Quiet requests only hits and failures come back, matched to
// requests by their O (opaque) token. Error lines (SERVER_ERROR, ...)
// carry no token, so they are matched by position inside their window;
// when that is not exact every candidate is reported failed
// ([ErrAmbiguous]), never silently dropped. A value of 64 KiB or more
// travels in a window of its own, so a size refusal names exactly its key.
//
// # Keys
//
// Keys are sent as is when memcached can take them (1 to 250 bytes, no
// space or control character). Others of at most 186 bytes are sent
// base64-encoded with the b flag: memcached decodes them, so the stored
// key is exactly the caller's and tools that list keys still see it.
// Longer ones (base64 of more than 186 bytes would exceed the 250-byte
// token limit, which memcached applies to the encoded form) are replaced
// by NUL + their first 100 bytes + SHA-256, also sent with b. See
// [KeyForm]. The empty key is refused with store.ErrInvalidKey.
//
// # Connections
//
// A connection whose stream may be out of step with its requests (I/O
// error, timeout, cancellation, protocol error, ERROR or CLIENT_ERROR in a
// pipeline) is closed, never reused.
//
// # Beyond get and set
//
// [Request] carries every meta flag kura needs later: CAS (C, E, c),
// leases against stampedes (N vivify and R recache on mg, answered by W,
// Z and X), invalidation (I on md and ms) and tombstones (x). The Store
// wires get, set, delete and touch today.
package meta
