package kuraotel_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisring"
	"github.com/kuracache/kura/store/redisstore"
)

// batchLoad loads every missing key.
func batchLoad(_ context.Context, missing []string) (map[string]int, error) {
	out := make(map[string]int, len(missing))
	for i, k := range missing {
		out[k] = i
	}
	return out, nil
}

// serverOf is the host:port of a client span, per the conventions
// (server.address and server.port).
func serverOf(t *testing.T, s tracetest.SpanStub) string {
	t.Helper()
	host := mustAttr(t, s, "server.address").AsString()
	port := mustAttr(t, s, "server.port").AsInt64()
	return net.JoinHostPort(host, strconv.FormatInt(port, 10))
}

// checkBatches checks the client spans of command op under the store
// span called parent: one per server batch, each naming its server and
// carrying the keys want says that server holds (per server, from
// NodeOf).
func checkBatches(t *testing.T, r *recorder, parent, op string, want map[string]int) {
	t.Helper()
	spans := r.spans()
	ps := r.named(parent)
	if len(ps) != 1 {
		t.Fatalf("%d %s spans:\n%s", len(ps), parent, tree(spans, "request"))
	}
	got := map[string]int{}
	for _, c := range childrenOf(spans, ps[0]) {
		if c.Name != op {
			continue
		}
		if c.SpanKind.String() != "client" {
			t.Errorf("%s span kind %v", op, c.SpanKind)
		}
		if v := mustAttr(t, c, "db.system.name").AsString(); v != "redis" {
			t.Errorf("db.system.name = %q", v)
		}
		addr := serverOf(t, c)
		if _, dup := got[addr]; dup {
			t.Errorf("two %s spans for %s: want one per server batch", op, addr)
		}
		got[addr] = int(mustAttr(t, c, "kura.keys").AsInt64())
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: keys per server %v, want %v:\n%s", parent, got, want, tree(spans, "request"))
	}
}

