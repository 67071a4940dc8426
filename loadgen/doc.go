// Package loadgen is the load engine behind `kura bench`: it drives a Redis,
// Redis Cluster or memcached server with a configurable workload and reports
// throughput, hits and misses, bytes on the wire, an HdrHistogram of
// latencies, and what the server itself paid (CPU seconds and network bytes
// read from its own counters before and after the run).
//
// # Model
//
// A run has Connections workers. Each worker owns one connection to every
// server node (one for a standalone server, one per master for a cluster, one
// per memcached server in a pool) and sends Pipeline requests at a time
// before it reads their replies, exactly as redis-benchmark's -c and -P do.
//
// Without Rate the loop is closed: a worker sends its next batch as soon as
// the previous one is answered, and latency is measured from the moment a
// request is written. Such numbers hide queueing (coordinated omission): a
// stalled server simply receives fewer requests. With Rate the loop is open:
// every request has an intended send time on a fixed schedule, and latency
// is measured from that intended time, so a stall shows up in the tail as it
// would for real users (the wrk2 correction).
//
// # Wire protocols
//
// The load path speaks RESP and the memcached meta and text protocols itself
// (resp.go, memcache.go) instead of going through a general client: a load
// generator must control exactly how many connections exist, how many
// requests each has in flight, and when each request was meant to be sent,
// and it must not spend more CPU per request than the tools it is compared
// with. docs/benchmarks/bench.md has the measurements.
//
// # What it is not
//
// loadgen is not a cache client: it knows nothing about kura's value format,
// and it must not be used to talk to a server that real traffic depends on
// unless you mean to load it. The CLI (cmd/kura bench) is a thin shell that
// maps flags onto Config and prints the Result.
package loadgen
