package memcache_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	gomc "github.com/bradfitz/gomemcache/memcache"

	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memcache/meta"
)

// seedRecords is the seed's write-back: one user's item inventory, 5,000
// records of about 300 bytes.
func seedRecords() []store.Item {
	items := make([]store.Item, 5000)
	for i := range items {
		v := fmt.Appendf(nil, `{"user_id":42,"item_id":%d,"count":%d,"flags":"`, i, i%99)
		for len(v) < 298 {
			v = append(v, 'a'+byte(len(v)%26))
		}
		v = append(v, '"', '}')
		items[i] = store.Item{Key: fmt.Sprintf("UserItem/42/%d", i), Value: v, TTL: 2 * 24 * time.Hour}
	}
	return items
}

// countingDial counts bytes written to the servers.
func countingDial(n *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countConn{Conn: c, n: n}, nil
	}
}

type countConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

var _ io.Writer = (*countConn)(nil)

// BenchmarkSeedWriteBack replays seed 001: 5,000 records of ~300 B
// written back across 3 memcached servers, (a) a Set per key with
// gomemcache, (b) a Set per key with kura, (c) the node-hopping quiet
// pipeline (each key sent to its server in key order, then a noop per
// server, as dalli's quiet block does), (d) kura's SetMany. It runs on
// loopback and through a proxy that adds a 500µs round trip.
func BenchmarkSeedWriteBack(b *testing.B) {
	ms := servertest.MemcachedPool(b, 3, servers.MemcachedConfig{MemoryMB: 128})
	items := seedRecords()
	payload := 0
	for _, it := range items {
		payload += len(it.Value)
	}
	for _, net := range []struct {
		name  string
		delay time.Duration
	}{{"loopback", 0}, {"rtt500us", 250 * time.Microsecond}} {
		addrs := make([]string, len(ms))
		for i, m := range ms {
			addrs[i] = m.Addr
			if net.delay > 0 {
				addrs[i] = servertest.Proxy(b, m.Addr, faults.ProxyOptions{Delay: net.delay}).Addr()
			}
		}
		var wire atomic.Int64
		s := open(b, memcache.Options{Servers: addrs, Dial: countingDial(&wire)})
		gm := gomc.New(addrs...)
		gm.Timeout = 5 * time.Second
		ctx := context.Background()

		b.Run(net.name+"/a-gomemcache-per-key", func(b *testing.B) {
			b.SetBytes(int64(payload))
			for b.Loop() {
				for _, it := range items {
					if err := gm.Set(&gomc.Item{Key: it.Key, Value: it.Value, Expiration: int32(it.TTL / time.Second)}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(len(items)), "roundtrips/op")
		})
		b.Run(net.name+"/b-kura-per-key", func(b *testing.B) {
			b.SetBytes(int64(payload))
			for b.Loop() {
				for _, it := range items {
					if err := s.Set(ctx, it.Key, it.Value, it.TTL); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(len(items)), "roundtrips/op")
		})
		b.Run(net.name+"/c-kura-node-hopping", func(b *testing.B) {
			b.SetBytes(int64(payload))
			for b.Loop() {
				if err := nodeHopping(ctx, s, items); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ms)), "roundtrips/op")
		})
		b.Run(net.name+"/d-kura-SetMany", func(b *testing.B) {
			b.SetBytes(int64(payload))
			wire.Store(0)
			n := 0
			for b.Loop() {
				if err := s.SetMany(ctx, items); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(1, "roundtrips/op")
			b.ReportMetric(float64(wire.Load())/float64(n)/float64(payload), "wire/payload")
		})
	}
}

// nodeHopping is the seed's "quiet method" built from kura's primitives:
// one connection per server; every record, in key order, is written as a
// quiet ms to its server's socket at once (a write per key, hopping
// between servers); then each server gets mn, and the answers are read
// server after server.
func nodeHopping(ctx context.Context, s *memcache.Store, items []store.Item) error {
	ring := s.Ring()
	addrs := ring.Servers()
	conns := make([]*meta.Conn, len(addrs))
	clients := make([]*meta.Client, len(addrs))
	for _, it := range items { // find each server's client once
		i := ring.Index(it.Key)
		if clients[i] == nil {
			clients[i] = s.Client(it.Key)
		}
	}
	defer func() {
		for i, c := range conns {
			if c != nil {
				c.End()
				clients[i].Put(c)
			}
		}
	}()
	now := time.Now()
	for _, it := range items {
		i := ring.Index(it.Key)
		if conns[i] == nil {
			c, err := clients[i].Conn(ctx)
			if err != nil {
				return err
			}
			c.Begin(ctx)
			conns[i] = c
		}
		req := meta.Request{Cmd: meta.Set, Key: it.Key, Value: it.Value, TTL: meta.TTL(it.TTL, now), Quiet: true}
		if err := conns[i].WriteRequest(&req); err != nil {
			return err
		}
		if err := conns[i].Flush(); err != nil {
			return err
		}
	}
	var res meta.Response
	for _, c := range conns {
		if c == nil {
			continue
		}
		if err := c.WriteRequest(&meta.Request{Cmd: meta.Noop}); err != nil {
			return err
		}
		if err := c.Flush(); err != nil {
			return err
		}
		for {
			if err := c.ReadResponse(&res); err != nil {
				return err
			}
			if res.Status == meta.MN {
				break
			}
			if res.Status != meta.HD {
				return fmt.Errorf("node hopping: %s answered %v", c.Addr(), res.Status)
			}
		}
	}
	return nil
}

// BenchmarkGetMany1000 reads 1,000 cached keys over 3 servers: kura's
// GetMany (quiet mg per server) against gomemcache's GetMulti (one
// multi-key get per server).
func BenchmarkGetMany1000(b *testing.B) {
	ms := servertest.MemcachedPool(b, 3, servers.MemcachedConfig{})
	items := seedRecords()[:1000]
	keys := make([]string, len(items))
	for i := range items {
		keys[i] = items[i].Key
	}
	for _, net := range []struct {
		name  string
		delay time.Duration
	}{{"loopback", 0}, {"rtt500us", 250 * time.Microsecond}} {
		addrs := make([]string, len(ms))
		for i, m := range ms {
			addrs[i] = m.Addr
			if net.delay > 0 {
				addrs[i] = servertest.Proxy(b, m.Addr, faults.ProxyOptions{Delay: net.delay}).Addr()
			}
		}
		s := open(b, memcache.Options{Servers: addrs})
		gm := gomc.New(addrs...)
		gm.Timeout = 5 * time.Second
		ctx := context.Background()
		if err := s.SetMany(ctx, items); err != nil {
			b.Fatal(err)
		}
		for _, it := range items { // gomemcache places keys its own way
			if err := gm.Set(&gomc.Item{Key: "gm:" + it.Key, Value: it.Value}); err != nil {
				b.Fatal(err)
			}
		}
		gmKeys := make([]string, len(keys))
		for i, k := range keys {
			gmKeys[i] = "gm:" + k
		}
		b.Run(net.name+"/kura", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				vals, err := s.GetMany(ctx, keys)
				if err != nil || vals[999] == nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(net.name+"/gomemcache", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m, err := gm.GetMulti(gmKeys)
				if err != nil || len(m) != len(keys) {
					b.Fatal(err, len(m))
				}
			}
		})
	}
}
