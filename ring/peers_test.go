package ring

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// The agreement tests run every peer on the same keys and compare, key for
// key, the server it picks with the one the ring here picks: server counts
// 1 to 24, with weights where the peer has them. make test uses fewer keys;
// KURA_SOAK=1 uses 100,000.

const maxServers = 24

func keyCount() int {
	if os.Getenv("KURA_SOAK") != "" {
		return 100000
	}
	return 2000
}

// testKeys mixes plain keys, hash tags of every shape the peers treat
// differently, UTF-8 and, when long is set, keys past dalli's 250
// characters. memcachedSafe keeps them valid memcached text-protocol keys
// (no spaces, at most 250 bytes) for the twemproxy check.
func testKeys(n int, long bool) []string {
	keys := make([]string, n)
	for i := range keys {
		var k string
		switch i % 11 {
		case 0:
			k = fmt.Sprintf("{user:%d}:cart", i)
		case 1:
			k = fmt.Sprintf("cart:{%d}:items", i/3)
		case 2:
			k = fmt.Sprintf("{}empty:%d", i)
		case 3:
			k = fmt.Sprintf("open{%d", i)
		case 4:
			k = fmt.Sprintf("{}}:%d", i%50)
		case 5:
			k = fmt.Sprintf("ключ:%d:é", i)
		case 6:
			if long {
				k = fmt.Sprintf("long:%d:%s", i, strings.Repeat("x", 240+i%30))
			} else {
				k = fmt.Sprintf("Item/%d/detail", i)
			}
		case 7:
			k = fmt.Sprintf("a{b}{c}%d", i)
		default:
			k = fmt.Sprintf("user:%d:item", i)
		}
		keys[i] = k
	}
	return keys
}

func weightsFor(n int, weighted bool) []int {
	ws := make([]int, n)
	for i := range ws {
		ws[i] = 1
		if weighted {
			ws[i] = 1 + (i*3)%4
		}
	}
	return ws
}

// compare reports every key the ring places elsewhere than the peer.
func compare(t *testing.T, label string, r Ring, keys []string, peer []int) {
	t.Helper()
	if len(peer) != len(keys) {
		t.Fatalf("%s: peer answered %d owners for %d keys", label, len(peer), len(keys))
	}
	if n := len(r.Nodes()); n > 1 {
		seen := map[int]bool{}
		for _, o := range peer {
			if o < 0 || o >= n {
				t.Fatalf("%s: peer named server %d of %d", label, o, n)
			}
			seen[o] = true
		}
		if len(seen) < 2 {
			t.Fatalf("%s: the peer put every key on one of %d servers: the check would compare nothing", label, n)
		}
	}
	bad := 0
	var ex []string
	for i, k := range keys {
		if got := r.Owner(k); got != peer[i] {
			bad++
			if len(ex) < 3 {
				ex = append(ex, fmt.Sprintf("%q: ring %d, peer %d", k, got, peer[i]))
			}
		}
	}
	if testing.Verbose() && bad == 0 {
		t.Logf("%s: %d of %d keys on the peer's server", label, len(keys), len(keys))
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d keys (%.2f%%) placed elsewhere than the peer, e.g. %s",
			label, bad, len(keys), 100*float64(bad)/float64(len(keys)), strings.Join(ex, "; "))
	}
}

// peerRemap logs the share of keys the peer itself moved when one server
// joined n (configs i and i+1 of owners hold n and n+1 servers, the first
// n the same), next to the ideal 1/(n+1). BENCHMARKS.md quotes it.
// Only the "user:N:item" keys count: the tagged ones move in clumps.
func peerRemap(t *testing.T, label string, keys []string, owners [][]int) {
	t.Helper()
	line := ""
	for _, n := range []int{1, 2, 3, 5, 8, 12, 23} {
		if n >= len(owners) {
			break
		}
		moved, total := 0, 0
		for k := range owners[n-1] {
			if !strings.HasPrefix(keys[k], "user:") {
				continue
			}
			total++
			if owners[n-1][k] != owners[n][k] {
				moved++
			}
		}
		line += fmt.Sprintf(" %d->%d %.3f/%.3f", n, n+1, float64(moved)/float64(total), 1/float64(n+1))
	}
	t.Logf("peer remap, %s (moved/ideal):%s", label, line)
}

