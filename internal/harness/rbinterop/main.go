// Command rbinterop is the Go side of the Ruby package's cross-language
// tests (rb/test): it writes one value of every kind with kura's Go Cache
// for Ruby to read, reads back what Ruby wrote with the Go types, and
// answers where the Go rings place keys. It prints JSON. It is a test
// helper, not a tool. (The lease commands, stampede, invalidate and
// history, are language-neutral and shared with the Node tests:
// internal/harness/nodeinterop.)
//
//	rbinterop write ADDR PREFIX       # writes PREFIX+kind keys, prints {key: value}
//	rbinterop read ADDR PREFIX        # reads PREFIX+kind keys, prints {key: value|{"error": ...}}
//	rbinterop ring MODE SERVERS WEIGHTS  # keys on stdin (JSON array): the owner of each
//	    # MODE: ketama (store/memcache's default), dalli, redis-rb
//	rbinterop proxy RTTMS TARGET...   # a delay proxy (faults.Proxy, RTTMS/2 each way) per
//	    # target; prints their addresses as a JSON array, runs until stdin closes
//
// ADDR is a redis-server's "host:port", or "memcache://host:port,..." for a
// memcached pool.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/interop"
	"github.com/kuracache/kura/ring"
	"github.com/kuracache/kura/store/memcache"
)

// Item is the seed's user-item row as a Go service declares it; Ruby
// writes it as a Hash, a Struct or an ActiveRecord-like object.
type Item struct {
	ID       int64     `msgpack:"id" json:"id"`
	UserID   int64     `msgpack:"user_id" json:"user_id"`
	Name     string    `msgpack:"name" json:"name"`
	Tags     []string  `msgpack:"tags" json:"tags"`
	Qty      int       `msgpack:"qty" json:"qty"`
	Price    float64   `msgpack:"price" json:"price"`
	Active   bool      `msgpack:"active" json:"active"`
	Acquired time.Time `msgpack:"acquired" json:"acquired"`
}

// ItemJSON is the same row as a Go service written for encoding/json
// declares it: json tags only (docs/FORMAT.md, "Field names").
type ItemJSON struct {
	ID       int64     `json:"id"`
	UserID   int64     `json:"user_id"`
	Name     string    `json:"name"`
	Tags     []string  `json:"tags"`
	Qty      int       `json:"qty"`
	Price    float64   `json:"price"`
	Active   bool      `json:"active"`
	Acquired time.Time `json:"acquired"`
}

func main() {
	switch {
	case len(os.Args) == 5 && os.Args[1] == "ring":
		emit(placement(os.Args[2], os.Args[3], os.Args[4]))
	case len(os.Args) >= 4 && os.Args[1] == "proxy":
		if err := proxy(os.Args[2], os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "rbinterop:", err)
			os.Exit(1)
		}
	case len(os.Args) == 4 && (os.Args[1] == "write" || os.Args[1] == "read"):
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		emit(run(ctx, os.Args[1], os.Args[2], os.Args[3]))
	default:
		fmt.Fprintln(os.Stderr, "usage: rbinterop write|read ADDR PREFIX | ring MODE SERVERS WEIGHTS (see the package comment)")
		os.Exit(2)
	}
}

func emit[T any](out T, err error) { interop.Emit("rbinterop", out, err) }

