package readcheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/history"
	"github.com/kuracache/kura/internal/harness/proctest"
	"github.com/kuracache/kura/internal/readthrough"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/memstore"
	"github.com/kuracache/kura/store/move"
	"github.com/kuracache/kura/store/redisring"
	"github.com/kuracache/kura/store/redisstore"
)

// combo is one configuration of a Cache under test.
type combo struct {
	Backend string // redis, cluster, ring, memcached, memstore
	Leases  bool
	// L1 is "" (off), "tracking" (Redis reports changes) or "staleness"
	// (L1Options.MaxStaleness bounds it).
	L1     string
	Health bool
	SWR    time.Duration
	Early  time.Duration
	// Fault is an injected fault: "" (none) or "unleased-fill".
	Fault string
	// LoaderDelay, if set, replaces args.LoaderDelay.
	LoaderDelay time.Duration
	// Hot is the scenario of the reproduction: one key, many
	// readers per process, Fetch only, and a writer that does not pause.
	Hot bool
	// ReaderPause, if set, makes each reader pause a random time up to
	// it between two reads, Hot readers too (which otherwise never pause).
	ReaderPause time.Duration
}

// hotReaders is the number of readers per process of a Hot combination.
const hotReaders = 20

// indexReads reports whether the combination reads through an Index.
// Not with early refresh yet: the background refresh of an id list runs
// Index.IDs's loader closure after IDs returned, a data race in the root
// package (index.go, `loaded`) reported to the read-path rewrite (#18).
func (c combo) indexReads() bool { return c.Early == 0 }

// maxStaleness is the L1 bound of the "staleness" combinations.
const maxStaleness = 20 * time.Millisecond

func (c combo) Name() string {
	n := c.Backend
	if c.Leases {
		n += "/leases"
	} else {
		n += "/no-leases"
	}
	switch c.L1 {
	case "tracking":
		n += "/l1-tracking"
	case "staleness":
		n += "/l1-maxstaleness"
	}
	if c.Health {
		n += "/health"
	}
	if c.SWR > 0 {
		n += "/swr"
	}
	if c.Early > 0 {
		n += "/early-refresh"
	}
	if c.Hot {
		n += "/hot-key"
	}
	if c.Fault != "" {
		n += "/fault:" + c.Fault
	}
	return n
}

// property is the documented guarantee of the combination.
func (c combo) property() history.Property {
	p := history.Property{Leases: c.Leases}
	if !c.Leases {
		return p
	}
	p.Window = c.SWR
	switch c.L1 {
	case "tracking":
		p.L1 = true
	case "staleness":
		p.L1, p.Staleness = true, maxStaleness
	}
	return p
}

// ttl is the values' TTL: short where early refresh must find keys due.
func (c combo) ttl() time.Duration {
	if c.Early > 0 {
		return 2 * time.Second
	}
	return time.Minute
}

// args are a worker's arguments.
type args struct {
	// Addrs are the servers per backend: a redis:// URL, or the ring's
	// Redis or memcached host:ports.
	Addrs  map[string][]string
	DB     string // the source of truth: a standalone Redis host:port
	Run    string
	Combos []combo
	// Duration is how long the readers and the writer run.
	Duration time.Duration
	Readers  int // reader goroutines per combination and process
	Keys     int // keys per combination
	// LoaderDelay is how long a load takes after reading the source: the
	// window in which an Invalidate can overtake it.
	LoaderDelay time.Duration
	// WriterPause bounds the random pause between two writes.
	WriterPause time.Duration
	// MinWrites is how many writes (each with its Invalidate) every
	// combination gets at least: on a loaded machine Duration alone may
	// leave a combination without any.
	MinWrites int64
	// Fault is a fault of the pipeline switched on in every child
	// (readthrough.InjectFault, process-wide): "" or "join-after-invalidate".
	Fault string
	// Dir is where each child writes its histories (too large for the
	// report pipe under load).
	Dir string
	// Move is the schedule of the move backends (move-ring,
	// move-memcached).
	Move moveSchedule
}

// report is what a worker sends per combination.
type report struct {
	// Written, from child 0, says every combination has had Duration
	// and MinWrites: the parent then stops the group.
	Written  bool
	Combo    string
	OpsFile  string       // the history, as JSON, in args.Dir
	Ops      []history.Op `json:"-"`
	Calls    map[string]int64
	Bypassed map[string]int64
	Sample   []string
	// Move is a move backend's counters (move.Stats), nil otherwise.
	Move     *move.Stats
	Errors   int64
	ErrShown string
}

