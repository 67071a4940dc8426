package ring

import (
	"crypto/md5"
	"encoding/binary"
	"math"
	"strconv"
)

// Ketama is libketama's ring, as libmemcached lays it out in weighted
// ketama mode (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED: pylibmc's
// "ketama_weighted", PHP memcached's OPT_LIBKETAMA_COMPATIBLE):
//
//   - a node of weight w among n nodes of total weight W gets
//     floor(w/W · 40 · n) MD5 digests of "ID-k", k = 0, 1, ...; each
//     digest gives 4 points, its four little-endian 32-bit words (160
//     points per node at equal weights);
//   - a key hashes to the first 4 bytes of MD5(key), little-endian, and
//     belongs to the first point at or after it, wrapping around.
//
// The ID is what libmemcached hashes: see [LibmemcachedID]. No hash tags:
// libmemcached hashes whole keys.
type Ketama struct {
	nodes []Node
	c     continuum
}

// LibmemcachedID is the identity libmemcached hashes for a server: the
// host alone on the default port 11211, else "host:port".
func LibmemcachedID(host string, port int) string {
	if port == 11211 {
		return host
	}
	return host + ":" + strconv.Itoa(port)
}

// NewKetama builds the libmemcached weighted ketama ring.
func NewKetama(nodes []Node) (*Ketama, error) {
	c, err := ketamaContinuum(nodes, func(d float64) int {
		// libmemcached: floor(pct * 160 / 4 * (float)n + 1e-10), the
		// sum in double.
		return int(math.Floor(d))
	})
	if err != nil {
		return nil, err
	}
	return &Ketama{nodes: cloneNodes(nodes), c: c}, nil
}

// ketamaContinuum lays out libketama's points: for each node, pct (a C
// float) = weight/total, and digests(float64(pct*160/4*float(n)) + 1e-10)
// MD5 digests of "ID-k". libmemcached and twemproxy floor that sum
// differently.
func ketamaContinuum(nodes []Node, digests func(float64) int) (continuum, error) {
	ws, total, err := check(nodes, true)
	if err != nil {
		return continuum{}, err
	}
	var pts []point
	for i, n := range nodes {
		pct := float32(ws[i]) / float32(total)
		pts = appendKetamaPoints(pts, n.ID, digests(float64(pct*160/4*float32(len(nodes)))+0.0000000001), int32(i))
	}
	if len(pts) == 0 {
		return continuum{}, ErrNoNodes
	}
	return build(pts), nil
}

// appendKetamaPoints adds the 4·digests points of the node id.
func appendKetamaPoints(pts []point, id string, digests int, owner int32) []point {
	buf := make([]byte, 0, len(id)+12)
	for k := 0; k < digests; k++ {
		buf = append(append(append(buf[:0], id...), '-'), strconv.Itoa(k)...)
		d := md5.Sum(buf)
		for h := 0; h < 4; h++ {
			pts = append(pts, point{binary.LittleEndian.Uint32(d[h*4:]), owner})
		}
	}
	return pts
}

// md5Hash is ketama's key hash: the first 4 bytes of MD5, little-endian.
func md5Hash(key string) uint32 {
	// Hash from a stack buffer: []byte(key) escapes into md5 and would
	// allocate for every key longer than 32 bytes.
	var buf [256]byte
	var d [md5.Size]byte
	if len(key) <= len(buf) {
		d = md5.Sum(append(buf[:0], key...))
	} else {
		d = md5.Sum([]byte(key))
	}
	return binary.LittleEndian.Uint32(d[:4])
}

// Owner implements Ring.
func (r *Ketama) Owner(key string) int { return r.c.ceil(md5Hash(key)) }

// Nodes implements Ring.
func (r *Ketama) Nodes() []Node { return cloneNodes(r.nodes) }

// Mode implements Ring.
func (r *Ketama) Mode() Mode { return ModeKetama }

// Points is the number of points on the ring.
func (r *Ketama) Points() int { return len(r.c.points) }

// TwemproxyHash is the key hash of a twemproxy pool.
type TwemproxyHash int

// The twemproxy key hashes kura reproduces.
const (
	// TwemproxyMD5 is "hash: md5": the first 4 bytes of MD5(key),
	// little-endian.
	TwemproxyMD5 TwemproxyHash = iota
	// TwemproxyFNV1a64 is "hash: fnv1a_64", which is not the textbook
	// 64-bit FNV-1a: twemproxy truncates the offset basis and the prime
	// to 32 bits, multiplies in 32 bits and sign-extends each byte (C
	// char) before the xor.
	TwemproxyFNV1a64
)

// Twemproxy is twemproxy's (nutcracker's) "distribution: ketama" ring.
// The points are libketama's, with twemproxy's own float arithmetic for
// the number of digests per server; the ID is the server's name in the
// pool's configuration: the name after the weight if one is given
// ("127.0.0.1:11211:1 cache-a" is "cache-a"), else what libmemcached
// hashes, "host:port" or the host alone on port 11211 ([LibmemcachedID]). Keys hash with md5 or fnv1a_64; with a hash_tag (e.g. "{}"),
// only the part between the first tag byte and the next closing byte
// hashes, when it is not empty.
type Twemproxy struct {
	nodes []Node
	hash  TwemproxyHash
	tag   [2]byte
	c     continuum
}

// NewTwemproxy builds a twemproxy ketama ring with the key hash h and the
// pool's hash_tag ("" for none, else exactly two bytes).
func NewTwemproxy(nodes []Node, h TwemproxyHash, hashTag string) (*Twemproxy, error) {
	if hashTag != "" && len(hashTag) != 2 {
		return nil, errHashTag(hashTag)
	}
	c, err := ketamaContinuum(nodes, func(d float64) int {
		// nc_ketama.c: floorf(pct * 160 / 4 * (float)n + 1e-10): the
		// double sum goes back to float before the floor.
		return int(math.Floor(float64(float32(d))))
	})
	if err != nil {
		return nil, err
	}
	r := &Twemproxy{nodes: cloneNodes(nodes), hash: h, c: c}
	if hashTag != "" {
		r.tag = [2]byte{hashTag[0], hashTag[1]}
	}
	return r, nil
}

// Owner implements Ring.
func (r *Twemproxy) Owner(key string) int {
	if r.tag[0] != 0 || r.tag[1] != 0 {
		key = tagBetween(key, r.tag[0], r.tag[1])
	}
	if r.hash == TwemproxyFNV1a64 {
		return r.c.ceil(twemproxyFNV1a64(key))
	}
	return r.c.ceil(md5Hash(key))
}

// Nodes implements Ring.
func (r *Twemproxy) Nodes() []Node { return cloneNodes(r.nodes) }

// Mode implements Ring.
func (r *Twemproxy) Mode() Mode {
	if r.hash == TwemproxyFNV1a64 {
		return ModeTwemproxyFNV
	}
	return ModeTwemproxy
}

// twemproxyFNV1a64 is nc_hashkit's hash_fnv1a_64.
func twemproxyFNV1a64(key string) uint32 {
	// FNV_64_INIT 0xcbf29ce484222325 and FNV_64_PRIME 0x100000001b3,
	// truncated to 32 bits as twemproxy's (uint32_t) casts do.
	const offset, prime = 0x84222325, 0x000001b3
	h := uint32(offset)
	for i := 0; i < len(key); i++ {
		h ^= uint32(int32(int8(key[i])))
		h *= prime
	}
	return h
}
