package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/memcache"
)

// benchWorker builds a worker outside a run, for the benchmarks.
func benchWorker(b *testing.B, cfg Config) (*runner, *worker) {
	s, err := cfg.validate()
	if err != nil {
		b.Fatal(err)
	}
	r := &runner{s: s, top: &topology{addrs: s.target.Addrs}, conns: map[*conn]struct{}{}, shards: []*shard{{hist: newHist()}}, base: time.Now()}
	if s.target.Kind == KindMemcached {
		r.proto = newMCProto(s)
	} else {
		r.proto = newRedisProto(s)
	}
	return r, newWorker(r, 0, newValuePool(s, 1))
}

// BenchmarkProtocol measures encoding one pipeline of 16 requests and
// parsing its replies, without the network: the client's own cost per
// operation.
func BenchmarkProtocol(b *testing.B) {
	cases := []struct {
		name  string
		cfg   Config
		reply string
	}{
		{"redis-get", Config{Command: CmdGet}, "$100\r\n" + string(make([]byte, 100)) + "\r\n"},
		{"redis-set", Config{Command: CmdSet}, "+OK\r\n"},
		{"redis-hset-template", Config{Template: []string{"hset", "__key__", "f1", "__data__"}}, ":1\r\n"},
		{"meta-get", Config{Target: "memcached://h:1", Command: CmdGet}, "VA 100\r\n" + string(make([]byte, 100)) + "\r\n"},
		{"text-get", Config{Target: "memcached://h:1", Protocol: "text", Command: CmdGet}, "VALUE key:000000000001 0 100\r\n" + string(make([]byte, 100)) + "\r\nEND\r\n"},
		{"meta-set", Config{Target: "memcached://h:1", Command: CmdSet}, "HD\r\n"},
	}
	const depth = 16
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			c.cfg.Pipeline = depth
			r, w := benchWorker(b, c.cfg)
			replies := bytes.Repeat([]byte(c.reply), depth)
			src := bytes.NewReader(replies)
			br := bufio.NewReaderSize(src, readBufSize)
			var buf []byte
			b.SetBytes(int64(len(replies)) / depth)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += depth {
				buf = buf[:0]
				for j := range depth {
					o := &w.ops[j]
					w.gen(o, int64(i+j))
					buf = r.proto.encode(buf, w, o.kind, o.keys)
				}
				src.Reset(replies)
				br.Reset(src)
				for j := range depth {
					if err := r.proto.read(br, &w.ops[j], 1); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkRoundTrip runs the worker's real loop body (encode, write,
// read, time each reply, record) against a real redis-server, 16 GETs per
// round trip; allocs/op must stay 0.
func BenchmarkRoundTrip(b *testing.B) {
	srv := servertest.Redis(b, servers.RedisConfig{})
	r, w := benchWorker(b, Config{Target: srv.URL(), Command: CmdGet, Pipeline: 16})
	if err := w.connect(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer w.closeAll()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 16 {
		for j := range 16 {
			w.gen(&w.ops[j], int64(i+j))
		}
		if err := w.roundTrip(16, true); err != nil {
			b.Fatal(err)
		}
		w.flush(16, nil)
	}
	b.StopTimer()
	_ = r
}

// BenchmarkRoute measures picking the node of a key: a Redis Cluster slot
// lookup, and kura's ketama ring (an MD5 per key) for a memcached pool;
// allocs/op must stay 0.
func BenchmarkRoute(b *testing.B) {
	ring, err := memcache.NewRing([]string{"10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		top  *topology
	}{
		{"cluster", &topology{addrs: []string{"a:1", "b:1", "c:1"}, cluster: true}},
		{"memcached-ring", &topology{addrs: ring.Servers(), place: ring.Index}},
	}
	// Ring.Index hashes []byte(key), which the compiler keeps on the stack
	// only up to 32 bytes: the default "key:" prefix makes 16-byte keys.
	for _, c := range cases {
		for _, prefix := range []string{"key:", "kura:bench:with:a:long:prefix:"} {
			b.Run(fmt.Sprintf("%s/keylen=%d", c.name, len(prefix)+keyDigits), func(b *testing.B) {
				var key []byte
				var sink int
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					key = appendKey(key[:0], prefix, uint64(i))
					sink += c.top.route(key)
				}
				_ = sink
			})
		}
	}
}
