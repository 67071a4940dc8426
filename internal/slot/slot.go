// Package slot computes Redis Cluster hash slots.
//
// It is the one copy of the function for the whole module: the Redis
// store uses it to name the server of a failed key, `kura bench` to send
// each command straight to the master that owns its key, and the tests to
// predict how many slots a batch spans. It knows nothing about which node
// owns a slot; that is CLUSTER SLOTS, asked by each caller.
package slot

import "strings"

// Count is the number of hash slots of a Redis Cluster.
const Count = 16384

// Of returns the hash slot of key as Redis Cluster computes it: CRC16
// (XMODEM) of the key modulo 16384, where a key holding a hash tag hashes
// the tag alone. The tag is the part between the first '{' and the first
// '}' after it, and only when that part is not empty: "{user1}.a" and
// "{user1}.b" share a slot, while "{}x" and "a{b" hash whole, and
// "{{x}}" hashes "{x".
//
// Of does not allocate. A caller holding the key as a []byte can pass
// unsafe.String of it, since Of keeps no reference to the key.
func Of(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[i]]
	}
	return crc % Count
}

// crcTable is CRC-16/XMODEM (polynomial 0x1021, no reflection, initial
// value 0) one byte at a time, computed at start-up from the polynomial
// rather than pasted, so there is no table to get wrong.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
