package redisstore

import (
	"math"

	hashslot "github.com/kuracache/kura/internal/slot"
)

// SlotsForTest exposes the hash-slot function to the external tests.
func SlotsForTest(keys []string) []uint16 {
	out := make([]uint16, len(keys))
	for i, k := range keys {
		out[i] = hashslot.Of(k)
	}
	return out
}

// SplitHosts exposes splitHosts to the external tests.
var SplitHosts = splitHosts

// WaitAlone makes every waiting Invalidate of s send its own DEL and WAIT
// (the behaviour before concurrent invalidations shared one), for the
// benchmark that compares the two.
func WaitAlone(s *Store) { s.combiner = nil }

// PushRefused reports that the server refused the lease path's push
// client for good (the Store polls).
func (s *Store) PushRefused() bool { return s.wake.last.Load() == math.MaxInt64 }
