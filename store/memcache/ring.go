package memcache

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
)

// Ring maps keys to servers with ketama consistent hashing, laid out as
// libketama does so other ketama clients (libmemcached in ketama
// compatibility mode, pylibmc, spymemcached's KETAMA_HASH) place keys on
// the same servers:
//
//   - each server gets floor(40·n·w/Σw) MD5 digests of "addr-k" (n
//     servers, w its weight, Σw the total), k = 0, 1, ...; every digest
//     gives 4 points (its four little-endian uint32 words). With equal
//     weights that is 160 points per server.
//   - a key hashes to the first 4 bytes of MD5(key), little-endian, and
//     belongs to the first point at or after that value, wrapping around.
//
// Adding an (n+1)th server moves about 1/(n+1) of the keys, all of them to
// the new server. The address string is the server's identity on the
// ring: "localhost:11211" and "127.0.0.1:11211" are different servers.
//
// A Ring is immutable and safe for concurrent use.
type Ring struct {
	addrs  []string
	points []uint32
	owner  []int32
}

// NewRing builds the ring for addrs with weights (nil means all 1).
func NewRing(addrs []string, weights []int) (*Ring, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("memcache: no servers")
	}
	if weights != nil && len(weights) != len(addrs) {
		return nil, fmt.Errorf("memcache: Options.Weights has %d entries for %d Servers", len(weights), len(addrs))
	}
	total := 0
	seen := map[string]bool{}
	for i, a := range addrs {
		if a == "" {
			return nil, fmt.Errorf("memcache: Options.Servers[%d] is empty", i)
		}
		if seen[a] {
			return nil, fmt.Errorf("memcache: Options.Servers lists %q twice", a)
		}
		seen[a] = true
		w := 1
		if weights != nil {
			w = weights[i]
		}
		if w <= 0 {
			return nil, fmt.Errorf("memcache: Options.Weights[%d] = %d, must be positive", i, w)
		}
		total += w
	}
	type point struct {
		v     uint32
		owner int32
	}
	var pts []point
	n := len(addrs)
	for i, a := range addrs {
		w := 1
		if weights != nil {
			w = weights[i]
		}
		hashes := 40 * n * w / total
		for k := 0; k < hashes; k++ {
			d := md5.Sum([]byte(a + "-" + strconv.Itoa(k)))
			for h := 0; h < 4; h++ {
				pts = append(pts, point{binary.LittleEndian.Uint32(d[h*4:]), int32(i)})
			}
		}
	}
	slices.SortFunc(pts, func(x, y point) int {
		if x.v != y.v {
			if x.v < y.v {
				return -1
			}
			return 1
		}
		return int(x.owner - y.owner)
	})
	r := &Ring{addrs: slices.Clone(addrs), points: make([]uint32, len(pts)), owner: make([]int32, len(pts))}
	for i, p := range pts {
		r.points[i], r.owner[i] = p.v, p.owner
	}
	if len(pts) == 0 {
		return nil, fmt.Errorf("memcache: weights leave no server on the ring")
	}
	return r, nil
}

// Servers returns the addresses in configuration order.
func (r *Ring) Servers() []string { return slices.Clone(r.addrs) }

// Index returns the position in Servers of the server owning key.
func (r *Ring) Index(key string) int {
	// Hash from a stack buffer: []byte(key) escapes into md5 and would
	// allocate for every key longer than 32 bytes.
	var buf [256]byte
	var d [md5.Size]byte
	if len(key) <= len(buf) {
		d = md5.Sum(append(buf[:0], key...))
	} else {
		d = md5.Sum([]byte(key))
	}
	h := binary.LittleEndian.Uint32(d[:4])
	i, _ := slices.BinarySearch(r.points, h)
	if i == len(r.points) {
		i = 0
	}
	return int(r.owner[i])
}

// Server returns the address of the server owning key.
func (r *Ring) Server(key string) string { return r.addrs[r.Index(key)] }
