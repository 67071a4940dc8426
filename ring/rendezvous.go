package ring

import "github.com/cespare/xxhash/v2"

// Rendezvous is go-redis v9's Ring placement: highest random weight over
// the shard names.
//
//   - a key hashes to xxhash64 of its hash tag (the bytes between the
//     first '{' and the next '}', when not empty, as in Redis Cluster),
//     else of the whole key;
//   - each shard scores mix64(keyhash ^ xxhash64(name)) (an xorshift and
//     a multiply); the highest score owns the key, the first shard on a
//     tie.
//
// The ID is the shard's name: the key of RingOptions.Addrs, not its
// address. go-redis has no weights. go-redis rebuilds the ring over the
// shards its heartbeat sees up, so while a shard is down its keys move to
// the others (see docs/rings.md); this type places keys as on a healthy
// fleet.
type Rendezvous struct {
	nodes  []Node
	hashes []uint64
}

// NewRendezvous builds go-redis's rendezvous ring.
func NewRendezvous(nodes []Node) (*Rendezvous, error) {
	if _, _, err := check(nodes, false); err != nil {
		return nil, err
	}
	r := &Rendezvous{nodes: cloneNodes(nodes), hashes: make([]uint64, len(nodes))}
	for i, n := range nodes {
		r.hashes[i] = xxhash.Sum64String(n.ID)
	}
	return r, nil
}

// Owner implements Ring.
func (r *Rendezvous) Owner(key string) int {
	kh := xxhash.Sum64String(tagBetween(key, '{', '}'))
	best, score := 0, mix64(kh^r.hashes[0])
	for i := 1; i < len(r.hashes); i++ {
		if s := mix64(kh ^ r.hashes[i]); s > score {
			best, score = i, s
		}
	}
	return best
}

func mix64(x uint64) uint64 {
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	return x * 2685821657736338717
}

// Nodes implements Ring.
func (r *Rendezvous) Nodes() []Node { return cloneNodes(r.nodes) }

// Mode implements Ring.
func (r *Rendezvous) Mode() Mode { return ModeRendezvous }