// need finds a tool a peer check runs; missing it fails under CI and
// make test, and skips elsewhere.
func need(t *testing.T, name string) string {
	t.Helper()
	p, err := servers.LookPath(name)
	if err != nil {
		servertest.Fail(t, fmt.Errorf("%w (make servers installs it)", err))
	}
	return p
}

func writeKeys(t *testing.T, keys []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runOwners runs a peer driver with configs on stdin and parses one line
// of owner indexes per config.
func runOwners(t *testing.T, cmd *exec.Cmd, configs []string) [][]int {
	t.Helper()
	cmd.Stdin = strings.NewReader(strings.Join(configs, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd.Path, err, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(configs) {
		t.Fatalf("%s answered %d lines for %d configs", cmd.Path, len(lines), len(configs))
	}
	res := make([][]int, len(lines))
	for i, l := range lines {
		for _, f := range strings.Fields(l) {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s: bad owner %q", cmd.Path, f)
			}
			res[i] = append(res[i], v)
		}
	}
	return res
}

// TestAgreesWithGoRedisRing asks go-redis v9's own Ring which shard owns
// each key (GetShardClientForKey) and compares. The Ring's shard addresses
// are loopback ports nothing is asked on: the heartbeat is an hour away
// and no command is sent.
func TestAgreesWithGoRedisRing(t *testing.T) {
	keys := testKeys(keyCount(), true)
	var owners [][]int
	for n := 1; n <= maxServers; n++ {
		addrs := map[string]string{}
		nodes := make([]Node, n)
		byAddr := map[string]int{}
		for i := range nodes {
			name := fmt.Sprintf("shard-%02d", i)
			if i%2 == 1 {
				// A host:port name, loopback like every name a peer gets.
				name = fmt.Sprintf("127.0.0.1:%d", 6300+i)
			}
			addr := fmt.Sprintf("127.0.0.1:%d", 1+i)
			addrs[name], byAddr[addr] = addr, i
			nodes[i] = Node{ID: name}
		}
		rg := redis.NewRing(&redis.RingOptions{Addrs: addrs, HeartbeatFrequency: time.Hour})
		peer := make([]int, len(keys))
		for i, k := range keys {
			c, err := rg.GetShardClientForKey(k)
			if err != nil {
				t.Fatal(err)
			}
			peer[i] = byAddr[c.Options().Addr]
		}
		_ = rg.Close()
		r, err := NewRendezvous(nodes)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, fmt.Sprintf("go-redis Ring, %d shards", n), r, keys, peer)
		owners = append(owners, peer)
	}
	peerRemap(t, "go-redis Ring", keys, owners)
}

// TestGoRedisRingDropsDownShard checks what go-redis's Ring does while a
// shard is down: its heartbeat drops the shard and the keys move to the
// rendezvous ring of the live shards (NewRendezvous without it). The down
// shard is a loopback port nothing listens on.
func TestGoRedisRingDropsDownShard(t *testing.T) {
	keys := testKeys(keyCount(), true)
	dead, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	var all, alive []Node
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("shard-%d", i)
		rd := servertest.Redis(t, servers.RedisConfig{})
		addr := rd.Addr
		if i == 3 {
			addr = fmt.Sprintf("127.0.0.1:%d", dead)
		} else {
			alive = append(alive, Node{ID: name})
		}
		addrs[name] = addr
		all = append(all, Node{ID: name})
	}
	rg := redis.NewRing(&redis.RingOptions{Addrs: addrs, HeartbeatFrequency: 20 * time.Millisecond})
	defer rg.Close()
	healthy, _ := NewRendezvous(all)
	without, _ := NewRendezvous(alive)
	deadline := time.Now().Add(30 * time.Second)
	for rg.Len() != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("go-redis Ring still counts %d live shards", rg.Len())
		}
		time.Sleep(20 * time.Millisecond)
	}
	moved := 0
	for _, k := range keys {
		c, err := rg.GetShardClientForKey(k)
		if err != nil {
			t.Fatal(err)
		}
		want := addrs[alive[without.Owner(k)].ID]
		if got := c.Options().Addr; got != want {
			t.Fatalf("go-redis Ring with shard-3 down put %q on %s, want %s", k, got, want)
		}
		if healthy.Owner(k) == 3 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no key belonged to the down shard")
	}
	t.Logf("go-redis Ring with 1 of 5 shards down: %d of %d keys moved to live shards, each where the ring of the live shards says", moved, len(keys))
}