func openBase(ctx context.Context, a args, c combo, proc int) (store.Store, error) {
	switch c.Backend {
	case "move-ring", "move-memcached":
		return openMove(ctx, a, c, proc)
	case "redis", "cluster":
		o := redisstore.Options{}
		if c.L1 == "tracking" {
			o.Tracking = redisstore.Tracking{Enabled: true}
		}
		return redisstore.NewFromURL(ctx, a.Addrs[c.Backend][0], o)
	case "ring": // 3 standalone shards, store/redisring
		o := redisstore.Options{}
		if c.L1 == "tracking" {
			o.Tracking = redisstore.Tracking{Enabled: true}
		}
		return redisring.New(ctx, redisring.Options{Servers: a.Addrs[c.Backend], Redis: o})
	case "memcached":
		return memcache.New(ctx, memcache.Options{Servers: a.Addrs[c.Backend], MaxIdleConns: 64})
	case "memstore":
		return memstore.New(memstore.Options{})
	}
	return nil, fmt.Errorf("unknown backend %q", c.Backend)
}

// subject is one combination set up in one process.
type subject struct {
	c       combo
	base    store.Store
	closers []func() error
	cache   *kura.Cache[history.Value]
	keyed   *kura.Keyed[int, history.Value]
	index   *kura.Index[int, int, history.Value]
	bottom  *calls
	rec     *history.Recorder
	db      rueidis.Client
	a       args
	proc    int
	loads   atomic.Int64
	writes  atomic.Int64
	errs    atomic.Int64
	errMu   sync.Mutex
	errShow string
}

func (s *subject) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		_ = s.closers[i]()
	}
}

func setUp(ctx context.Context, a args, c combo, n, proc int, db rueidis.Client) (*subject, error) {
	s := &subject{c: c, rec: &history.Recorder{}, db: db, a: a, proc: proc, bottom: newCalls()}
	base, err := openBase(ctx, a, c, proc)
	if err != nil {
		return nil, err
	}
	s.base = base
	s.closers = append(s.closers, base.Close)
	inner := base
	if c.Fault == "unleased-fill" {
		inner = unleasedFill{base}
	}
	mark := fmt.Sprintf("%s/%d", c.Name(), proc)
	var mid store.Store = &layer{inner: inner, mark: mark, health: c.Health, calls: s.bottom}
	if c.Health {
		// Probes and failures as lenient as a loaded test machine needs:
		// this checks that calls pass through the wrapper, not its
		// verdicts (store/health's own tests do).
		h, err := health.New(mid, health.Options{ProbeTimeout: 5 * time.Second, FailureThreshold: 1 << 20})
		if err != nil {
			s.close()
			return nil, err
		}
		s.closers = append(s.closers, h.Close)
		mid = h
	}
	dec, err := codec.New(codec.Options{})
	if err != nil {
		s.close()
		return nil, err
	}
	top := &layer{inner: mid, top: true, mark: mark, rec: s.rec, proc: proc, decode: dec, plainL1: c.L1 == "staleness"}
	o := kura.Options{StoreTimeout: 5 * time.Second, StaleWhileRevalidate: c.SWR, EarlyRefresh: c.Early}
	if !c.Leases {
		o.Leases = kura.LeasesOff
	}
	switch c.L1 {
	case "tracking":
		o.L1 = kura.L1Options{MaxBytes: 8 << 20}
	case "staleness":
		o.L1 = kura.L1Options{MaxBytes: 8 << 20, MaxStaleness: maxStaleness}
	}
	cache, err := kura.New[history.Value](top, o)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("%s: %w", c.Name(), err)
	}
	s.closers = append(s.closers, cache.Close)
	if got, want := cache.Stats().Coordination, map[bool]string{true: "leases", false: "process"}[c.Leases]; got != want {
		s.close()
		return nil, fmt.Errorf("%s: coordination %q, want %q", c.Name(), got, want)
	}
	s.cache = cache
	prefix := a.Run + ":" + strconv.Itoa(n) + ":" // short: histories travel as JSON
	s.keyed, err = kura.NewKeyed[int, history.Value](cache, kura.KeyedOptions[int]{Prefix: prefix, TTL: c.ttl()})
	if err != nil {
		s.close()
		return nil, err
	}
	s.index, err = kura.NewIndex(s.keyed, kura.IndexOptions[int, int, history.Value]{
		Prefix: prefix + "idx:",
		LoadIDs: func(_ context.Context, group int) ([]int, error) {
			var ids []int
			for i := group; i < a.Keys; i += 2 {
				ids = append(ids, i)
			}
			return ids, nil
		},
		LoadRecords: func(ctx context.Context, ids []int) (map[int]history.Value, error) {
			keys := make([]string, len(ids))
			for i, id := range ids {
				keys[i] = s.keyed.Key(id)
			}
			got, err := s.loadMany(ctx, keys, -2)
			out := make(map[int]history.Value, len(got))
			for i, id := range ids {
				if v, ok := got[keys[i]]; ok {
					out[id] = v
				}
			}
			return out, err
		},
	})
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *subject) srcKey(key string) string { return s.a.Run + ":src:" + key }