// TestRingRoundTrips: a FetchMany over a sharded Redis (store/redisring,
// 3 shards) has one client span per shard under its lease read and its
// write-back, each with the shard's address and the keys the ring put
// there.
func TestRingRoundTrips(t *testing.T) {
	t.Parallel() // server-bound: runs beside the other server tests
	_, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
	rs, err := redisring.New(context.Background(), redisring.Options{Servers: addrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	r := newRecorder(t)
	c := newCache[int](t, rs, r, kura.Options{})
	keys := make([]string, 30)
	want := map[string]int{}
	for i := range keys {
		keys[i] = fmt.Sprintf("item:%d", i)
		want[rs.NodeOf(keys[i])]++
	}
	if len(want) != 3 {
		t.Fatalf("30 keys on %d shards", len(want))
	}
	ctx, req := r.request(context.Background())
	if _, err := c.FetchMany(ctx, keys, time.Minute, batchLoad); err != nil {
		t.Fatal(err)
	}
	req.End()
	// The lease read: one MGET batch per shard, then the leases (SET NX
	// per missing key), one pipeline per shard.
	checkBatches(t, r, "kura.store.LeaseGet", "MGET", want)
	checkBatches(t, r, "kura.store.LeaseGet", "SET", want)
	// The write-back: the fill script per key, one pipeline per shard.
	checkBatches(t, r, "kura.store.Fill", "EVALSHA", want)

	// The warm read: one MGET batch per shard.
	r.exp.Reset()
	ctx, req = r.request(context.Background())
	if _, err := c.GetMany(ctx, keys); err != nil {
		t.Fatal(err)
	}
	req.End()
	checkBatches(t, r, "kura.store.GetMany", "MGET", want)
}

// TestSentinelRoundTrips: on Redis Sentinel the client spans name the
// primary that answered (its host and port), not the master set, before
// and after a failover.
func TestSentinelRoundTrips(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel() // server-bound: runs beside the other server tests
	set := servertest.SentinelSet(t, servers.SentinelConfig{})
	s, err := redisstore.New(context.Background(), redisstore.Options{
		Addrs: set.SentinelAddrs(), Sentinel: redisstore.Sentinel{MasterSet: set.MasterSet}, FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r := newRecorder(t)
	c := newCache[int](t, s, r, kura.Options{})
	keys := []string{"a", "b", "c", "d"}
	read := func() {
		t.Helper()
		r.exp.Reset()
		ctx, req := r.request(context.Background())
		if _, err := c.FetchMany(ctx, keys, time.Minute, batchLoad); err != nil {
			t.Fatal(err)
		}
		req.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, err := set.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read()
	checkBatches(t, r, "kura.store.LeaseGet", "MGET", map[string]int{primary: len(keys)})
	checkBatches(t, r, "kura.store.LeaseGet", "SET", map[string]int{primary: len(keys)})
	checkBatches(t, r, "kura.store.Fill", "EVALSHA", map[string]int{primary: len(keys)})
	// Single-key calls are one client span each, naming the primary too
	// (not the master set, which is the store's node name).
	if err := checkSingle(r, c, primary); err != nil {
		t.Fatal(err)
	}

	// After a failover the spans follow the new primary.
	if err := set.KillPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := set.WaitMaster(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the store reads from the new primary", func() error {
		r.exp.Reset()
		ctx, req := r.request(context.Background())
		_, err := c.GetMany(ctx, keys)
		req.End()
		if err != nil {
			return err
		}
		for _, sp := range r.named("MGET") {
			if a := serverOf(t, sp); a != next {
				return fmt.Errorf("MGET span names %s, the new primary is %s", a, next)
			}
		}
		if len(r.named("MGET")) != 1 {
			return fmt.Errorf("%d MGET spans", len(r.named("MGET")))
		}
		return checkSingle(r, c, next)
	})
}

// checkSingle makes a Set, a Get and a Delete through c, each inside a
// request of its own, and checks that each is one client span (SET, GET,
// DEL) naming the server at want.
func checkSingle(r *recorder, c *kura.Cache[int], want string) error {
	ctx := context.Background()
	for _, op := range []struct {
		name string
		call func(context.Context) error
	}{
		{"SET", func(ctx context.Context) error { return c.Set(ctx, "single", 7, time.Minute) }},
		{"GET", func(ctx context.Context) error { _, err := c.Get(ctx, "single"); return err }},
		{"DEL", func(ctx context.Context) error { return c.Delete(ctx, "single") }},
	} {
		if err := spanServer(r, ctx, op.name, op.call, want); err != nil {
			return err
		}
	}
	return nil
}

// spanServer runs call inside a request span and checks that it made
// exactly one client span named name, whose server.address and
// server.port are want.
func spanServer(r *recorder, ctx context.Context, name string, call func(context.Context) error, want string) error {
	r.exp.Reset()
	rctx, req := r.request(ctx)
	err := call(rctx)
	req.End()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	sps := r.named(name)
	if len(sps) != 1 {
		return fmt.Errorf("%d %s spans, want 1:\n%s", len(sps), name, tree(r.spans(), "request"))
	}
	sp := sps[0]
	if sp.SpanKind != trace.SpanKindClient {
		return fmt.Errorf("%s span kind %v", name, sp.SpanKind)
	}
	host, hok := attr(sp, "server.address")
	port, pok := attr(sp, "server.port")
	if !hok || !pok {
		return fmt.Errorf("%s span without server.address/server.port: %v", name, sp.Attributes)
	}
	if got := net.JoinHostPort(host.AsString(), strconv.FormatInt(port.AsInt64(), 10)); got != want {
		return fmt.Errorf("%s span names %s, want %s", name, got, want)
	}
	return nil
}

// TestSentinelReplicaReadSpans: with ReadFromReplicas, a read the replica
// answers (counted by the replica's INFO commandstats) names the replica,
// single-key (GET) and batched (MGET); writes, and reads of a key this
// store wrote within its primary window, name the primary.
func TestSentinelReplicaReadSpans(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel() // server-bound: runs beside the other server tests
	set := servertest.SentinelSet(t, servers.SentinelConfig{})
	open := func(rr redisstore.ReplicaReads) store.Store {
		s, err := redisstore.New(context.Background(), redisstore.Options{Addrs: set.SentinelAddrs(),
			Sentinel: redisstore.Sentinel{MasterSet: set.MasterSet}, FailFast: true, ReadFromReplicas: rr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	primary, err := set.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replica := set.Replica.Addr
	// Another process writes the keys; they reach the replica.
	writer, err := kura.New[int](open(redisstore.ReplicaReads{}), kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Close() })
	keys := []string{"r1", "r2", "r3"}
	for i, k := range keys {
		if err := writer.Set(ctx, k, i, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	servertest.Eventually(t, "the keys reach the replica", func() error {
		for _, k := range keys {
			if v, err := set.Replica.Do(ctx, "EXISTS", k); err != nil || v != "1" {
				return fmt.Errorf("%s on the replica: %q, %v", k, v, err)
			}
		}
		return nil
	})
	r := newRecorder(t)
	c := newCache[int](t, open(redisstore.ReplicaReads{Enabled: true, PrimaryWindow: time.Hour}), r, kura.Options{})
	calls := func(addr, cmd string) int64 {
		srv := set.Primary
		if addr == replica {
			srv = set.Replica
		}
		info, err := srv.Do(ctx, "INFO", "commandstats")
		if err != nil {
			t.Fatal(err)
		}
		return servers.CommandCalls(servers.ParseInfo(info), cmd)
	}

	// A single-key read: one GET span, naming the replica, which served it.
	before := calls(replica, "get")
	servertest.Eventually(t, "a GET span names the replica", func() error {
		return spanServer(r, ctx, "GET", func(ctx context.Context) error { _, err := c.Get(ctx, "r1"); return err }, replica)
	})
	if n := calls(replica, "get") - before; n < 1 {
		t.Fatalf("the replica served %d GETs", n)
	}

	// A batched read: its MGET names the replica, which served it.
	before = calls(replica, "mget")
	r.exp.Reset()
	rctx, req := r.request(ctx)
	if got, err := c.GetMany(rctx, keys); err != nil || len(got) != len(keys) {
		t.Fatalf("GetMany = %v, %v", got, err)
	}
	req.End()
	checkBatches(t, r, "kura.store.GetMany", "MGET", map[string]int{replica: len(keys)})
	if n := calls(replica, "mget") - before; n != 1 {
		t.Fatalf("the replica served %d MGETs, want 1", n)
	}

	// A write names the primary; so does the read of the key this store
	// just wrote (its primary window), which the primary serves.
	if err := spanServer(r, ctx, "SET", func(ctx context.Context) error { return c.Set(ctx, "own", 1, time.Hour) }, primary); err != nil {
		t.Fatal(err)
	}
	before = calls(primary, "get")
	if err := spanServer(r, ctx, "GET", func(ctx context.Context) error { _, err := c.Get(ctx, "own"); return err }, primary); err != nil {
		t.Fatal(err)
	}
	if n := calls(primary, "get") - before; n != 1 {
		t.Fatalf("the primary served %d GETs of its own write, want 1", n)
	}
}

// TestClusterReplicaReadSpans: on a Redis Cluster with two replicas per
// master and ReadFromReplicas, each MGET span names the replica rueidis
// chose for its slots, which is the replica that served it (INFO
// commandstats), and a single-key GET names its slot's replica too.
func TestClusterReplicaReadSpans(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel() // server-bound: runs beside the other server tests
	cl := servertest.RedisClusterWith(t, servers.ClusterConfig{Replicas: 2})
	open := func(rr redisstore.ReplicaReads) store.Store {
		s, err := redisstore.New(context.Background(), redisstore.Options{Addrs: cl.Addrs(), ReadFromReplicas: rr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	writer, err := kura.New[int](open(redisstore.ReplicaReads{}), kura.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Close() })
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("replica-read-%d", i)
		if err := writer.Set(ctx, keys[i], i, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	var replicas []*servers.Redis
	for _, rs := range cl.Replicas {
		replicas = append(replicas, rs...)
	}
	servertest.Eventually(t, "the keys reach every replica", func() error {
		n := 0
		for _, r := range replicas {
			v, err := r.Do(ctx, "DBSIZE")
			if err != nil {
				return err
			}
			k, _ := strconv.Atoi(v)
			n += k
		}
		if n != 2*len(keys) { // two replicas of each key
			return fmt.Errorf("%d keys on the replicas, want %d", n, 2*len(keys))
		}
		return nil
	})
	// served returns the replicas whose count of cmd (INFO commandstats)
	// grew while call ran.
	served := func(cmd string, call func()) map[string]bool {
		counts := func() map[string]int64 {
			out := map[string]int64{}
			for _, r := range replicas {
				info, err := r.Do(ctx, "INFO", "commandstats")
				if err != nil {
					t.Fatal(err)
				}
				out[r.Addr] = servers.CommandCalls(servers.ParseInfo(info), cmd)
			}
			return out
		}
		before := counts()
		call()
		got := map[string]bool{}
		for a, n := range counts() {
			if n > before[a] {
				got[a] = true
			}
		}
		return got
	}
	// Redis lists a replica in CLUSTER SLOTS, where the client learns of
	// it, only once the others have heard of its replication offset
	// (cluster gossip): before that, reads go to the masters.
	servertest.Eventually(t, "CLUSTER SLOTS lists the replicas", func() error {
		slots, err := cl.Nodes[0].Do(ctx, "CLUSTER", "SLOTS")
		if err != nil {
			return err
		}
		for _, r := range replicas {
			if _, port := splitHostPort(r.Addr); !strings.Contains(slots, "\n"+port+"\n") {
				return fmt.Errorf("replica %s not in CLUSTER SLOTS", r.Addr)
			}
		}
		return nil
	})
	r := newRecorder(t)
	c := newCache[int](t, open(redisstore.ReplicaReads{Enabled: true}), r, kura.Options{})
	if _, err := c.GetMany(ctx, keys); err != nil { // reads the slot map
		t.Fatal(err)
	}

	r.exp.Reset()
	byMGET := served("mget", func() {
		rctx, req := r.request(ctx)
		if got, err := c.GetMany(rctx, keys); err != nil || len(got) != len(keys) {
			t.Fatalf("GetMany = %v, %v", got, err)
		}
		req.End()
	})
	named := map[string]bool{}
	for _, sp := range r.named("MGET") {
		named[serverOf(t, sp)] = true
	}
	if len(named) == 0 || fmt.Sprint(named) != fmt.Sprint(byMGET) {
		t.Fatalf("MGET spans name %v; the replicas that served MGETs: %v\n%s", named, byMGET, tree(r.spans(), "request"))
	}

	// A single-key read names the replica that served it.
	r.exp.Reset()
	byGET := served("get", func() {
		rctx, req := r.request(ctx)
		if _, err := c.Get(rctx, keys[0]); err != nil {
			t.Fatal(err)
		}
		req.End()
	})
	sps := r.named("GET")
	if len(sps) != 1 {
		t.Fatalf("%d GET spans:\n%s", len(sps), tree(r.spans(), "request"))
	}
	if a := serverOf(t, sps[0]); fmt.Sprint(byGET) != fmt.Sprint(map[string]bool{a: true}) {
		t.Fatalf("the GET span names %s; the replicas that served GETs: %v", a, byGET)
	}
}

func splitHostPort(addr string) (string, string) {
	h, p, _ := net.SplitHostPort(addr)
	return h, p
}
