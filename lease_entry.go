package kura

import (
	"encoding/binary"
	"math/rand/v2"
)

// The bytes a lease leaves under a key on stores that write placeholders
// (Redis): an envelope of kind "lease" holding a random token
// (docs/FORMAT.md, envelope version 2). These two functions are the only
// place that knows the layout, so that the codec's own AppendEntry and
// ParseHeader can take over without touching the read-through code.

// leaseEntry returns a new placeholder with a fresh random token.
func leaseEntry() []byte {
	var tok [16]byte
	binary.BigEndian.PutUint64(tok[:8], rand.Uint64())
	binary.BigEndian.PutUint64(tok[8:], rand.Uint64())
	// magic, version 2, kind lease, fields length, tag token, length, token
	b := make([]byte, 0, 4+2+2+len(tok))
	b = append(b, 0xC1, 0x4B, 0x02, kindLease)
	b = binary.AppendUvarint(b, uint64(2+len(tok)))
	b = append(b, tagToken, byte(len(tok)))
	return append(b, tok[:]...)
}

const (
	kindLease     = 2
	kindTombstone = 3
	tagToken      = 0x05
)

// isPlaceholder reports bytes that hold no value: a lease or a tombstone
// (envelope version 2, kinds 2 and 3). Readers count them as a miss, never
// as a decode error, and never hand them to a caller.
func isPlaceholder(data []byte) bool {
	return len(data) >= 4 && data[0] == 0xC1 && data[1] == 0x4B && data[2] == 0x02 &&
		(data[3] == kindLease || data[3] == kindTombstone)
}

// notUnderstood reports a decode error for an entry a newer writer made
// (a newer envelope version, kind or critical field), which readers must
// not overwrite.
func notUnderstood(err error) bool { return false }
