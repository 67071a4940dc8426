package codec

import (
	"encoding/binary"
	"math/rand/v2"
)

// NewLeaseEntry returns a new lease placeholder with a fresh random
// 16-byte token: the bytes a lease leaves under a key on stores that write
// placeholders (Redis), an envelope of kind lease (docs/FORMAT.md, version
// 2). Every kura reader counts it as a miss. The read path's leases and a
// move's guards (store/move) are such placeholders.
func NewLeaseEntry() []byte {
	var tok [16]byte
	binary.BigEndian.PutUint64(tok[:8], rand.Uint64())
	binary.BigEndian.PutUint64(tok[8:], rand.Uint64())
	return AppendEntry(make([]byte, 0, 24), KindLease, Fields{Token: string(tok[:])})
}

// IsPlaceholder reports bytes that hold no value: an entry of kind lease
// (NewLeaseEntry) or tombstone. Every kura reader counts them as a miss,
// never as a decode error, never hands them to a caller, and a copy
// (store/move) never moves one. The first four bytes tell: magic,
// version 2, kind; nothing else is read, so it costs no parse.
func IsPlaceholder(data []byte) bool {
	return len(data) >= 4 && data[0] == Magic0 && data[1] == Magic1 && data[2] == Version &&
		(Kind(data[3]) == KindLease || Kind(data[3]) == KindTombstone)
}
