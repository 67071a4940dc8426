// Package ring tells which server owns a key, the way the clients already
// on those servers tell it.
//
// A fleet of cache servers sharded on the client side works only while every
// client agrees on the owner of every key: a Go service that hashes
// differently from the Rails app beside it misses on most keys and its
// Invalidate never reaches the copies the other side reads. So this package
// holds one type per peer algorithm, each reproducing that peer key for key
// (verified in its tests against the real program on the same keys):
//
//   - [Ketama]: libketama and libmemcached's weighted ketama (pylibmc with
//     ketama, PHP's OPT_LIBKETAMA_COMPATIBLE, spymemcached KETAMA_HASH);
//   - [Twemproxy]: twemproxy (nutcracker) with distribution ketama and hash
//     md5 or fnv1a_64, optionally with a hash_tag;
//   - [Dalli]: Ruby's dalli memcached client;
//   - [Distributed]: redis-rb's Redis::Distributed;
//   - [Rendezvous]: go-redis v9's Ring.
//
// Every type implements [Ring]; [New] builds one by [Mode] name, which is how
// a store's URL selects it. A node's identity is the string the peer hashes
// (a host:port, a URL, a shard name); the helpers [LibmemcachedID],
// [DalliID] and [RedisRbID] form it as those peers do.
package ring

import (
	"errors"
	"fmt"
	"strings"
)

// Node is one server on a ring.
type Node struct {
	// ID is the string the algorithm hashes to place the node: what the
	// peer calls the server (see the helpers for each peer). Two nodes
	// must not share an ID.
	ID string
	// Weight is the node's relative share of the keys; 0 means 1. Only
	// the modes whose peer has weights (Ketama, Twemproxy, Dalli) use it;
	// the others refuse a weight other than 0 or 1.
	Weight int
}

// Ring tells which node owns a key. Implementations are immutable and
// safe for concurrent use.
type Ring interface {
	// Owner returns the index, in the nodes the ring was built from, of
	// the node that owns key.
	Owner(key string) int
	// Nodes returns the nodes in the order the ring was built from.
	Nodes() []Node
	// Mode names the algorithm.
	Mode() Mode
}

// Mode names a ring algorithm.
type Mode string

// The ring modes.
const (
	ModeKetama       Mode = "ketama"          // libketama / libmemcached weighted ketama
	ModeTwemproxy    Mode = "twemproxy"       // twemproxy ketama with hash md5
	ModeTwemproxyFNV Mode = "twemproxy-fnv1a" // twemproxy ketama with hash fnv1a_64
	ModeDalli        Mode = "dalli"           // Ruby dalli
	ModeDistributed  Mode = "redis-rb"        // Ruby redis-rb Redis::Distributed
	ModeRendezvous   Mode = "go-redis"        // go-redis v9 Ring
)

// Modes lists every mode New accepts.
var Modes = []Mode{ModeKetama, ModeTwemproxy, ModeTwemproxyFNV, ModeDalli, ModeDistributed, ModeRendezvous}

// Options tunes New. The zero value is each peer's default.
type Options struct {
	// HashTag, for the Twemproxy modes, is twemproxy's hash_tag: two
	// bytes such as "{}"; "" (the default) hashes whole keys. The other
	// modes treat tags as their peer does, always.
	HashTag string
}

// ErrNoNodes is returned when a ring is built from no nodes.
var ErrNoNodes = errors.New("kura: ring has no nodes")

// ErrMode is returned by New for a mode it does not know.
var ErrMode = errors.New("kura: unknown ring mode")

// New builds the ring of mode over nodes.
func New(mode Mode, nodes []Node, opts Options) (Ring, error) {
	switch mode {
	case ModeKetama:
		return NewKetama(nodes)
	case ModeTwemproxy:
		return NewTwemproxy(nodes, TwemproxyMD5, opts.HashTag)
	case ModeTwemproxyFNV:
		return NewTwemproxy(nodes, TwemproxyFNV1a64, opts.HashTag)
	case ModeDalli:
		return NewDalli(nodes)
	case ModeDistributed:
		return NewDistributed(nodes)
	case ModeRendezvous:
		return NewRendezvous(nodes)
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return nil, fmt.Errorf("%w %q (one of %s)", ErrMode, mode, strings.Join(names, ", "))
}

// check validates nodes and returns their weights (0 read as 1).
func check(nodes []Node, weighted bool) ([]int, int, error) {
	if len(nodes) == 0 {
		return nil, 0, ErrNoNodes
	}
	seen := make(map[string]bool, len(nodes))
	ws := make([]int, len(nodes))
	total := 0
	for i, n := range nodes {
		if n.ID == "" {
			return nil, 0, fmt.Errorf("kura: ring node %d has an empty ID", i)
		}
		if seen[n.ID] {
			return nil, 0, fmt.Errorf("kura: ring lists node %q twice", n.ID)
		}
		seen[n.ID] = true
		w := n.Weight
		if w == 0 {
			w = 1
		}
		if w < 0 || w > 1<<20 {
			return nil, 0, fmt.Errorf("kura: ring node %q has weight %d (want 1 to %d)", n.ID, n.Weight, 1<<20)
		}
		if w != 1 && !weighted {
			return nil, 0, fmt.Errorf("kura: ring node %q has weight %d, but this ring's peer has no weights", n.ID, n.Weight)
		}
		ws[i] = w
		total += w
	}
	return ws, total, nil
}

func cloneNodes(nodes []Node) []Node { return append([]Node(nil), nodes...) }
