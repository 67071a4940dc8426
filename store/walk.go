package store

import (
	"context"
	"errors"
)

// ErrCannotWalk is returned by a wrapper's WalkNodes when the store it
// wraps cannot list its keys.
var ErrCannotWalk = errors.New("kura: this store cannot list its keys")

// KeyWalker is the optional capability of listing the keys a store holds,
// node by node, without blocking a server the way KEYS would: Redis SCAN
// on every master, memcached's `lru_crawler metadump`. Tools use it (kura
// scan, kura codecs sampling a live store); the read path never does.
//
// Find it through wrappers with [Find]: a wrapper lets it through only by
// implementing it (store/health does: the walkers use connections of
// their own, apart from the application's traffic the breaker guards).
type KeyWalker interface {
	// WalkNodes returns one walker per node holding data (every master of
	// a Redis Cluster, every shard of a sharded Redis, every server of a
	// memcached pool) and the kind of deployment they form, for reports:
	// "redis", "redis-cluster", "redis-ring" or "memcached". It fails
	// when the store has not reached its servers (the caller sees why).
	// The caller closes the walkers.
	WalkNodes(ctx context.Context) (kind string, nodes []NodeWalker, err error)
}

// NodeWalker lists and reads the keys of one node on connections of its
// own. A NodeWalker is used by one goroutine at a time.
type NodeWalker interface {
	// Addr is the node's address, as NodeError.Addr names it.
	Addr() string
	// Walk calls fn for every key on the node (a key written during the
	// walk may or may not be seen), stopping at fn's first error.
	Walk(ctx context.Context, opts WalkOptions, fn func(KeyInfo) error) error
	// Read returns the raw bytes of keys on this node, nil for a key that
	// is gone or holds no plain value (a Redis hash, say), without
	// bumping an item in memcached's LRU. It sends one command per key,
	// unpaced: the caller paces (WalkOptions.Pace is the walk's only).
	Read(ctx context.Context, keys []string) ([][]byte, error)
	// Close releases the walker's connections.
	Close() error
}

// WalkOptions configures NodeWalker.Walk. The zero value lists and
// describes every key, 500 a batch, unpaced.
type WalkOptions struct {
	// Prefix keeps only keys that start with it ("" keeps all).
	Prefix string
	// Count is the batch size: Redis SCAN's COUNT hint and the length of
	// the pipelines that describe keys. If zero, 500.
	Count int
	// KeysOnly lists keys without describing them: KeyInfo has only Key
	// and Node, and no command is sent per key.
	KeysOnly bool
	// Pace, when set, is called before each batch of n commands is sent
	// to the node, and may wait to keep a rate; an error from it ends the
	// walk with that error.
	Pace func(ctx context.Context, n int) error
}

// KeyInfo describes one key a NodeWalker found.
type KeyInfo struct {
	Key string
	// Node is the address of the node that holds the key.
	Node string
	// Type is the Redis type ("string", "hash", ...) or "item" for a
	// memcached item.
	Type string
	// TTLSeconds is the time left, -1 for a key without expiry.
	TTLSeconds float64
	// Length is the string length or the collection's element count.
	Length int64
	// ValueBytes is the string length; for a Redis collection, its MEMORY
	// USAGE.
	ValueBytes int64
	// MemoryBytes is the server's memory for the key: Redis MEMORY USAGE
	// (0 where the server refuses it), memcached's item size.
	MemoryBytes int64
}
