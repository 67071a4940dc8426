package memcache

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/kuracache/kura/ring"
)

// Ring maps keys to servers. By default it is libketama's ketama (package
// ring's [ring.Ketama]) with each server's address string, "host:port", as
// its identity on the ring, so other libketama clients place keys on the
// same servers:
//
//   - each server gets floor(40·n·w/Σw) MD5 digests of "addr-k" (n
//     servers, w its weight, Σw the total), k = 0, 1, ...; every digest
//     gives 4 points (its four little-endian uint32 words). With equal
//     weights that is 160 points per server.
//   - a key hashes to the first 4 bytes of MD5(key), little-endian, and
//     belongs to the first point at or after that value, wrapping around.
//
// Adding an (n+1)th server moves about 1/(n+1) of the keys, all of them to
// the new server. "localhost:11211" and "127.0.0.1:11211" are different
// servers. Options.Ring selects another peer's ring (libmemcached,
// twemproxy, dalli: see docs/rings.md), identities formed as that peer
// forms them.
//
// A Ring is immutable and safe for concurrent use.
type Ring struct {
	addrs []string
	r     ring.Ring
}

// NewRing builds the default (libketama) ring for addrs with weights (nil
// means all 1).
func NewRing(addrs []string, weights []int) (*Ring, error) {
	return newRing(addrs, weights, "", "")
}

// newRing builds the ring of mode ("" for libketama with "host:port"
// identities).
func newRing(addrs []string, weights []int, mode ring.Mode, hashTag string) (*Ring, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("memcache: no servers")
	}
	if weights != nil && len(weights) != len(addrs) {
		return nil, fmt.Errorf("memcache: Options.Weights has %d entries for %d Servers", len(weights), len(addrs))
	}
	nodes := make([]ring.Node, len(addrs))
	for i, a := range addrs {
		if a == "" {
			return nil, fmt.Errorf("memcache: Options.Servers[%d] is empty", i)
		}
		w := 1
		if weights != nil {
			w = weights[i]
		}
		if w <= 0 {
			return nil, fmt.Errorf("memcache: Options.Weights[%d] = %d, must be positive", i, w)
		}
		id, err := memcachedID(a, mode)
		if err != nil {
			return nil, err
		}
		nodes[i] = ring.Node{ID: id, Weight: w}
	}
	var r ring.Ring
	var err error
	switch mode {
	case "":
		r, err = ring.NewKetama(nodes)
	case ring.ModeKetama, ring.ModeTwemproxy, ring.ModeTwemproxyFNV, ring.ModeDalli:
		r, err = ring.New(mode, nodes, ring.Options{HashTag: hashTag})
	default:
		return nil, fmt.Errorf("memcache: Options.Ring %q is not a memcached client's ring (ketama, twemproxy, twemproxy-fnv1a, dalli)", mode)
	}
	if err != nil {
		return nil, fmt.Errorf("memcache: %w", err)
	}
	return &Ring{addrs: slices.Clone(addrs), r: r}, nil
}

// memcachedID is the identity mode's peer hashes for the server at addr.
func memcachedID(addr string, mode ring.Mode) (string, error) {
	switch mode {
	case "", ring.ModeDalli:
		return addr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("memcache: server %q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("memcache: server %q: bad port", addr)
	}
	return ring.LibmemcachedID(host, p), nil
}

// Servers returns the addresses in configuration order.
func (r *Ring) Servers() []string { return slices.Clone(r.addrs) }

// Index returns the position in Servers of the server owning key.
func (r *Ring) Index(key string) int { return r.r.Owner(key) }

// Server returns the address of the server owning key.
func (r *Ring) Server(key string) string { return r.addrs[r.Index(key)] }