func kinds() ([]interop.Kind, error) {
	at := time.Date(2026, 11, 24, 22, 0, 0, 123e6, time.UTC)
	item := Item{ID: 90210, UserID: 42, Name: "記事 ruby item", Tags: []string{"金利", "yen"}, Qty: 3, Price: 12.5, Active: true, Acquired: at}
	big := item
	for i := 0; i < 20; i++ {
		big.Name += " the yen weakened as the central bank held rates"
	}
	cs, err := interop.NewCodecs()
	if err != nil {
		return nil, err
	}
	return []interop.Kind{
		interop.Typed("item", kura.Options{}, item),
		interop.Typed("item-v2", kura.Options{Envelope: kura.EnvelopeV2}, item),
		interop.Typed("item-jsontags", kura.Options{}, ItemJSON(item)),
		interop.Typed("item-s2", kura.Options{}, big),
		interop.Typed("item-json", kura.Options{Codec: cs.JSON}, big),
		interop.Typed("item-zstd", kura.Options{Codec: cs.Zstd}, big),
		interop.Typed("items", kura.Options{}, []Item{item, item}),
		interop.Typed("string", kura.Options{}, "héllo, 世界"),
		interop.Typed("string-v2", kura.Options{Envelope: kura.EnvelopeV2}, "user:42 logged in"),
		interop.Typed("map-v2", kura.Options{Envelope: kura.EnvelopeV2}, map[string]int{"a": 1, "b": 2}),
		interop.Typed("int", kura.Options{}, int64(-1234567890123)),
		interop.Typed("float", kura.Options{}, 3.25),
		interop.Typed("bool", kura.Options{}, true),
		interop.Typed("list", kura.Options{}, []int{1, 2, 3}),
		interop.Typed("map", kura.Options{}, map[string]int{"a": 1, "b": 2}),
		interop.Typed("time", kura.Options{}, at),
		interop.Typed("raw", kura.Options{Codec: cs.Raw}, []byte("raw bytes \x00\x01\x02")),
		interop.Typed("idlist", kura.Options{Codec: cs.IDList}, []int64{1, 2, 3, 100, 7, -5}),
		interop.Negative[Item](),
	}, nil
}

func run(ctx context.Context, cmd, addr, prefix string) (map[string]any, error) {
	s, err := interop.Open(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ks, err := kinds()
	if err != nil {
		return nil, err
	}
	return interop.Run(ctx, s, cmd, prefix, ks)
}

// placement answers where the Go rings put keys read from stdin.
func placement(mode, servers, weights string) ([]string, error) {
	var keys []string
	if err := json.NewDecoder(os.Stdin).Decode(&keys); err != nil {
		return nil, err
	}
	ids := strings.Split(servers, ",")
	nodes := make([]ring.Node, len(ids))
	for i, w := range strings.Split(weights, ",") {
		n, err := strconv.Atoi(w)
		if err != nil {
			return nil, err
		}
		nodes[i] = ring.Node{ID: ids[i], Weight: n}
	}
	var r interface{ Owner(string) int }
	var err error
	switch mode {
	case "ketama":
		var mr *memcache.Ring
		ws := make([]int, len(nodes))
		for i, n := range nodes {
			ws[i] = n.Weight
		}
		if mr, err = memcache.NewRing(ids, ws); err == nil {
			r = ringFunc(mr.Index)
		}
	case "dalli":
		r, err = ring.NewDalli(nodes)
	case "redis-rb":
		r, err = ring.NewDistributed(nodes)
	default:
		return nil, fmt.Errorf("ring mode %q (want ketama, dalli, redis-rb)", mode)
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = ids[r.Owner(k)]
	}
	return out, nil
}

type ringFunc func(string) int

func (f ringFunc) Owner(k string) int { return f(k) }

// proxy runs a delay proxy in front of each target until stdin closes.
func proxy(rttMS string, targets []string) error {
	ms, err := strconv.ParseFloat(rttMS, 64)
	if err != nil || ms < 0 {
		return fmt.Errorf("proxy: RTTMS %q: want milliseconds >= 0", rttMS)
	}
	addrs := make([]string, len(targets))
	for i, t := range targets {
		p, err := faults.NewProxy(t, faults.ProxyOptions{Delay: time.Duration(ms * float64(time.Millisecond) / 2)})
		if err != nil {
			return err
		}
		defer p.Close()
		addrs[i] = p.Addr()
	}
	if err := json.NewEncoder(os.Stdout).Encode(addrs); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}
