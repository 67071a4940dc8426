// Package leaserace holds the multi-process race tests of kura's leases
// (issue "no stale value survives an invalidation, and one loader call per
// key across processes"): real processes (internal/harness/proctest) against real
// Redis, a 3-master Redis Cluster and a pool of 3 memcached servers.
//
//   - Stale: 4 processes × 20 readers Fetch one key (5 ms loader reading a
//     counter in a separate Redis, the source of truth) while the test
//     updates the counter and Invalidates the key; after each round, once
//     every Fetch has returned, the cached value must exist and equal the
//     source. The same run with leases off is the control and must show
//     stale rounds, or the test proves nothing.
//   - Stampede: 4 processes × 250 goroutines Fetch one cold key at once:
//     exactly one loader call in all; FetchMany of 100 cold keys: each key
//     loaded once; a loader slower than LeaseWait: the fail-open count.
//   - Holder dies: the process holding a lease is killed mid-load; another
//     process loads once the lease expires, and nobody waits past its
//     context.
//
// Sizes are small by default; KURA_SOAK=1 runs the full sizes.
package leaserace
