// Command nodeinterop is the Go side of the Node package's cross-language
// tests (js/test/interop.test.mjs): it writes one value of every kind with
// kura's Go Cache for Node to read, and reads back what Node wrote with
// the Go types, printing JSON either way. It is a test helper, not a tool.
//
//	nodeinterop write ADDR PREFIX   # writes PREFIX+kind keys, prints {key: value}
//	nodeinterop read ADDR PREFIX    # reads PREFIX+kind keys, prints {key: value|error}
//	nodeinterop stampede ADDR KEY CALLERS SLEEPMS VALUE [PROCS]
//	    # CALLERS goroutines Fetch KEY (leases on); the loader INCRs "loads:"+KEY,
//	    # sleeps SLEEPMS and returns VALUE; prints {"values": [...], "fillsLost": n}.
//	    # With PROCS, first waits until PROCS processes have INCRed "ready:"+KEY.
//	nodeinterop invalidate ADDR KEY # Cache.Invalidate(KEY)
//	nodeinterop dictwrite ADDR PREFIX
//	    # publishes a zstd and an S2 dictionary with dictstore and writes
//	    # PREFIX+"zstd-dict" and PREFIX+"s2-dict" with them; prints {key: value}
//	nodeinterop history ADDR KEY LOOPS DURATIONMS LEASES
//	    # a reader of the per-read history test (js/test/leases.test.mjs): LOOPS
//	    # goroutines Fetch KEY (LEASES "auto" or "off") from when it INCRs
//	    # "ready:"+KEY until "stop:"+KEY exists; the loader reads the version
//	    # in "src:"+KEY and takes 0-60 ms. Prints [[startMicros, endMicros, version], ...].
//	nodeinterop ring SERVERS WEIGHTS   # keys on stdin (JSON array): prints the owner of each
//	nodeinterop wirekeys               # keys on stdin (JSON array): prints each key's memcached wire token
//
// ADDR is a redis-server's "host:port", or "memcache://host:port,host:port,..."
// for a memcached pool (the counters of stampede then live in memcached too).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/internal/harness/interop"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memcache/meta"
	"github.com/kuracache/kura/store/redisstore"
)

// Article is the record both sides write; Node states its schema as
// {"id":int,"name":string,"tags":[]string,"body":string,"at":custom(time.Time)}.
type Article struct {
	ID   int64     `msgpack:"id" json:"id"`
	Name string    `msgpack:"name" json:"name"`
	Tags []string  `msgpack:"tags" json:"tags"`
	Body string    `msgpack:"body" json:"body"`
	At   time.Time `msgpack:"at" json:"at"`
}

// The field-name rule (docs/FORMAT.md, "Field names"): one product with
// json tags, with msgpack tags and without tags. Node writes each as
// {id, name, price}; Go writes the first two so and the third as
// {ID, Name, Price}, and reads {id, name, price} into all three.
type (
	ProductJSON struct {
		ID    int64   `json:"id"`
		Name  string  `json:"name"`
		Price float64 `json:"price"`
	}
	ProductMsgPack struct {
		ID    int64   `msgpack:"id"`
		Name  string  `msgpack:"name"`
		Price float64 `msgpack:"price"`
	}
	ProductUntagged struct {
		ID    int64
		Name  string
		Price float64
	}
)

func main() {
	switch {
	case len(os.Args) >= 2 && (os.Args[1] == "ring" || os.Args[1] == "wirekeys"):
		emit(placement(os.Args[1:]))
	case len(os.Args) == 7 && os.Args[1] == "history":
		emit(history(os.Args[2:]))
	case len(os.Args) == 4 && os.Args[1] == "dictwrite":
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		emit(dictWrite(ctx, os.Args[2], os.Args[3]))
	case len(os.Args) >= 3 && (os.Args[1] == "stampede" || os.Args[1] == "invalidate"):
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		emit(lease(ctx, os.Args[1:]))
	case len(os.Args) == 4:
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		emit(run(ctx, os.Args[1], os.Args[2], os.Args[3]))
	default:
		fmt.Fprintln(os.Stderr, "usage: nodeinterop write|read|dictwrite|stampede|invalidate|history|ring|wirekeys ... (see the package comment)")
		os.Exit(2)
	}
}

