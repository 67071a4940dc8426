package ring

import (
	"crypto/md5"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"math"
	"strconv"
	"unicode/utf8"
)

// Dalli is the ring of Ruby's dalli memcached client (Dalli::Ring, 3.x):
//
//   - a node of weight w among n nodes of total weight W gets
//     floor(n·160·w/W) points, the first 4 bytes (big-endian) of
//     SHA1("ID:k"), k = 0, 1, ...;
//   - a key hashes to its CRC-32 and belongs to the last point at or
//     before it, wrapping to the last point;
//   - with a single server there is no ring: every key is its.
//
// The ID is dalli's server name, "host:port" ([DalliID]). Keys longer than
// dalli's 250 characters are hashed as dalli sends them: the first 212
// characters, ":md5:", and the MD5 hex of the key. dalli has no hash tags.
//
// While a server is down dalli (failover: true, its default) rehashes the
// key as "<try><key>" up to 20 times until it lands on a live server; this
// type places keys as on a healthy fleet (see docs/rings.md).
type Dalli struct {
	nodes []Node
	c     continuum
}

// DalliID is the name dalli hashes for a TCP server: "host:port".
func DalliID(host string, port int) string { return host + ":" + strconv.Itoa(port) }

// NewDalli builds dalli's ring.
func NewDalli(nodes []Node) (*Dalli, error) {
	ws, total, err := check(nodes, true)
	if err != nil {
		return nil, err
	}
	r := &Dalli{nodes: cloneNodes(nodes)}
	if len(nodes) == 1 {
		return r, nil
	}
	var pts []point
	for i, n := range nodes {
		count := int(math.Floor(float64(len(nodes)*160*ws[i]) / float64(total)))
		for k := 0; k < count; k++ {
			d := sha1.Sum([]byte(n.ID + ":" + strconv.Itoa(k)))
			pts = append(pts, point{binary.BigEndian.Uint32(d[:4]), int32(i)})
		}
	}
	if len(pts) == 0 {
		return nil, ErrNoNodes
	}
	r.c = build(pts)
	return r, nil
}

// dalliKey is the key dalli's KeyManager sends (and hashes) for key.
func dalliKey(key string) string {
	const max, target, sep = 250, 249, ":md5:"
	n := len(key)
	if utf8.ValidString(key) {
		n = utf8.RuneCountInString(key)
	}
	if n <= max {
		return key
	}
	d := md5.Sum([]byte(key))
	prefix := target - (len(sep) + 2*md5.Size)
	cut := prefix
	if utf8.ValidString(key) {
		cut = 0
		for i := 0; i < prefix; i++ {
			_, size := utf8.DecodeRuneInString(key[cut:])
			cut += size
		}
	}
	return key[:cut] + sep + hex.EncodeToString(d[:])
}

// Owner implements Ring.
func (r *Dalli) Owner(key string) int {
	if r.c.points == nil {
		return 0
	}
	if len(key) > 250 {
		key = dalliKey(key)
	}
	return r.c.floor(crc32String(key))
}

// Nodes implements Ring.
func (r *Dalli) Nodes() []Node { return cloneNodes(r.nodes) }

// Mode implements Ring.
func (r *Dalli) Mode() Mode { return ModeDalli }

// crc32String is Zlib.crc32 (IEEE) of the key's bytes, byte by byte
// from the table: crc32.ChecksumIEEE would make a short key escape to the
// heap on every lookup.
func crc32String(key string) uint32 {
	if len(key) > 256 {
		return crc32.ChecksumIEEE([]byte(key))
	}
	crc := ^uint32(0)
	for i := 0; i < len(key); i++ {
		crc = crc32.IEEETable[byte(crc)^key[i]] ^ crc>>8
	}
	return ^crc
}

// FailoverOwner is where dalli (failover: true, its default) puts key
// while some servers are down: up reports whether the server at an index
// is alive. dalli tries the key's own server, then rehashes "0key",
// "1key", ... up to 20 tries; ok is false when all 20 land on dead
// servers (dalli raises "No server available").
func (r *Dalli) FailoverOwner(key string, up func(int) bool) (owner int, ok bool) {
	if r.c.points == nil {
		return 0, up(0)
	}
	if len(key) > 250 {
		key = dalliKey(key)
	}
	h := crc32String(key)
	for try := 0; try < 20; try++ {
		if o := r.c.floor(h); up(o) {
			return o, true
		}
		h = crc32String(strconv.Itoa(try) + key)
	}
	return 0, false
}
