package servers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ClusterConfig configures a private Redis Cluster with replicas. The
// zero value is 3 masters, one replica each, and a node timeout of 5s.
type ClusterConfig struct {
	// Masters is the number of masters; 0 means 3 (the least a Cluster
	// takes).
	Masters int
	// Replicas is the number of replicas of each master; 0 means 1,
	// negative none.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a master must not
	// answer before its replica is promoted. 0 means 5s.
	NodeTimeout time.Duration
}

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode struct {
	ID, Addr string
	Master   bool
	// MasterID is the master a replica follows ("" for a master).
	MasterID string
	// Failed reports a node flagged fail (or fail?).
	Failed bool
	// Slots are the slot ranges a master serves, [lo, hi] inclusive.
	Slots [][2]int
}

// StartRedisClusterWith starts a Redis Cluster with replicas: the masters
// as StartRedisCluster does, then cfg.Replicas more servers per master,
// each joined to the cluster (CLUSTER MEET) and set to replicate its
// master (CLUSTER REPLICATE). It waits until every replica's link is up
// and every node knows every replica, so a Cluster client sees them in
// CLUSTER SLOTS. Nodes holds the masters, Replicas[i] the replicas of
// Nodes[i]. Replicas may be promoted whatever their lag
// (cluster-replica-validity-factor 0), as a managed service does.
func StartRedisClusterWith(ctx context.Context, cfg ClusterConfig) (*RedisCluster, error) {
	masters := cmp.Or(cfg.Masters, 3)
	replicas := cmp.Or(cfg.Replicas, 1)
	timeout := cmp.Or(cfg.NodeTimeout, 5*time.Second)
	args := []string{"--cluster-node-timeout", strconv.FormatInt(timeout.Milliseconds(), 10),
		"--cluster-replica-validity-factor", "0", "--cluster-allow-replica-migration", "no"}
	c, err := startClusterMasters(ctx, "", make([]int, masters), args)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*RedisCluster, error) {
		c.Stop()
		return nil, err
	}
	c.Replicas = make([][]*Redis, masters)
	for i, m := range c.Nodes {
		id, err := m.Do(ctx, "CLUSTER", "MYID")
		if err != nil {
			return fail(err)
		}
		host, port := splitAddr(m.Addr)
		for range max(replicas, 0) {
			r, err := StartRedis(ctx, RedisConfig{Cluster: true, Args: args})
			if err != nil {
				return fail(err)
			}
			c.Replicas[i] = append(c.Replicas[i], r)
			if _, err := r.Do(ctx, "CLUSTER", "MEET", host, port); err != nil {
				return fail(err)
			}
			// REPLICATE needs the node to know the master first.
			if err := waitFor(ctx, 20*time.Second, func() error {
				_, err := r.Do(ctx, "CLUSTER", "REPLICATE", id)
				return err
			}); err != nil {
				return fail(fmt.Errorf("CLUSTER REPLICATE on %s: %w", r.Addr, err))
			}
		}
	}
	for i, rs := range c.Replicas {
		for _, r := range rs {
			if err := waitFor(ctx, 30*time.Second, func() error {
				info, err := r.Do(ctx, "INFO", "replication")
				if err == nil && !strings.Contains(info, "master_link_status:up") {
					err = fmt.Errorf("replica %s of %s: link not up", r.Addr, c.Nodes[i].Addr)
				}
				return err
			}); err != nil {
				return fail(err)
			}
		}
	}
	want := masters * (1 + max(replicas, 0))
	for _, n := range c.All() {
		if err := waitFor(ctx, 30*time.Second, func() error {
			nodes, err := c.ClusterNodes(ctx, n)
			if err != nil {
				return err
			}
			reps := 0
			for _, cn := range nodes {
				if !cn.Master && cn.MasterID != "" {
					reps++
				}
			}
			if len(nodes) != want || reps != want-masters {
				return fmt.Errorf("%s knows %d nodes (%d replicas), want %d (%d)", n.Addr, len(nodes), reps, want, want-masters)
			}
			return nil
		}); err != nil {
			return fail(err)
		}
	}
	// A client learns of replicas from CLUSTER SLOTS, and Redis lists a
	// replica there only once gossip has carried its replication offset:
	// until then, a client asked to read from replicas reads the masters.
	// Wait for every node to list every replica, so a test that opens a
	// client now reads where it asked to.
	if replicas > 0 {
		for _, n := range c.All() {
			if err := waitFor(ctx, 30*time.Second, func() error {
				slots, err := n.Do(ctx, "CLUSTER", "SLOTS")
				if err != nil {
					return err
				}
				for _, rs := range c.Replicas {
					for _, r := range rs {
						if _, port := splitAddr(r.Addr); !strings.Contains("\n"+slots+"\n", "\n"+port+"\n") {
							return fmt.Errorf("%s does not list replica %s in CLUSTER SLOTS", n.Addr, r.Addr)
						}
					}
				}
				return nil
			}); err != nil {
				return fail(err)
			}
		}
	}
	return c, nil
}

