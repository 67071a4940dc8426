// Package readcheck holds the tests that check kura's read path per read:
// real processes (internal/harness/proctest) read, load, write and invalidate keys
// through a Cache on real servers (a redis-server, a 3-master Redis
// Cluster, 3 standalone Redis shards behind store/redisring, 3 memcached
// servers) and on memstore, in every combination of
// leases, L1, the health wrapper, stale-while-revalidate and early refresh
// that exists, and each recorded history is checked against the guarantee
// the documentation gives for its combination (internal/harness/history). The
// same runs check that every store call passes through every wrapper, and
// injected faults prove that the checker sees a violation.
//
// The package has no code of its own; see its tests.
package readcheck
