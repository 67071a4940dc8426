package loadgen

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/kuracache/kura/internal/slot"
	"github.com/kuracache/kura/internal/wire"
	"github.com/kuracache/kura/ring"
)

// slotCount is the number of Redis Cluster hash slots.
const slotCount = slot.Count

// topology maps a key to the node that owns it. For a standalone server and
// a one-server memcached pool there is one node; for Redis Cluster the
// owner of the key's hash slot; for a memcached pool the server that
// kura's own ketama ring picks (package ring's libketama
// ring with "host:port" identities, as store/memcache places keys), and for sharded
// Redis (redis+ring://) the shard store/redisring's ring picks, so a
// benchmark loads each server with exactly the keys a kura application
// would send it.
type topology struct {
	addrs   []string
	cluster bool
	owner   [slotCount]uint16 // slot to index in addrs, cluster only
	// place is the ring of a memcached pool or of Redis shards (more than
	// one server); it keeps no reference to the key.
	place   func(key string) int
	version int
}

func (t *topology) route(key []byte) int {
	switch {
	case len(t.addrs) == 1:
		return 0
	case t.cluster:
		// unsafe.String: slot.Of keeps no reference, and string(key)
		// would allocate for keys longer than 32 bytes.
		return int(t.owner[slot.Of(unsafe.String(unsafe.SliceData(key), len(key)))])
	}
	// The same: the rings keep no reference to the key.
	return t.place(unsafe.String(unsafe.SliceData(key), len(key)))
}

// clusterState holds the current topology; workers follow MOVED replies by
// asking it to refresh.
type clusterState struct {
	s *settings

	mu      sync.Mutex
	cur     *topology
	lastRef time.Time
}

func (cs *clusterState) get() *topology {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.cur
}

// refresh reloads CLUSTER SLOTS, at most every 100ms however many workers
// saw a MOVED.
func (cs *clusterState) refresh(ctx context.Context) {
	cs.mu.Lock()
	if time.Since(cs.lastRef) < 100*time.Millisecond {
		cs.mu.Unlock()
		return
	}
	cs.lastRef = time.Now()
	seeds := append([]string(nil), cs.cur.addrs...)
	ver := cs.cur.version
	cs.mu.Unlock()
	t, err := loadSlots(ctx, cs.s, seeds)
	if err != nil {
		return // keep the old map; the MOVED errors are counted
	}
	t.version = ver + 1
	cs.mu.Lock()
	cs.cur = t
	cs.mu.Unlock()
}

// discover connects to the target's seeds and returns its topology,
// checking that a target meant to be a cluster is one and that a
// cluster-enabled server is treated as one.
func discover(ctx context.Context, s *settings) (*topology, error) {
	t := s.target
	if t.Kind == KindMemcached {
		top := &topology{addrs: t.Addrs}
		if len(t.Addrs) > 1 {
			seen := map[string]bool{}
			for _, a := range t.Addrs {
				if seen[a] {
					return nil, cfgErr("target %s names %s twice; a memcached pool lists each server once", t, a)
				}
				seen[a] = true
			}
			nodes := make([]ring.Node, len(t.Addrs))
			for i, a := range t.Addrs {
				nodes[i] = ring.Node{ID: a}
			}
			r, err := ring.NewKetama(nodes)
			if err != nil {
				return nil, cfgErr("target %s: %v", t, err)
			}
			top.place = r.Owner
		}
		for _, a := range t.Addrs {
			c, err := dial(ctx, s, a)
			if err != nil {
				return nil, err
			}
			err = c.memcachedHello(s.Protocol == "meta")
			c.close()
			if err != nil {
				return nil, err
			}
		}
		return top, nil
	}
	if t.Ring != nil {
		return shards(ctx, s)
	}
	if t.MasterSet != "" {
		primary, err := askSentinels(ctx, s)
		if err != nil {
			return nil, err
		}
		s.target.Addrs = []string{primary}
		t = s.target
	}
	var lastErr error
	for _, seed := range t.Addrs {
		c, err := dial(ctx, s, seed)
		if err != nil {
			lastErr = err
			if len(t.Addrs) == 1 || isAuthError(err) {
				return nil, err
			}
			continue
		}
		v, err := c.redisDo("INFO", "cluster")
		c.close()
		if err != nil {
			return nil, fmt.Errorf("redis at %s: INFO cluster: %v", seed, err)
		}
		info, _ := v.(string)
		enabled := wire.ParseInfo(info)["cluster_enabled"] == "1"
		if !enabled {
			if t.Cluster {
				why := "--cluster was given"
				if len(t.Addrs) > 1 {
					why = "the target names several addresses"
				}
				return nil, fmt.Errorf("%s but redis at %s is not a cluster node (cluster_enabled:0); name one standalone server without --cluster, or point at a Redis Cluster", why, seed)
			}
			return &topology{addrs: []string{seed}}, nil
		}
		if t.DB != 0 {
			return nil, cfgErr("redis at %s is a cluster node and Redis Cluster has only database 0; drop /%d from the URL", seed, t.DB)
		}
		s.target.Cluster = true
		return loadSlots(ctx, s, t.Addrs)
	}
	return nil, lastErr
}

