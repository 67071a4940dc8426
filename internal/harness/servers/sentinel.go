package servers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SentinelConfig configures a private primary/replica pair watched by
// Redis Sentinel (redis-server --sentinel, from Debian's redis-server
// package). The zero value is one primary, one replica and one sentinel
// with no passwords, the master set named "kura".
type SentinelConfig struct {
	// MasterSet is the name the sentinels monitor; "" means "kura".
	MasterSet string
	// Sentinels is how many sentinels run; 0 means 1. The quorum is a
	// majority of them.
	Sentinels int
	// Password is the data servers' requirepass (and masterauth).
	Password string
	// SentinelPassword is the sentinels' own requirepass, separate from
	// Password.
	SentinelPassword string
	// DownAfter is "sentinel down-after-milliseconds": how long the
	// primary must not answer before a failover starts; 0 means 1s.
	DownAfter time.Duration
	// FailoverTimeout is "sentinel failover-timeout"; 0 means 5s. A
	// failover that aborts is tried again after twice this. A sentinel
	// re-points a replica that follows another address than the primary's
	// (ReplicaLink) after this long: tests that delay the link set it
	// long.
	FailoverTimeout time.Duration
	// ReplicaLink, when set, is given the primary's address and returns
	// the address the replica replicates from (a fault-injection proxy in
	// front of the primary), so a test can delay or cut the replication
	// link alone. The sentinels still know the primary by its own address.
	ReplicaLink func(primary string) (string, error)
	// TLS, when set, gives every server and sentinel a TLS port besides
	// its plain one (the harness's own commands use the plain ports):
	// replication and the sentinels' links to the data servers go over
	// TLS, and the sentinels name the TLS ports, so a client that asks
	// the sentinels on their TLS ports speaks TLS end to end.
	TLS *TLSFiles
}

// TLSFiles are a server certificate and its key (PEM files); the
// certificate also serves as the CA the servers trust.
type TLSFiles struct {
	CertFile, KeyFile string
}

// args returns redis-server's TLS arguments for a TLS port.
func (f *TLSFiles) args(port int) []string {
	return []string{"--tls-port", strconv.Itoa(port), "--tls-cert-file", f.CertFile, "--tls-key-file", f.KeyFile,
		"--tls-ca-cert-file", f.CertFile, "--tls-auth-clients", "no", "--tls-replication", "yes"}
}

// SentinelSet is a running primary, its replica and the sentinels
// watching them.
type SentinelSet struct {
	MasterSet        string
	Password         string
	SentinelPassword string
	// Primary and Replica are the data servers as started; after a
	// failover Replica is the primary (see Master).
	Primary, Replica *Redis
	Sentinels        []*Proc
	// With SentinelConfig.TLS: the TLS addresses of the primary, the
	// replica and the sentinels (what the sentinels name and clients
	// dial).
	PrimaryTLS, ReplicaTLS string
	TLSSentinelAddrs       []string
}

// SentinelAddrs returns the sentinels' addresses.
func (s *SentinelSet) SentinelAddrs() []string {
	a := make([]string, len(s.Sentinels))
	for i, p := range s.Sentinels {
		a[i] = p.Addr
	}
	return a
}

// Stop stops every process.
func (s *SentinelSet) Stop() {
	for _, p := range s.Sentinels {
		p.Stop()
	}
	if s.Replica != nil {
		s.Replica.Stop()
	}
	if s.Primary != nil {
		s.Primary.Stop()
	}
}

// Master asks the first sentinel that answers which address it holds for
// the primary (SENTINEL GET-MASTER-ADDR-BY-NAME).
func (s *SentinelSet) Master(ctx context.Context) (string, error) {
	var last error
	for _, p := range s.Sentinels {
		out, err := RedisDo(ctx, p.Addr, s.SentinelPassword, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterSet)
		if err != nil {
			last = err
			continue
		}
		host, port, ok := strings.Cut(out, "\n")
		if !ok {
			last = fmt.Errorf("sentinel %s: no master %q: %q", p.Addr, s.MasterSet, out)
			continue
		}
		return net.JoinHostPort(host, port), nil
	}
	return "", last
}

