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

// PushRefused reports that the server refused the lease path's push
// client for good (the Store polls).
func (s *Store) PushRefused() bool { return s.wake.last.Load() == math.MaxInt64 }