func emit[T any](out T, err error) { interop.Emit("nodeinterop", out, err) }

func kinds() ([]interop.Kind, error) {
	at := time.Date(2026, 11, 24, 22, 0, 0, 123e6, time.UTC)
	art := Article{ID: 42, Name: "記事 article", Tags: []string{"金利", "yen"}, At: at,
		Body: "The yen weakened as the central bank held rates. 日銀は金利を据え置いた。 The yen weakened as the central bank held rates."}
	cs, err := interop.NewCodecs()
	if err != nil {
		return nil, err
	}
	big := art
	for i := 0; i < 20; i++ {
		big.Body += " The yen weakened as the central bank held rates."
	}
	return []interop.Kind{
		interop.Typed("record", kura.Options{}, art),
		interop.Typed("product-json", kura.Options{}, ProductJSON{1, "lamp", 9.5}),
		interop.Typed("product-msgpack", kura.Options{}, ProductMsgPack{1, "lamp", 9.5}),
		interop.Typed("product-untagged", kura.Options{}, ProductUntagged{1, "lamp", 9.5}),
		interop.Typed("record-s2", kura.Options{}, big),
		interop.Typed("record-json", kura.Options{Codec: cs.JSON}, big),
		interop.Typed("record-zstd", kura.Options{Codec: cs.Zstd}, big),
		interop.Typed("string", kura.Options{}, "héllo, 世界"),
		interop.Typed("int", kura.Options{}, int64(-1234567890123)),
		interop.Typed("float", kura.Options{}, 3.25),
		interop.Typed("bool", kura.Options{}, true),
		interop.Typed("list", kura.Options{}, []int{1, 2, 3}),
		interop.Typed("map", kura.Options{}, map[string]int{"a": 1, "b": 2}),
		interop.Typed("time", kura.Options{}, at),
		interop.Typed("raw", kura.Options{Codec: cs.Raw}, []byte("raw bytes \x00\x01\x02")),
		interop.Typed("idlist", kura.Options{Codec: cs.IDList}, []int64{1, 2, 3, 100, 7, -5}),
		interop.Negative[Article](),
	}, nil
}

// opened is a store with the counters the lease commands keep beside it.
// Caches are built on its Store field: the struct would hide the store's
// optional capabilities (leases) from kura.New.
type opened struct {
	store.Store
	incr func(ctx context.Context, key string) error
	get  func(ctx context.Context, key string) (int64, error)
}

// open connects to a redis-server ("host:port") or a memcached pool
// ("memcache://host:port,...").
func open(ctx context.Context, addr string) (*opened, error) {
	st, err := interop.Open(ctx, addr)
	if err != nil {
		return nil, err
	}
	if s, ok := st.(*memcache.Store); ok {
		arith := func(ctx context.Context, key string, delta uint64) (int64, error) {
			var res meta.Response
			req := meta.Request{Cmd: meta.Arith, Key: key, ReturnValue: true, Vivify: 3600, Initial: delta, Delta: delta}
			if delta == 0 {
				req = meta.Request{Cmd: meta.Get, Key: key, ReturnValue: true}
			}
			if err := s.Client(key).Do(ctx, &req, &res); err != nil {
				return 0, err
			}
			if res.Status == meta.EN {
				return 0, nil
			}
			if res.Status != meta.VA {
				return 0, fmt.Errorf("counter %s: %s", key, res.Status)
			}
			return strconv.ParseInt(string(res.Value), 10, 64)
		}
		return &opened{Store: s,
			incr: func(ctx context.Context, key string) error { _, err := arith(ctx, key, 1); return err },
			get:  func(ctx context.Context, key string) (int64, error) { return arith(ctx, key, 0) },
		}, nil
	}
	cl := st.(*redisstore.Store).Client()
	return &opened{Store: st,
		incr: func(ctx context.Context, key string) error { return cl.Do(ctx, cl.B().Incr().Key(key).Build()).Error() },
		get: func(ctx context.Context, key string) (int64, error) {
			v, err := cl.Do(ctx, cl.B().Get().Key(key).Build()).AsInt64()
			if rueidisNil(err) {
				return 0, nil
			}
			return v, err
		},
	}, nil
}

