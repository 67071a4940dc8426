package servers

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/kuracache/kura/internal/wire"
)

// RedisConfig configures a private redis-server. The zero value is a
// standalone server with no persistence and no password.
type RedisConfig struct {
	// Password, when set, is required through AUTH (requirepass).
	Password string
	// IOThreads sets io-threads (and io-threads-do-reads); 0 leaves the
	// server default (1).
	IOThreads int
	// Cluster starts the server with cluster-enabled yes.
	Cluster bool
	// Args are extra "--name value" arguments passed through verbatim.
	Args []string
	// Host is the loopback address to listen on; "" means 127.0.0.1.
	// Port, when not 0, is the port to take (no retry on another one):
	// with Host 127.0.0.2 it lets a test bring a server up "at a new
	// address under the same name".
	Host string
	Port int
}

// Redis is a running private redis-server.
type Redis struct {
	*Proc
	Password string
}

// URL returns a redis:// URL for this server.
func (r *Redis) URL() string {
	if r.Password != "" {
		// Escaped, as kura's URL parser requires of "/", "#", "?", "@"
		// and spaces in a password.
		return (&url.URL{Scheme: "redis", User: url.UserPassword("", r.Password), Host: r.Addr}).String()
	}
	return "redis://" + r.Addr
}

// Do sends one command and returns the reply as text, for harness and test
// use (INFO, CONFIG, CLUSTER INFO). Bulk and simple strings, integers and
// errors are returned; arrays are joined with newlines.
func (r *Redis) Do(ctx context.Context, args ...string) (string, error) {
	return RedisDo(ctx, r.Addr, r.Password, args...)
}

// CPU returns the server's CPU time so far, user + system (INFO cpu's
// used_cpu_user + used_cpu_sys), for benchmarks that report what a client
// costs the server.
func (r *Redis) CPU(ctx context.Context) (time.Duration, error) {
	info, err := r.Do(ctx, "INFO", "cpu")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// StartRedis starts a private redis-server on a free loopback port.
func StartRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	bin, err := LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	host := cmp.Or(cfg.Host, "127.0.0.1")
	p, err := onPort(cfg.Port, func(port int) (*Proc, error) {
		args := []string{
			"--port", strconv.Itoa(port), "--bind", host,
			"--save", "", "--appendonly", "no", "--dir", "{dir}",
			"--daemonize", "no", "--protected-mode", "no", "--loglevel", "warning",
		}
		if cfg.Password != "" {
			args = append(args, "--requirepass", cfg.Password)
		}
		if cfg.IOThreads > 1 {
			args = append(args, "--io-threads", strconv.Itoa(cfg.IOThreads), "--io-threads-do-reads", "yes")
		}
		if cfg.Cluster {
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "{dir}/nodes.conf",
				"--cluster-node-timeout", "5000")
		}
		args = append(args, cfg.Args...)
		return startReady(ctx, "redis-server", bin, args, net.JoinHostPort(host, strconv.Itoa(port)),
			func(ctx context.Context, p *Proc) error {
				s, err := RedisDo(ctx, p.Addr, cfg.Password, "PING")
				if err == nil && s != "PONG" {
					err = fmt.Errorf("PING answered %q", s)
				}
				return err
			})
	})
	if err != nil {
		return nil, err
	}
	return &Redis{Proc: p, Password: cfg.Password}, nil
}

// RedisCluster is a running private Redis Cluster.
type RedisCluster struct {
	// Nodes are the masters as started.
	Nodes []*Redis
	// Replicas[i] are the replicas Nodes[i] was started with (none
	// unless StartRedisClusterWith). A failover swaps the roles: ask
	// MasterOf who serves a slot now.
	Replicas [][]*Redis
}

// Addrs returns the masters' addresses.
func (c *RedisCluster) Addrs() []string {
	a := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		a[i] = n.Addr
	}
	return a
}