// TestAgreesWithLibmemcached builds a small C program on libmemcached
// (Debian's libmemcached-dev) that asks memcached_generate_hash in
// weighted ketama mode, and compares.
func TestAgreesWithLibmemcached(t *testing.T) {
	cc := need(t, "cc")
	if _, err := os.Stat("/usr/include/libmemcached/memcached.h"); err != nil {
		servertest.Fail(t, fmt.Errorf("%w: libmemcached headers (apt-get install -y libmemcached-dev)", servers.ErrNotInstalled))
	}
	bin := filepath.Join(t.TempDir(), "libmemcached_owner")
	if out, err := exec.Command(cc, "-O2", "-o", bin, "testdata/libmemcached_owner.c", "-lmemcached").CombinedOutput(); err != nil {
		t.Fatalf("building the libmemcached driver: %v\n%s", err, out)
	}
	keys := testKeys(keyCount(), true)
	var configs []string
	var rings []Ring
	var labels []string
	for _, weighted := range []bool{false, true} {
		for n := 1; n <= maxServers; n++ {
			ws := weightsFor(n, weighted)
			nodes := make([]Node, n)
			line := []string{strconv.Itoa(n)}
			for i := range nodes {
				host, port := "127.0.0.1", 21000+i
				if i%3 == 0 {
					port = 11211 // libmemcached leaves the default port out of the name it hashes
					host = fmt.Sprintf("127.0.0.%d", 10+i)
				}
				nodes[i] = Node{ID: LibmemcachedID(host, port), Weight: ws[i]}
				line = append(line, host, strconv.Itoa(port), strconv.Itoa(ws[i]))
			}
			r, err := NewKetama(nodes)
			if err != nil {
				t.Fatal(err)
			}
			configs, rings = append(configs, strings.Join(line, " ")), append(rings, r)
			labels = append(labels, fmt.Sprintf("libmemcached ketama, %d servers, weights %v", n, ws))
		}
	}
	got := runOwners(t, exec.Command(bin, writeKeys(t, keys)), configs)
	for i := range configs {
		compare(t, labels[i], rings[i], keys, got[i])
	}
	peerRemap(t, "libmemcached ketama", keys, got[:maxServers])
}

// fleet is the loopback memcached servers the dalli and twemproxy checks
// talk to: dalli connects to the servers it is asked about, and twemproxy
// forwards to them. Started once per test binary.
var fleet struct {
	once  sync.Once
	addrs []string
	stop  []func()
	err   error
}

func memcachedFleet(t *testing.T) []string {
	t.Helper()
	fleet.once.Do(func() {
		for i := 0; i < maxServers; i++ {
			m, err := servers.StartMemcached(context.Background(), servers.MemcachedConfig{Threads: 1, MemoryMB: 64})
			if err != nil {
				fleet.err = err
				return
			}
			fleet.addrs = append(fleet.addrs, m.Addr)
			fleet.stop = append(fleet.stop, m.Stop)
		}
	})
	if fleet.err != nil {
		servertest.Fail(t, fleet.err)
	}
	return fleet.addrs
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range fleet.stop {
		s()
	}
	os.Exit(code)
}

