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