func isAuthError(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "credentials") || strings.Contains(err.Error(), "needs a password"))
}

// loadSlots reads CLUSTER SLOTS from the first seed that answers.
func loadSlots(ctx context.Context, s *settings, seeds []string) (*topology, error) {
	var lastErr error
	for _, seed := range seeds {
		c, err := dial(ctx, s, seed)
		if err != nil {
			lastErr = err
			continue
		}
		v, err := c.redisDo("CLUSTER", "SLOTS")
		c.close()
		if err != nil {
			lastErr = fmt.Errorf("redis at %s: CLUSTER SLOTS: %v", seed, err)
			continue
		}
		top, err := parseSlots(v, seed)
		if err != nil {
			lastErr = err
			continue
		}
		return top, nil
	}
	return nil, lastErr
}

// parseSlots reads a CLUSTER SLOTS reply: entries of [first slot, last
// slot, [master host, port, ...], replicas...]. Every slot must have an
// owner; ranges that overlap are taken in order, the later one winning,
// as they cannot come from a healthy cluster anyway.
func parseSlots(v any, seed string) (*topology, error) {
	seedHost, _, _ := net.SplitHostPort(seed)
	ranges, err := wire.ParseSlots(v, seedHost)
	if err != nil {
		return nil, fmt.Errorf("redis at %s: %w", seed, err)
	}
	top := &topology{cluster: true}
	index := map[string]int{}
	var owned [slotCount]bool
	covered := 0
	for _, r := range ranges {
		i, ok := index[r.Master]
		if !ok {
			i = len(top.addrs)
			index[r.Master] = i
			top.addrs = append(top.addrs, r.Master)
		}
		for s := r.First; s <= r.Last; s++ {
			top.owner[s] = uint16(i)
			if !owned[s] {
				owned[s] = true
				covered++
			}
		}
	}
	if covered < slotCount {
		return nil, fmt.Errorf("the Redis Cluster does not cover all %d slots (%d have a master; cluster_state is not ok); fix the cluster first", slotCount, covered)
	}
	return top, nil
}

// shards checks that every server of a redis+ring:// target answers and
// is a standalone server (a cluster node would answer MOVED for the keys
// the ring sends it), and returns the ring's topology.
func shards(ctx context.Context, s *settings) (*topology, error) {
	t := s.target
	for _, a := range t.Addrs {
		c, err := dial(ctx, s, a)
		if err != nil {
			return nil, err
		}
		v, err := c.redisDo("INFO", "cluster")
		c.close()
		if err != nil {
			return nil, fmt.Errorf("redis at %s: INFO cluster: %v", a, err)
		}
		if info, _ := v.(string); wire.ParseInfo(info)["cluster_enabled"] == "1" {
			return nil, fmt.Errorf("redis at %s is a cluster node, but redis+ring:// names standalone shards; point redis:// at the cluster instead", a)
		}
	}
	return &topology{addrs: t.Addrs, place: t.Ring.Owner}, nil
}