// TestAgreesWithRuby runs Ruby's own clients (Debian's ruby-dalli and
// ruby-redis) on the same keys: dalli over the loopback memcached fleet,
// with and without weights, and redis-rb's Redis::Distributed.
func TestAgreesWithRuby(t *testing.T) {
	rb := need(t, "ruby")
	if out, err := exec.Command(rb, "-e", "require 'dalli'; require 'redis/distributed'").CombinedOutput(); err != nil {
		servertest.Fail(t, fmt.Errorf("%w: ruby-dalli and ruby-redis (%s)", servers.ErrNotInstalled, bytes.TrimSpace(out)))
	}
	addrs := memcachedFleet(t)
	keys := testKeys(keyCount(), true)
	var configs, labels []string
	var rings []Ring
	for _, weighted := range []bool{false, true} {
		for n := 1; n <= maxServers; n++ {
			ws := weightsFor(n, weighted)
			nodes := make([]Node, n)
			line := []string{"dalli"}
			for i := range nodes {
				host, port, _ := net.SplitHostPort(addrs[i])
				p, _ := strconv.Atoi(port)
				nodes[i] = Node{ID: DalliID(host, p), Weight: ws[i]}
				line = append(line, fmt.Sprintf("%s:%d", addrs[i], ws[i]))
			}
			r, err := NewDalli(nodes)
			if err != nil {
				t.Fatal(err)
			}
			configs, rings = append(configs, strings.Join(line, " ")), append(rings, r)
			labels = append(labels, fmt.Sprintf("dalli, %d servers, weights %v", n, ws))
		}
	}
	for n := 1; n <= maxServers; n++ {
		nodes := make([]Node, n)
		line := []string{"redis-rb"}
		for i := range nodes {
			id := RedisRbID("127.0.0.1", 16379+i, i%3)
			nodes[i] = Node{ID: id}
			line = append(line, id)
		}
		r, err := NewDistributed(nodes)
		if err != nil {
			t.Fatal(err)
		}
		configs, rings = append(configs, strings.Join(line, " ")), append(rings, r)
		labels = append(labels, fmt.Sprintf("redis-rb Redis::Distributed, %d nodes", n))
	}
	// While a server is down, dalli rehashes its keys onto the others:
	// server 2 of 6 is a loopback port nothing listens on.
	deadPort, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	downNodes := make([]Node, 6)
	downLine := []string{"dalli"}
	for i := range downNodes {
		addr := addrs[i]
		if i == 2 {
			addr = fmt.Sprintf("127.0.0.1:%d", deadPort)
		}
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		downNodes[i] = Node{ID: DalliID(host, p)}
		downLine = append(downLine, addr+":1")
	}
	downRing, err := NewDalli(downNodes)
	if err != nil {
		t.Fatal(err)
	}
	configs = append(configs, strings.Join(downLine, " "))
	got := runOwners(t, exec.Command(rb, "testdata/ruby_owner.rb", writeKeys(t, keys)), configs)
	for i := range rings {
		compare(t, labels[i], rings[i], keys, got[i])
	}
	failover := got[len(got)-1]
	moved := 0
	for i, k := range keys {
		want, ok := downRing.FailoverOwner(k, func(o int) bool { return o != 2 })
		if !ok || failover[i] != want {
			t.Fatalf("dalli with server 2 down put %q on %d, FailoverOwner says %d (%v)", k, failover[i], want, ok)
		}
		if downRing.Owner(k) == 2 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no key belonged to the dead server: the failover check compared nothing")
	}
	t.Logf("dalli with 1 of 6 servers down: %d of %d keys rehashed onto live servers, each where FailoverOwner says", moved, len(keys))
	peerRemap(t, "dalli", keys, got[:maxServers])
	peerRemap(t, "redis-rb Redis::Distributed", keys, got[2*maxServers:])
}

