package servers_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

func TestRedisStandalone(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{Password: "s3cret"})
	ctx := context.Background()
	if _, err := servers.RedisDo(ctx, r.Addr, "", "PING"); err == nil {
		t.Fatal("PING without AUTH succeeded on a password-protected server")
	}
	if s, err := r.Do(ctx, "SET", "k", "v"); err != nil || s != "OK" {
		t.Fatalf("SET = %q, %v", s, err)
	}
	info, err := r.Do(ctx, "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	if n := servers.CommandCalls(servers.ParseInfo(info), "set"); n != 1 {
		t.Fatalf("cmdstat set calls = %d, want 1", n)
	}
	r.Stop()
	if !r.Exited() {
		t.Fatal("server still running after Stop")
	}
}

func TestRedisCluster(t *testing.T) {
	c := servertest.RedisCluster(t)
	s, err := c.Nodes[0].Do(context.Background(), "CLUSTER", "INFO")
	if err != nil || !strings.Contains(s, "cluster_known_nodes:3") {
		t.Fatalf("CLUSTER INFO = %q, %v", s, err)
	}
}

func TestMemcachedSmallItemLimit(t *testing.T) {
	m := servertest.Memcached(t, servers.MemcachedConfig{MaxItemSize: 64 << 10})
	if m.Exited() {
		t.Fatal("memcached with -I 64k did not start")
	}
}

func TestPauseResume(t *testing.T) {
	m := servertest.Memcached(t, servers.MemcachedConfig{Threads: 4})
	ask := func() error {
		c, err := net.DialTimeout("tcp", m.Addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Write([]byte("version\r\n")); err != nil {
			return err
		}
		_, err = bufio.NewReader(c).ReadString('\n')
		return err
	}
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := ask(); err == nil {
		t.Fatal("a paused memcached answered")
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := ask(); err != nil {
		t.Fatalf("memcached did not answer after Resume: %v", err)
	}
}

func TestMemcached(t *testing.T) {
	m := servertest.Memcached(t, servers.MemcachedConfig{MaxItemSize: 2 << 20})
	ctx := context.Background()
	_ = ctx
	if m.Port() == 0 {
		t.Fatal("no port")
	}
	m.Kill()
	if !m.Exited() {
		t.Fatal("Kill did not end the process")
	}
}

func TestRestartSamePortRedis(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{Password: "pw"})
	ctx := context.Background()
	if _, err := r.Do(ctx, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	addr, pid := r.Addr, r.Pid()
	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Addr != addr || r.Pid() == pid || r.Restarts() != 1 {
		t.Fatalf("after Restart: addr %s (was %s), pid %d (was %d), restarts %d", r.Addr, addr, r.Pid(), pid, r.Restarts())
	}
	// A crash loses memory: no persistence, so the key is gone, and the
	// server answers on the same port with the same password.
	if s, err := r.Do(ctx, "GET", "k"); err != nil || s != "" {
		t.Fatalf("GET after restart = %q, %v; want a miss", s, err)
	}
	// A killed server restarts too.
	r.Kill()
	if _, err := r.Do(ctx, "PING"); err == nil {
		t.Fatal("a killed server answered")
	}
	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := r.Do(ctx, "PING"); err != nil || s != "PONG" {
		t.Fatalf("PING after second restart = %q, %v", s, err)
	}
	r.Stop()
	if err := r.Restart(ctx); !errors.Is(err, servers.ErrStopped) {
		t.Fatalf("Restart after Stop = %v, want ErrStopped", err)
	}
}

func TestRestartSamePortMemcachedPaused(t *testing.T) {
	m := servertest.Memcached(t, servers.MemcachedConfig{})
	ctx := context.Background()
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	// Restart kills a paused server too.
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", m.Addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("version\r\n")); err != nil {
		t.Fatal(err)
	}
	if s, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(s, "VERSION") {
		t.Fatalf("version after restart = %q, %v", s, err)
	}
}

func TestRestartClusterNode(t *testing.T) {
	c := servertest.RedisCluster(t)
	ctx := context.Background()
	n := c.Nodes[1]
	id, err := n.Do(ctx, "CLUSTER", "MYID")
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// The node reloads nodes.conf from its directory: same identity, and
	// the cluster is whole again.
	if got, err := n.Do(ctx, "CLUSTER", "MYID"); err != nil || got != id {
		t.Fatalf("node id after restart = %q, %v; want %q", got, err, id)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := n.Do(ctx, "CLUSTER", "INFO")
		if err == nil && strings.Contains(s, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok after node restart: %q, %v", s, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A setting made with CONFIG SET is lost when the server crashes; one
// given to AppendArgs as well is there again after Restart.
func TestRestartKeepsAppendedArgs(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	if _, err := r.Do(ctx, "CONFIG", "SET", "maxmemory-samples", "7"); err != nil {
		t.Fatal(err)
	}
	r.AppendArgs("--maxmemory-samples", "7")
	if err := r.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := r.Do(ctx, "CONFIG", "GET", "maxmemory-samples"); err != nil || s != "maxmemory-samples\n7" {
		t.Fatalf("CONFIG GET maxmemory-samples after restart = %q, %v", s, err)
	}
}

func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	ctx := context.Background()
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: "data pw", SentinelPassword: "sentinel pw", DownAfter: 500 * time.Millisecond})
	m, err := set.Master(ctx)
	if err != nil || m != set.Primary.Addr {
		t.Fatalf("Master = %q, %v; want %s", m, err, set.Primary.Addr)
	}
	if err := set.KillPrimary(context.Background()); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m, err = set.WaitMaster(wctx, set.Primary.Addr)
	if err != nil || m != set.Replica.Addr {
		t.Fatalf("after the primary died, master = %q, %v; want the replica %s", m, err, set.Replica.Addr)
	}
}

// TestRedisClusterReplicasMoveSlot: a Cluster started with replicas lists
// them, MoveSlot moves a slot's keys and ownership to another master, and
// a replica promoted by CLUSTER FAILOVER serves its master's slots.
func TestRedisClusterReplicasMoveSlot(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	c := servertest.RedisClusterWith(t, servers.ClusterConfig{})
	ctx := context.Background()
	if len(c.Replicas) != 3 || len(c.Replicas[0]) != 1 {
		t.Fatalf("replicas = %v", c.Replicas)
	}
	const slot = 12182 // "foo"
	src, err := c.MasterOf(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Do(ctx, "SET", "foo", "bar"); err != nil {
		t.Fatal(err)
	}
	dst := c.Nodes[0]
	if dst == src {
		dst = c.Nodes[1]
	}
	n, err := c.MoveSlot(ctx, slot, src, dst, 10, 0)
	if err != nil || n != 1 {
		t.Fatalf("MoveSlot = %d, %v", n, err)
	}
	if m, err := c.MasterOf(ctx, slot); err != nil || m != dst {
		t.Fatalf("after the move MasterOf = %v, %v; want %s", m, err, dst.Addr)
	}
	if v, err := dst.Do(ctx, "GET", "foo"); err != nil || v != "bar" {
		t.Fatalf("GET on the new owner = %q, %v", v, err)
	}
	var rep *servers.Redis
	for i, m := range c.Nodes {
		if m == dst {
			rep = c.Replicas[i][0]
		}
	}
	if _, err := rep.Do(ctx, "CLUSTER", "FAILOVER"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if m, err := c.WaitMaster(wctx, slot, dst); err != nil || m != rep {
		t.Fatalf("after CLUSTER FAILOVER the master of slot %d = %v, %v; want %s", slot, m, err, rep.Addr)
	}
}