// URL returns a redis:// URL naming every node (rueidis's addr= form).
func (c *RedisCluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr
	for i, n := range c.Nodes[1:] {
		if i == 0 {
			u += "?"
		} else {
			u += "&"
		}
		u += "addr=" + n.Addr
	}
	return u
}

// Stop stops every node.
func (c *RedisCluster) Stop() {
	for _, n := range c.All() {
		n.Stop()
	}
}

// StartRedisCluster starts masters redis-server processes with cluster mode
// on, joins them with `redis-cli --cluster create` and waits until every
// node reports cluster_state:ok.
func StartRedisCluster(ctx context.Context, masters int) (*RedisCluster, error) {
	return StartRedisClusterAt(ctx, "", make([]int, masters))
}

// StartRedisClusterAt is StartRedisCluster with one master per port on
// the loopback address host ("" means 127.0.0.1; a port of 0 is a free
// one): a Cluster "at a new address" with the same ports as another.
func StartRedisClusterAt(ctx context.Context, host string, ports []int) (*RedisCluster, error) {
	return startClusterMasters(ctx, host, ports, nil)
}

// startClusterMasters starts one master per port with the extra
// arguments args and joins them into a Cluster.
func startClusterMasters(ctx context.Context, host string, ports []int, args []string) (*RedisCluster, error) {
	masters := len(ports)
	if masters < 3 {
		return nil, fmt.Errorf("servers: a Redis Cluster needs at least 3 masters, got %d", masters)
	}
	cli, err := LookPath("redis-cli")
	if err != nil {
		return nil, err
	}
	c := &RedisCluster{}
	for i := 0; i < masters; i++ {
		cfg := RedisConfig{Cluster: true, Host: host, Port: ports[i], Args: args}
		if host != "" {
			// Nodes reach each other from their own address, and say so.
			cfg.Args = append([]string{"--cluster-announce-ip", host, "--bind-source-addr", host}, args...)
		}
		n, err := StartRedis(ctx, cfg)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	create := append([]string{"--cluster", "create"}, c.Addrs()...)
	create = append(create, "--cluster-replicas", "0", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, cli, create...).CombinedOutput()
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for {
			s, err := n.Do(ctx, "CLUSTER", "INFO")
			if err == nil && wire.ParseInfo(s)["cluster_state"] == "ok" {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				c.Stop()
				return nil, fmt.Errorf("redis cluster on %s not ok: %v %s", n.Addr, err, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c, nil
}

// RedisDo sends one RESP command to addr and returns the reply as text. It
// opens a fresh connection each call: it is for set-up and counters, not
// for load.
func RedisDo(ctx context.Context, addr, password string, args ...string) (string, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	dl := time.Now().Add(5 * time.Second)
	if t, ok := ctx.Deadline(); ok && t.Before(dl) {
		dl = t
	}
	_ = conn.SetDeadline(dl)
	r := bufio.NewReader(conn)
	if password != "" {
		if _, err := conn.Write(wire.AppendCommand(nil, "AUTH", password)); err != nil {
			return "", err
		}
		if _, err := readText(r); err != nil {
			return "", err
		}
	}
	if _, err := conn.Write(wire.AppendCommand(nil, args...)); err != nil {
		return "", err
	}
	return readText(r)
}

// readText reads one reply as text: an array's elements one a line, nil
// as "", an error reply as an error.
func readText(r *bufio.Reader) (string, error) {
	v, err := wire.ReadValue(r)
	var re wire.Error
	if errors.As(err, &re) {
		return "", fmt.Errorf("redis: %s", re)
	}
	if err != nil {
		return "", err
	}
	return text(v), nil
}

func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = text(e)
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// ParseInfo turns an INFO reply into a map of field to value.
func ParseInfo(s string) map[string]string { return wire.ParseInfo(s) }

// CommandCalls returns the calls= count for one command from an INFO
// commandstats reply (for example "get" or "mget"), 0 when absent.
func CommandCalls(info map[string]string, cmd string) int64 {
	return wire.CommandCalls(info)[strings.ToLower(cmd)]
}