// placement answers the ring and wirekeys commands for keys read from stdin.
func placement(args []string) (any, error) {
	var keys []string
	if err := json.NewDecoder(os.Stdin).Decode(&keys); err != nil {
		return nil, err
	}
	out := make([]string, len(keys))
	if args[0] == "wirekeys" {
		for i, k := range keys {
			b, b64, err := meta.AppendKey(nil, k)
			if err != nil {
				return nil, err
			}
			out[i] = string(b)
			if b64 {
				out[i] += " b"
			}
		}
		return out, nil
	}
	if len(args) != 3 {
		return nil, errors.New("usage: ring SERVERS WEIGHTS")
	}
	servers := strings.Split(args[1], ",")
	var weights []int
	for _, w := range strings.Split(args[2], ",") {
		n, err := strconv.Atoi(w)
		if err != nil {
			return nil, err
		}
		weights = append(weights, n)
	}
	r, err := memcache.NewRing(servers, weights)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		out[i] = r.Server(k)
	}
	return out, nil
}

func run(ctx context.Context, cmd, addr, prefix string) (map[string]any, error) {
	s, err := open(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ks, err := kinds()
	if err != nil {
		return nil, err
	}
	return interop.Run(ctx, s.Store, cmd, prefix, ks)
}

// lease runs the lease commands: a stampede of Go callers on one key, or an
// invalidation.
func lease(ctx context.Context, args []string) (any, error) {
	s, err := open(ctx, args[1])
	if err != nil {
		return nil, err
	}
	defer s.Close()
	c, err := kura.New[string](s.Store, kura.Options{})
	if err != nil {
		return nil, err
	}
	if c.Stats().Coordination != "leases" {
		return nil, fmt.Errorf("coordination %q, want leases", c.Stats().Coordination)
	}
	key := args[2]
	if args[0] == "invalidate" {
		return map[string]bool{"ok": true}, c.Invalidate(ctx, key)
	}
	if len(args) != 6 && len(args) != 7 {
		return nil, fmt.Errorf("usage: stampede ADDR KEY CALLERS SLEEPMS VALUE [PROCS]")
	}
	if len(args) == 7 {
		var procs int64
		if _, err := fmt.Sscan(args[6], &procs); err != nil {
			return nil, err
		}
		if err := barrier(ctx, s, "ready:"+key, procs); err != nil {
			return nil, err
		}
	}
	var callers, sleep int
	if _, err := fmt.Sscan(args[3], &callers); err != nil {
		return nil, err
	}
	if _, err := fmt.Sscan(args[4], &sleep); err != nil {
		return nil, err
	}
	value := args[5]
	loader := func(ctx context.Context, k string) (string, error) {
		if err := s.incr(ctx, "loads:"+k); err != nil {
			return "", err
		}
		time.Sleep(time.Duration(sleep) * time.Millisecond)
		return value, nil
	}
	values := make([]string, callers)
	errs := make([]string, callers)
	done := make(chan int)
	for i := 0; i < callers; i++ {
		go func(i int) {
			v, err := c.Fetch(ctx, key, time.Minute, loader)
			values[i] = v
			if err != nil {
				errs[i] = err.Error()
			}
			done <- i
		}(i)
	}
	for i := 0; i < callers; i++ {
		<-done
	}
	for _, e := range errs {
		if e != "" {
			return nil, fmt.Errorf("fetch: %s", e)
		}
	}
	return map[string]any{"values": values, "fillsLost": c.Stats().LeaseFillsLost}, nil
}

// barrier INCRs counter and waits until it reaches n, so processes that
// start at different speeds stampede together.
func barrier(ctx context.Context, s *opened, counter string, n int64) error {
	if err := s.incr(ctx, counter); err != nil {
		return err
	}
	for {
		v, err := s.get(ctx, counter)
		if err != nil {
			return err
		}
		if v >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// dictWrite publishes trained dictionaries the way a Go fleet does
// (dictstore) and writes one value with each, for a Node reader that has
// none of them.
func dictWrite(ctx context.Context, addr, prefix string) (map[string]any, error) {
	s, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{addr}})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	reg, err := dictstore.New(dictstore.Options{Store: s})
	if err != nil {
		return nil, err
	}
	var samples [][]byte
	for i := 0; i < 300; i++ {
		samples = append(samples, []byte(fmt.Sprintf(`{"id":%d,"name":"記事 article %d","tags":["金利","yen"],"body":"The yen weakened as the central bank held rates. 日銀は金利を据え置いた。 %d"}`, i, i, i*7)))
	}
	zd, _, err := codec.TrainContentDictionary(samples, 2048)
	if err != nil {
		return nil, err
	}
	sd, _, err := codec.TrainS2Dictionary(samples, 2048)
	if err != nil {
		return nil, err
	}
	v := Article{ID: 7, Name: "記事 article 7", Tags: []string{"金利", "yen"}, At: time.Date(2026, 11, 24, 22, 0, 0, 0, time.UTC),
		Body: "The yen weakened as the central bank held rates. 日銀は金利を据え置いた。 49"}
	out := map[string]any{}
	for _, w := range []struct {
		name string
		comp codec.Compressor
		dict []byte
	}{{"zstd-dict", codec.Zstd(3), zd}, {"s2-dict", codec.S2(), sd}} {
		if _, err := reg.Publish(ctx, w.dict); err != nil {
			return nil, err
		}
		cd, err := codec.New(codec.Options{Compressor: w.comp, MinCompressSize: -1, MinSavings: -1, DictionarySource: reg})
		if err != nil {
			return nil, err
		}
		if _, err := cd.SetDictionary(w.dict); err != nil {
			return nil, err
		}
		c, err := kura.New[Article](s, kura.Options{Codec: cd})
		if err != nil {
			return nil, err
		}
		if err := c.Set(ctx, prefix+w.name, v, time.Minute); err != nil {
			return nil, err
		}
		out[prefix+w.name] = v
	}
	return out, nil
}

func rueidisNil(err error) bool { return rueidis.IsRedisNil(err) }

// history is the Go reader of the mixed-language per-read history test.
func history(args []string) ([][3]int64, error) {
	addr, key := args[0], args[1]
	loops, err := strconv.Atoi(args[2])
	if err != nil {
		return nil, err
	}
	ms, err := strconv.Atoi(args[3])
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ms)*time.Millisecond+30*time.Second)
	defer cancel()
	s, err := open(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	opts := kura.Options{StoreTimeout: 5 * time.Second}
	if args[4] == "off" {
		opts.Leases = kura.LeasesOff
	}
	c, err := kura.New[int64](s.Store, opts)
	if err != nil {
		return nil, err
	}
	loader := func(ctx context.Context, k string) (int64, error) {
		v, err := s.get(ctx, "src:"+k)
		if err != nil {
			return 0, err
		}
		time.Sleep(time.Duration(rand.Int64N(60_000)) * time.Microsecond)
		return v, nil
	}
	var stop atomic.Bool
	end := time.Now().Add(time.Duration(ms) * time.Millisecond)
	go func() {
		for !stop.Load() {
			if v, err := s.get(ctx, "stop:"+key); (err == nil && v > 0) || time.Now().After(end) {
				stop.Store(true)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if err := s.incr(ctx, "ready:"+key); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var out [][3]int64
	var wg sync.WaitGroup
	var ferr atomic.Value
	for i := 0; i < loops; i++ {
		wg.Go(func() {
			for !stop.Load() {
				start := time.Now().UnixMicro()
				v, err := c.Fetch(ctx, key, time.Minute, loader)
				if err != nil {
					ferr.Store(err)
					stop.Store(true)
					return
				}
				mu.Lock()
				out = append(out, [3]int64{start, time.Now().UnixMicro(), v})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err, ok := ferr.Load().(error); ok {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	return out, nil
}
