package servers_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/servers"
	"github.com/kuracache/kura/internal/servertest"
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
