package store

import "context"

// PrefixReader is the optional capability of reading a value only up to a
// size, for readers that must not load a hostile key whole: dictstore
// reading a reserved key anybody with write access may have filled, the
// console showing a key of any size. Find it with Find[PrefixReader].
type PrefixReader interface {
	// GetPrefix returns at most the first max bytes of key's value and
	// the value's full size in bytes. A store that can read part of a
	// value (Redis: GETRANGE) returns its first max bytes; one that
	// cannot (memcached) returns the whole value when it is at most max
	// bytes and nil otherwise, without reading it. A missing key matches
	// ErrNotFound.
	GetPrefix(ctx context.Context, key string, max int) (prefix []byte, size int64, err error)
}