func (s *subject) loadID() string {
	return fmt.Sprintf("p%d.%d", s.proc, s.loads.Add(1))
}

// loadMany is the loader: one MGET of the source, recorded as one Load
// per key, then LoaderDelay.
func (s *subject) loadMany(ctx context.Context, keys []string, client int) (map[string]history.Value, error) {
	src := make([]string, len(keys))
	for i, k := range keys {
		src[i] = s.srcKey(k)
	}
	start := history.Now()
	vals, err := s.db.Do(ctx, s.db.B().Mget().Key(src...).Build()).ToArray()
	end := history.Now()
	if err != nil {
		return nil, err
	}
	out := make(map[string]history.Value, len(keys))
	for i, k := range keys {
		var ver int64
		if i < len(vals) {
			if v, err := vals[i].AsInt64(); err == nil {
				ver = v
			} else if !rueidis.IsRedisNil(err) {
				return nil, err
			}
		}
		id := s.loadID()
		s.rec.Add(history.Op{Kind: history.Load, Proc: s.proc, Client: client, Key: k, Start: start, End: end, Ver: ver, Load: id})
		out[k] = history.Value{Key: k, Ver: ver, Load: id}
	}
	delay := s.a.LoaderDelay
	if s.c.LoaderDelay > 0 {
		delay = s.c.LoaderDelay
	}
	time.Sleep(delay)
	return out, nil
}

func (s *subject) errShown() string {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.errShow
}

func (s *subject) fail(err error) {
	s.errs.Add(1)
	s.errMu.Lock()
	if s.errShow == "" {
		s.errShow = err.Error()
	}
	s.errMu.Unlock()
}

func (s *subject) read(client int, via string, start int64, vals ...history.Value) {
	end := history.Now()
	for _, v := range vals {
		s.rec.Add(history.Op{Kind: history.Read, Proc: s.proc, Client: client, Key: v.Key, Start: start, End: end, Ver: v.Ver, Load: v.Load, Via: via})
	}
}

// reader reads until ctx ends, through each API in turn.
func (s *subject) reader(ctx context.Context, client int) {
	rng := rand.New(rand.NewPCG(uint64(s.proc), uint64(client)))
	n := s.keys()
	for i := 0; ctx.Err() == nil; i++ {
		id := rng.IntN(n)
		key := s.keyed.Key(id)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		start := history.Now()
		kind := i % 4
		switch {
		case s.c.Hot:
			kind = 0
		case kind == 3 && !s.c.indexReads():
			kind = i % 3
		}
		switch kind {
		case 0:
			v, err := s.cache.Fetch(rctx, key, s.c.ttl(), func(ctx context.Context, key string) (history.Value, error) {
				got, err := s.loadMany(ctx, []string{key}, client)
				return got[key], err
			})
			if err != nil {
				s.fail(err)
			} else {
				s.read(client, "Fetch", start, v)
			}
		case 1:
			keys := []string{key, s.keyed.Key((id + 1) % n)}
			got, err := s.cache.FetchMany(rctx, keys, s.c.ttl(), func(ctx context.Context, keys []string) (map[string]history.Value, error) {
				return s.loadMany(ctx, keys, client)
			})
			if err != nil {
				s.fail(err)
			}
			for _, v := range got {
				s.read(client, "FetchMany", start, v)
			}
		case 2:
			v, err := s.keyed.Fetch(rctx, id, func(ctx context.Context, id int) (history.Value, error) {
				k := s.keyed.Key(id)
				got, err := s.loadMany(ctx, []string{k}, client)
				return got[k], err
			})
			if err != nil {
				s.fail(err)
			} else {
				s.read(client, "Keyed", start, v)
			}
		case 3:
			got, err := s.index.Fetch(rctx, id%2)
			if err != nil {
				s.fail(err)
			}
			s.read(client, "Index", start, got...)
		}
		cancel()
		switch {
		case s.c.ReaderPause > 0:
			time.Sleep(time.Duration(rng.Int64N(int64(s.c.ReaderPause))))
		case !s.c.Hot:
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		}
	}
}