// WaitMaster waits (within ctx) until the sentinels name a primary other
// than old and that server says it is a master, and returns its address.
func (s *SentinelSet) WaitMaster(ctx context.Context, old string) (string, error) {
	for {
		addr, err := s.Master(ctx)
		if err == nil && addr != old {
			role, rerr := RedisDo(ctx, addr, s.Password, "ROLE")
			if rerr == nil && strings.HasPrefix(role, "master") {
				return addr, nil
			}
			err = fmt.Errorf("%s: ROLE %q %v", addr, role, rerr)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("servers: no failover away from %s: %v (%w)", old, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StartSentinelSet starts a primary, a replica of it, and cfg.Sentinels
// sentinels monitoring the primary, each on a free loopback port, and
// waits until the replica is in sync and every sentinel knows the replica.
func StartSentinelSet(ctx context.Context, cfg SentinelConfig) (*SentinelSet, error) {
	bin, err := LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	set := &SentinelSet{MasterSet: cfg.MasterSet, Password: cfg.Password, SentinelPassword: cfg.SentinelPassword}
	if set.MasterSet == "" {
		set.MasterSet = "kura"
	}
	n := max(cfg.Sentinels, 1)
	downAfter := cfg.DownAfter
	if downAfter <= 0 {
		downAfter = time.Second
	}
	fail := func(err error) (*SentinelSet, error) {
		set.Stop()
		return nil, err
	}
	var auth []string
	if cfg.Password != "" {
		// A primary that becomes a replica after a failover needs it too.
		auth = []string{"--masterauth", cfg.Password}
	}
	var pTLS, rTLS []string
	if cfg.TLS != nil {
		ports, err := freePorts(2)
		if err != nil {
			return fail(err)
		}
		pTLS, rTLS = cfg.TLS.args(ports[0]), cfg.TLS.args(ports[1])
		set.PrimaryTLS = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		set.ReplicaTLS = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	}
	if set.Primary, err = StartRedis(ctx, RedisConfig{Password: cfg.Password, Args: append(append([]string(nil), auth...), pTLS...)}); err != nil {
		return fail(err)
	}
	primary, replica := set.Primary.Addr, ""
	if cfg.TLS != nil {
		primary = set.PrimaryTLS
	}
	link := primary
	if cfg.ReplicaLink != nil {
		if link, err = cfg.ReplicaLink(primary); err != nil {
			return fail(err)
		}
	}
	host, port, _ := net.SplitHostPort(link)
	if set.Replica, err = StartRedis(ctx, RedisConfig{Password: cfg.Password,
		Args: append(append([]string{"--replicaof", host, port}, auth...), rTLS...)}); err != nil {
		return fail(err)
	}
	replica = set.Replica.Addr
	if cfg.TLS != nil {
		replica = set.ReplicaTLS
	}
	if err := waitFor(ctx, 20*time.Second, func() error {
		info, err := set.Replica.Do(ctx, "INFO", "replication")
		if err == nil && !strings.Contains(info, "master_link_status:up") {
			err = errors.New("replica link not up")
		}
		return err
	}); err != nil {
		return fail(err)
	}
	pHost, pPort, _ := net.SplitHostPort(primary)
	for i := 0; i < n; i++ {
		p, err := retryPort(func(port int) (*Proc, error) {
			return startSentinel(ctx, bin, port, set, pHost, pPort, n/2+1, downAfter, cmp.Or(cfg.FailoverTimeout, 5*time.Second), cfg.TLS)
		})
		if err != nil {
			return fail(err)
		}
		set.Sentinels = append(set.Sentinels, p)
	}
	// A sentinel learns the replica from the primary's INFO (every 10s
	// at first, sooner once connected): wait until each one lists it,
	// or a failover now would have nothing to promote.
	for _, p := range set.Sentinels {
		if err := waitFor(ctx, 30*time.Second, func() error {
			out, err := RedisDo(ctx, p.Addr, set.SentinelPassword, "SENTINEL", "REPLICAS", set.MasterSet)
			if err == nil && !strings.Contains(out, replica) {
				err = fmt.Errorf("sentinel %s does not list the replica yet", p.Addr)
			}
			return err
		}); err != nil {
			return fail(err)
		}
	}
	return set, nil
}

func startSentinel(ctx context.Context, bin string, port int, set *SentinelSet, pHost, pPort string, quorum int, downAfter, failoverTimeout time.Duration, tf *TLSFiles) (*Proc, error) {
	dir, err := os.MkdirTemp("", "kura-redis-sentinel-")
	if err != nil {
		return nil, err
	}
	name := set.MasterSet
	lines := []string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"daemonize no",
		"protected-mode no",
		"loglevel warning",
		"dir " + dir,
		"sentinel resolve-hostnames no",
		fmt.Sprintf("sentinel monitor %s %s %s %d", name, pHost, pPort, quorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", name, downAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", name, failoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", name),
	}
	if set.Password != "" {
		lines = append(lines, fmt.Sprintf("sentinel auth-pass %s %s", name, strconv.Quote(set.Password)))
	}
	if set.SentinelPassword != "" {
		lines = append(lines, "requirepass "+strconv.Quote(set.SentinelPassword), "sentinel sentinel-pass "+strconv.Quote(set.SentinelPassword))
	}
	tlsAddr := ""
	if tf != nil {
		ports, err := freePorts(1)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		a := tf.args(ports[0])
		for i := 0; i+1 < len(a); i += 2 {
			lines = append(lines, strings.TrimPrefix(a[i], "--")+" "+a[i+1])
		}
		tlsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	}
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := startIn(dir, "redis-sentinel", bin, []string{conf, "--sentinel"}, addr, nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.probe = func(ctx context.Context) error {
		_, err := RedisDo(ctx, addr, set.SentinelPassword, "PING")
		return err
	}
	if err := p.waitReady(ctx, p.probe); err != nil {
		p.Stop()
		return nil, err
	}
	if tlsAddr != "" {
		set.TLSSentinelAddrs = append(set.TLSSentinelAddrs, tlsAddr)
	}
	return p, nil
}

// waitFor polls fn every 20ms until it returns nil, ctx ends or limit
// passes, and returns fn's last error then.
func waitFor(ctx context.Context, limit time.Duration, fn func() error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := fn()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// KillPrimary SIGKILLs the primary once every sentinel has read the
// replica's INFO in the last 2 seconds. A sentinel refreshes a replica's
// INFO every 10 seconds while the primary is up and refuses to promote a
// replica whose INFO is more than 5 seconds old when the primary is
// found down (the failover aborts, to be tried again after twice the
// failover timeout): killing the primary at a random moment makes
// failovers take seconds longer about half the time.
func (s *SentinelSet) KillPrimary(ctx context.Context) error {
	if err := s.WaitFreshInfo(ctx); err != nil {
		return err
	}
	s.Primary.Kill()
	return nil
}

// WaitFreshInfo waits until every sentinel has read the replica's INFO
// in the last 2 seconds (see KillPrimary), for a test that must kill the
// primary at a moment of its choosing: call it just before.
func (s *SentinelSet) WaitFreshInfo(ctx context.Context) error {
	for _, p := range s.Sentinels {
		if err := waitFor(ctx, 15*time.Second, func() error {
			out, err := RedisDo(ctx, p.Addr, s.SentinelPassword, "SENTINEL", "REPLICAS", s.MasterSet)
			if err != nil {
				return err
			}
			f := strings.Split(out, "\n")
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "info-refresh" {
					if ms, err := strconv.Atoi(f[i+1]); err == nil && ms < 2000 {
						return nil
					}
				}
			}
			return fmt.Errorf("sentinel %s: the replica's INFO is not fresh", p.Addr)
		}); err != nil {
			return err
		}
	}
	return nil
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	for len(ports) < n {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}
