package memcache

import (
	"context"
	"strconv"
)

// NodeKeys returns one variant of key per server of the pool, "key#n" with
// the smallest n the ring places on that server, in the order of
// Options.Servers. Data that must be readable whichever server a key
// hashes to, or while one server is down (a compression dictionary), is
// written under all of them.
func (s *Store) NodeKeys(_ context.Context, key string) ([]string, error) {
	n := len(s.clients)
	keys := make([]string, n)
	found := 0
	// A try lands on a given server with probability about 1/n (its share
	// of the ring), so 64n tries leave a server out only by a freak.
	for i := 0; found < n && i < 64*n+1024; i++ {
		k := key + "#" + strconv.Itoa(i)
		if idx := s.ring.Index(k); keys[idx] == "" {
			keys[idx] = k
			found++
		}
	}
	out := keys[:0]
	for _, k := range keys {
		if k != "" {
			out = append(out, k)
		}
	}
	return out, nil
}