func (s *subject) keys() int {
	if s.c.Hot {
		return 1
	}
	return s.a.Keys
}

func (s *subject) readers() int {
	if s.c.Hot {
		return hotReaders
	}
	return s.a.Readers
}

// writer changes the source and invalidates, until ctx ends.
func (s *subject) writer(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(s.proc), 99))
	for ctx.Err() == nil {
		key := s.keyed.Key(rng.IntN(s.keys()))
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		start := history.Now()
		ver, err := s.db.Do(wctx, s.db.B().Incr().Key(s.srcKey(key)).Build()).AsInt64()
		end := history.Now()
		if err != nil {
			cancel()
			s.fail(err)
			return // the source's history would have a hole
		}
		s.rec.Add(history.Op{Kind: history.Write, Proc: s.proc, Client: -3, Key: key, Start: start, End: end, Ver: ver})
		s.writes.Add(1)
		start = history.Now()
		err = s.cache.Invalidate(wctx, key)
		end = history.Now()
		cancel()
		if err != nil {
			s.fail(err) // not recorded: the model then asks less
		} else {
			s.rec.Add(history.Op{Kind: history.Invalidate, Proc: s.proc, Client: -3, Key: key, Start: start, End: end})
		}
		if s.a.WriterPause > 0 && !s.c.Hot {
			time.Sleep(time.Duration(rng.Int64N(int64(s.a.WriterPause))))
		}
	}
}

func (s *subject) report() report {
	s.bottom.mu.Lock()
	defer s.bottom.mu.Unlock()
	rep := report{Combo: s.c.Name(), Ops: s.rec.Ops(), Calls: s.bottom.n, Bypassed: s.bottom.bypassed,
		Sample: s.bottom.sample, Errors: s.errs.Load(), ErrShown: s.errShown()}
	if m, ok := s.base.(*move.Store); ok {
		st := m.Stats()
		rep.Move = &st
	}
	return rep
}

// histWorker runs every combination of its arguments at once: child 0
// writes and invalidates, every child reads.
func histWorker(ctx context.Context, ch *proctest.Child) error {
	var a args
	if err := ch.Args(&a); err != nil {
		return err
	}
	switch a.Fault {
	case "":
	case "join-after-invalidate":
		readthrough.InjectFault(readthrough.JoinAfterInvalidate)
	default:
		return fmt.Errorf("unknown fault %q", a.Fault)
	}
	db, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a.DB}, DisableCache: true})
	if err != nil {
		return err
	}
	defer db.Close()
	var subs []*subject
	defer func() {
		for _, s := range subs {
			s.close()
		}
	}()
	for i, c := range a.Combos {
		s, err := setUp(ctx, a, c, i, ch.Index, db)
		if err != nil {
			return err
		}
		subs = append(subs, s)
	}
	if err := ch.Ready(ctx); err != nil {
		return err
	}
	// Everything runs until the parent stops the group (ctx), which it
	// does when child 0 reports that every combination had its time and
	// its writes.
	var wg sync.WaitGroup
	for _, s := range subs {
		if ch.Index == 0 {
			wg.Go(func() { s.writer(ctx) })
		}
		for r := 0; r < s.readers(); r++ {
			wg.Go(func() { s.reader(ctx, r) })
		}
	}
	if ch.Index == 0 {
		wg.Go(func() {
			end := time.Now().Add(a.Duration)
			for ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
				done := time.Now().After(end)
				for _, s := range subs {
					done = done && s.writes.Load() >= a.MinWrites
				}
				if done {
					_ = ch.Report(report{Written: true})
					return
				}
			}
		})
	}
	wg.Wait()
	for i, s := range subs {
		rep := s.report()
		b, err := json.Marshal(rep.Ops)
		if err != nil {
			return err
		}
		rep.OpsFile = filepath.Join(a.Dir, fmt.Sprintf("%d-%d.json", i, ch.Index))
		if err := os.WriteFile(rep.OpsFile, b, 0o600); err != nil {
			return err
		}
		if err := ch.Report(rep); err != nil {
			return err
		}
	}
	return nil
}