func splitAddr(addr string) (host, port string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

// All returns every node, masters first, then replicas.
func (c *RedisCluster) All() []*Redis {
	all := append([]*Redis(nil), c.Nodes...)
	for _, rs := range c.Replicas {
		all = append(all, rs...)
	}
	return all
}

// ClusterNodes returns what node n says of the cluster (CLUSTER NODES).
func (c *RedisCluster) ClusterNodes(ctx context.Context, n *Redis) ([]ClusterNode, error) {
	out, err := n.Do(ctx, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	var nodes []ClusterNode
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		cn := ClusterNode{ID: f[0], Addr: addr}
		for _, flag := range strings.Split(f[2], ",") {
			switch flag {
			case "master":
				cn.Master = true
			case "fail", "fail?":
				cn.Failed = true
			}
		}
		if f[3] != "-" {
			cn.MasterID = f[3]
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated or imported
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				cn.Slots = append(cn.Slots, [2]int{a, b})
			}
		}
		nodes = append(nodes, cn)
	}
	return nodes, nil
}

// Node returns the started node listening on addr, or nil.
func (c *RedisCluster) Node(addr string) *Redis {
	for _, n := range c.All() {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// MasterOf returns the node that serves slot, as the first node that
// answers (and is not failed itself) says.
func (c *RedisCluster) MasterOf(ctx context.Context, slot int) (*Redis, error) {
	var last error
	for _, n := range c.All() {
		if n.Exited() {
			continue
		}
		nodes, err := c.ClusterNodes(ctx, n)
		if err != nil {
			last = err
			continue
		}
		for _, cn := range nodes {
			for _, r := range cn.Slots {
				if cn.Master && !cn.Failed && slot >= r[0] && slot <= r[1] {
					if m := c.Node(cn.Addr); m != nil {
						return m, nil
					}
				}
			}
		}
		last = fmt.Errorf("%s names no master for slot %d", n.Addr, slot)
	}
	return nil, cmp.Or(last, errors.New("servers: no node answers"))
}

// MoveSlot moves slot from the master src to the master dst as
// `redis-cli --cluster reshard` does: dst IMPORTING, src MIGRATING, the
// slot's keys MIGRATEd batch keys at a time with pause between batches
// (the window in which the slot's keys are split between the two and
// clients are sent ASK and TRYAGAIN), then SETSLOT NODE on dst, src and
// every other master. It returns how many keys it moved.
func (c *RedisCluster) MoveSlot(ctx context.Context, slot int, src, dst *Redis, batch int, pause time.Duration) (int, error) {
	batch = max(batch, 1)
	s := strconv.Itoa(slot)
	srcID, err := src.Do(ctx, "CLUSTER", "MYID")
	if err != nil {
		return 0, err
	}
	dstID, err := dst.Do(ctx, "CLUSTER", "MYID")
	if err != nil {
		return 0, err
	}
	if _, err := dst.Do(ctx, "CLUSTER", "SETSLOT", s, "IMPORTING", srcID); err != nil {
		return 0, fmt.Errorf("IMPORTING on %s: %w", dst.Addr, err)
	}
	if _, err := src.Do(ctx, "CLUSTER", "SETSLOT", s, "MIGRATING", dstID); err != nil {
		return 0, fmt.Errorf("MIGRATING on %s: %w", src.Addr, err)
	}
	host, port := splitAddr(dst.Addr)
	moved := 0
	for {
		out, err := src.Do(ctx, "CLUSTER", "GETKEYSINSLOT", s, strconv.Itoa(batch))
		if err != nil {
			return moved, err
		}
		if out == "" {
			break
		}
		keys := strings.Split(out, "\n")
		args := append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)
		if _, err := src.Do(ctx, args...); err != nil {
			return moved, fmt.Errorf("MIGRATE %d keys of slot %d to %s: %w", len(keys), slot, dst.Addr, err)
		}
		moved += len(keys)
		select {
		case <-ctx.Done():
			return moved, ctx.Err()
		case <-time.After(pause):
		}
	}
	for _, n := range append([]*Redis{dst, src}, c.Nodes...) {
		if n.Exited() {
			continue
		}
		if _, err := n.Do(ctx, "CLUSTER", "SETSLOT", s, "NODE", dstID); err != nil && n != src && n != dst {
			// Another master learns the owner through the cluster bus
			// anyway; only the two parties must be told.
			continue
		} else if err != nil {
			return moved, fmt.Errorf("SETSLOT NODE on %s: %w", n.Addr, err)
		}
	}
	return moved, nil
}

// WaitMaster waits until a node other than old serves slot as a master
// (after a failover) and returns it.
func (c *RedisCluster) WaitMaster(ctx context.Context, slot int, old *Redis) (*Redis, error) {
	var found *Redis
	err := waitFor(ctx, 60*time.Second, func() error {
		m, err := c.MasterOf(ctx, slot)
		if err != nil {
			return err
		}
		if m == old {
			return fmt.Errorf("%s still serves slot %d", old.Addr, slot)
		}
		role, err := m.Do(ctx, "ROLE")
		if err == nil && !strings.HasPrefix(role, "master") {
			err = fmt.Errorf("%s: ROLE %q", m.Addr, role)
		}
		found = m
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("servers: no new master for slot %d: %w", slot, err)
	}
	return found, nil
}
