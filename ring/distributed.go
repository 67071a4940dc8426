package ring

import (
	"strconv"
)

// Distributed is the ring of redis-rb's Redis::Distributed (Redis::HashRing,
// redis-rb 4.x):
//
//   - each node gets 160 points, CRC-32 of "ID:k", k = 0, 1, ...; where
//     two nodes' points collide, the node added later owns it;
//   - a key hashes to its CRC-32 and belongs to the last point at or
//     before it, wrapping to the last point;
//   - the key hashed is its tag when it matches redis-rb's default tag
//     pattern /^\{(.+?)\}/ ("{user:1}:cart" hashes "user:1"; the brace
//     must open the key, or a line of it), else the whole key.
//
// The ID is redis-rb's node id: the client's :id option, by default its
// URL with the db, "redis://host:port/db" ([RedisRbID]). redis-rb has no
// weights.
type Distributed struct {
	nodes []Node
	c     continuum
}

// RedisRbID is redis-rb's default node id for a TCP server: its URL with
// the database number.
func RedisRbID(host string, port, db int) string {
	return "redis://" + host + ":" + strconv.Itoa(port) + "/" + strconv.Itoa(db)
}

// NewDistributed builds redis-rb's ring.
func NewDistributed(nodes []Node) (*Distributed, error) {
	if _, _, err := check(nodes, false); err != nil {
		return nil, err
	}
	pts := make([]point, 0, 160*len(nodes))
	for i, n := range nodes {
		for k := 0; k < 160; k++ {
			pts = append(pts, point{crc32String(n.ID + ":" + strconv.Itoa(k)), int32(i)})
		}
	}
	return &Distributed{nodes: cloneNodes(nodes), c: build(pts)}, nil
}

// Owner implements Ring.
func (r *Distributed) Owner(key string) int {
	if tag, ok := rubyTag(key); ok {
		key = tag
	}
	return r.c.floor(crc32String(key))
}

// Nodes implements Ring.
func (r *Distributed) Nodes() []Node { return cloneNodes(r.nodes) }

// Mode implements Ring.
func (r *Distributed) Mode() Mode { return ModeDistributed }
