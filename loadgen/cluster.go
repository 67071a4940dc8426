package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// slotCount is the number of Redis Cluster hash slots.
const slotCount = 16384

// topology maps a key to the node that owns it. For a standalone server and
// a one-server memcached pool there is one node; for Redis Cluster the
// owner of the key's hash slot; for a memcached pool FNV-1a modulo the
// number of servers (a load generator needs an even spread, not the
// stability under membership changes that consistent hashing buys).
type topology struct {
	addrs   []string
	cluster bool
	owner   [slotCount]uint16 // slot to index in addrs, cluster only
	version int
}

func (t *topology) route(key []byte) int {
	switch {
	case t.cluster:
		return int(t.owner[keySlot(key)])
	case len(t.addrs) == 1:
		return 0
	}
	h := uint32(2166136261) // FNV-1a, inline: no allocation per key
	for _, c := range key {
		h ^= uint32(c)
		h *= 16777619
	}
	return int(h % uint32(len(t.addrs)))
}

// keySlot is the Redis Cluster slot of key: CRC16-XMODEM of the key, or of
// the part between the first { and the next } when that part is not
// empty, modulo 16384.
func keySlot(key []byte) uint16 {
	for i, c := range key {
		if c == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						key = key[i+1 : j]
					}
					break
				}
			}
			break
		}
	}
	return crc16(key) % slotCount
}

var crc16tab = func() (t [256]uint16) {
	for i := range 256 {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crc16tab[byte(crc>>8)^c]
	}
	return crc
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
		return &topology{addrs: t.Addrs}, nil
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
		enabled := strings.Contains(info, "cluster_enabled:1")
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

func parseSlots(v any, seed string) (*topology, error) {
	ranges, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redis at %s: CLUSTER SLOTS answered %T", seed, v)
	}
	top := &topology{cluster: true}
	index := map[string]int{}
	covered := 0
	for _, r := range ranges {
		e, ok := r.([]any)
		if !ok || len(e) < 3 {
			return nil, fmt.Errorf("%w: CLUSTER SLOTS entry %v", errProtocol, r)
		}
		lo, ok1 := e[0].(int64)
		hi, ok2 := e[1].(int64)
		m, ok3 := e[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(m) < 2 || lo < 0 || hi >= slotCount || lo > hi {
			return nil, fmt.Errorf("%w: CLUSTER SLOTS entry %v", errProtocol, r)
		}
		host, _ := m[0].(string)
		port, _ := m[1].(int64)
		if host == "" || host == "?" {
			// The node does not know its own address; it is the seed's host.
			host, _, _ = net.SplitHostPort(seed)
		}
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		i, ok := index[addr]
		if !ok {
			i = len(top.addrs)
			index[addr] = i
			top.addrs = append(top.addrs, addr)
		}
		for s := lo; s <= hi; s++ {
			top.owner[s] = uint16(i)
		}
		covered += int(hi - lo + 1)
	}
	if covered < slotCount {
		return nil, errors.New("the Redis Cluster does not cover all 16384 slots (cluster_state is not ok); fix the cluster first")
	}
	return top, nil
}