// TestAgreesWithTwemproxy runs Debian's nutcracker on loopback in front of
// the loopback memcached fleet, one pool per configuration, sends every key
// through it, and asks the memcached the ring here names whether the key
// landed there.
func TestAgreesWithTwemproxy(t *testing.T) {
	bin := need(t, "nutcracker")
	addrs := memcachedFleet(t)
	keys := testKeys(keyCount(), false)
	var pools []twemPool
	// nutcracker exits at start when one of its 96 listen ports was taken
	// between servers.FreePort and its bind (other packages' tests run at
	// the same time in make test): start again on fresh ports.
	for attempt := 1; ; attempt++ {
		var err error
		pools, err = startTwemproxy(t, bin, addrs)
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; starting again on other ports", attempt, err)
	}

	var wg sync.WaitGroup
	errs := make([]error, len(pools))
	misplaced := make([][]string, len(pools))
	sem := make(chan struct{}, 4)
	for pi, p := range pools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			full := make([]string, len(keys))
			for i, k := range keys {
				full[i] = p.prefix + k
			}
			if err := mcSetAll(p.listen, full); err != nil {
				errs[pi] = fmt.Errorf("%s: through nutcracker: %w", p.label, err)
				return
			}
			byServer := map[int][]string{}
			for _, k := range full {
				o := p.ring.Owner(k)
				byServer[o] = append(byServer[o], k)
			}
			for o, ks := range byServer {
				miss, err := mcMissing(addrs[o], ks)
				if err != nil {
					errs[pi] = err
					return
				}
				misplaced[pi] = append(misplaced[pi], miss...)
			}
		}()
	}
	wg.Wait()
	for pi, p := range pools {
		if errs[pi] != nil {
			t.Fatal(errs[pi])
		}
		if m := misplaced[pi]; len(m) > 0 {
			t.Errorf("%s: %d of %d keys not on the server the ring names, e.g. %q",
				p.label, len(m), len(keys), m[0])
		}
	}
	bad := 0
	for _, m := range misplaced {
		bad += len(m)
	}
	t.Logf("twemproxy (nutcracker): %d pools (ketama md5 and fnv1a_64, with and without hash_tag and weights, 1-%d servers) x %d keys: %d of %d keys on the server the ring names",
		len(pools), maxServers, len(keys), len(pools)*len(keys)-bad, len(pools)*len(keys))
}

// twemPool is one nutcracker pool of TestAgreesWithTwemproxy and the ring
// that should place keys as it does.
type twemPool struct {
	label, listen string
	ring          Ring
	prefix        string
}

