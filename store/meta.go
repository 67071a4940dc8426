package store

import (
	"context"
	"time"
)

// KeyMeta is what a store can tell about a key besides its bytes, for tools
// that show a person what is cached (kura inspect, kura ui).
type KeyMeta struct {
	// TTL is the time left; NoTTL reports a key that never expires.
	TTL   time.Duration
	NoTTL bool
	// ServerBytes is the server's own accounting for the key (Redis
	// MEMORY USAGE: key, value and overhead; memcached: the value size);
	// 0 when unknown.
	ServerBytes int64
	// Node is the address of the server that holds the key.
	Node string
}

// MetaReader is the optional capability of describing a key. KeyMeta of a
// missing key returns an error matching ErrNotFound.
type MetaReader interface {
	KeyMeta(ctx context.Context, key string) (KeyMeta, error)
}
