package kura

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"

	"github.com/kuracache/kura/codec"
)

// The bytes a lease leaves under a key on stores that write placeholders
// (Redis): an envelope of kind lease holding a random token
// (docs/FORMAT.md, envelope version 2).

// leaseEntry returns a new placeholder with a fresh random token.
func leaseEntry() []byte {
	var tok [16]byte
	binary.BigEndian.PutUint64(tok[:8], rand.Uint64())
	binary.BigEndian.PutUint64(tok[8:], rand.Uint64())
	return codec.AppendEntry(make([]byte, 0, 24), codec.KindLease, codec.Fields{Token: string(tok[:])})
}

// isPlaceholder reports bytes that hold no value: a lease or a tombstone.
// Readers count them as a miss, never as a decode error, and never hand
// them to a caller. Four bytes tell: magic, version 2, kind.
func isPlaceholder(data []byte) bool {
	return len(data) >= 4 && data[0] == codec.Magic0 && data[1] == codec.Magic1 && data[2] == 2 &&
		(codec.Kind(data[3]) == codec.KindLease || codec.Kind(data[3]) == codec.KindTombstone)
}

// notUnderstood reports a decode error for an entry a newer writer made
// (a newer envelope version, kind or critical field), which readers must
// not overwrite.
func notUnderstood(err error) bool { return errors.Is(err, codec.ErrNotUnderstood) }