// startTwemproxy starts one nutcracker with a pool per variant and server
// count (1 to maxServers) in front of addrs, on free loopback ports, and
// waits until every pool listens. It returns an error, with nutcracker's
// log, when nutcracker exits before that (a port taken meanwhile); the
// caller may try again. The process is stopped at the end of the test.
func startTwemproxy(t *testing.T, bin string, addrs []string) ([]twemPool, error) {
	var pools []twemPool
	var conf strings.Builder
	variants := []struct {
		hash     string
		h        TwemproxyHash
		tag      string
		weighted bool
	}{
		{"md5", TwemproxyMD5, "", false},
		{"fnv1a_64", TwemproxyFNV1a64, "", false},
		{"md5", TwemproxyMD5, "{}", true},
		{"fnv1a_64", TwemproxyFNV1a64, "{}", true},
	}
	used := map[int]bool{}
	for vi, v := range variants {
		for n := 1; n <= maxServers; n++ {
			port, err := servers.FreePort()
			for err == nil && used[port] { // nutcracker refuses two pools on one port
				port, err = servers.FreePort()
			}
			if err != nil {
				t.Fatal(err)
			}
			used[port] = true
			name := fmt.Sprintf("p%d_%d", vi, n)
			listen := fmt.Sprintf("127.0.0.1:%d", port)
			fmt.Fprintf(&conf, "%s:\n  listen: %s\n  hash: %s\n  distribution: ketama\n  timeout: 60000\n  auto_eject_hosts: false\n", name, listen, v.hash)
			if v.tag != "" {
				fmt.Fprintf(&conf, "  hash_tag: %q\n", v.tag)
			}
			conf.WriteString("  servers:\n")
			ws := weightsFor(n, v.weighted)
			nodes := make([]Node, n)
			for i := range nodes {
				id := addrs[i] // host:port (the host alone on 11211), as libmemcached
				if i%4 == 3 {
					// A named server hashes by its name.
					fmt.Fprintf(&conf, "   - %s:%d cache-%d\n", addrs[i], ws[i], i)
					id = fmt.Sprintf("cache-%d", i)
				} else {
					fmt.Fprintf(&conf, "   - %s:%d\n", addrs[i], ws[i])
				}
				nodes[i] = Node{ID: id, Weight: ws[i]}
			}
			r, err := NewTwemproxy(nodes, v.h, v.tag)
			if err != nil {
				t.Fatal(err)
			}
			pools = append(pools, twemPool{
				label:  fmt.Sprintf("twemproxy ketama/%s tag %q, %d servers, weights %v", v.hash, v.tag, n, ws),
				listen: listen, ring: r, prefix: fmt.Sprintf("%s/", name),
			})
		}
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "nutcracker.yml")
	if err := os.WriteFile(cfg, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	statsPort, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "nutcracker.log")
	cmd := exec.Command(bin, "-c", cfg, "-o", logPath, "-s", strconv.Itoa(statsPort), "-a", "127.0.0.1",
		"-p", filepath.Join(dir, "nutcracker.pid"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// done is closed once nutcracker has exited and waitErr is set: every
	// reader sees it, so the cleanup never waits on a value another
	// reader took (it hung CI for 10 minutes when nutcracker exited at
	// start).
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	deadline := time.Now().Add(time.Minute)
	for _, p := range pools { // wait until every pool listens
		for {
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(logPath)
				t.Fatalf("nutcracker does not listen on %s\n%s", p.listen, log)
			}
			c, err := net.DialTimeout("tcp", p.listen, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-done:
				log, _ := os.ReadFile(logPath)
				return nil, fmt.Errorf("nutcracker exited: %v\n%s", waitErr, log)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return pools, nil
}

// mcSetAll sets every key through addr (pipelined, 1-byte values) and
// checks each answer is STORED.
func mcSetAll(addr string, keys []string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Minute))
	// 500 sets in flight at most: a deeper queue in nutcracker only
	// waits, and on a loaded machine trips its server timeout.
	w := bufio.NewWriter(c)
	r := bufio.NewReader(c)
	for start := 0; start < len(keys); start += 500 {
		batch := keys[start:min(start+500, len(keys))]
		for _, k := range batch {
			fmt.Fprintf(w, "set %s 0 0 1\r\nx\r\n", k)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		for _, k := range batch {
			line, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			if line != "STORED\r\n" {
				return fmt.Errorf("set %q answered %q", k, strings.TrimSpace(line))
			}
		}
	}
	return nil
}

// mcMissing returns the keys a memcached does not hold.
func mcMissing(addr string, keys []string) ([]string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	r := bufio.NewReader(c)
	var missing []string
	for start := 0; start < len(keys); start += 100 {
		batch := keys[start:min(start+100, len(keys))]
		if _, err := fmt.Fprintf(c, "get %s\r\n", strings.Join(batch, " ")); err != nil {
			return nil, err
		}
		have := map[string]bool{}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return nil, err
			}
			if line == "END\r\n" {
				break
			}
			f := strings.Fields(line)
			if len(f) != 4 || f[0] != "VALUE" {
				return nil, errors.New("memcached answered " + strconv.Quote(line))
			}
			have[f[1]] = true
			if _, err := r.ReadString('\n'); err != nil {
				return nil, err
			}
		}
		for _, k := range batch {
			if !have[k] {
				missing = append(missing, k)
			}
		}
	}
	return missing, nil
}
