package kuraotel_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
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
		return nil
	})
}
