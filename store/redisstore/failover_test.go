package redisstore_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/history"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// failoverLoad runs 64 callers (Fetch and FetchMany through a Cache with
// leases and the L1) and one writer that bumps a key's version at the
// source and invalidates it (one key, or two of the same hash slot),
// around an event (event runs once the load is warm and returns when the
// event is over). Every read is checked twice: against a floor (a read
// that started after Invalidate(k) returned must see at least the
// version written before that Invalidate: counted as stale), and as a
// history (internal/history) checked against the per-read guarantee of
// docs/leases.md and docs/l1.md, with the L1's store reads and the
// server's reports recorded by recStore.
type failoverLoad struct {
	callers   int
	groups    int // keys i and i+groups share a hash slot (groups > 0)
	keys      []string
	index     map[string]int
	source    []atomic.Int64 // current version per key
	floor     []atomic.Int64 // version every read starting now must see
	loads     atomic.Int64
	errs      atomic.Int64
	stale     atomic.Int64
	writerErr atomic.Int64
	writes    atomic.Int64
	firstErr  atomic.Pointer[error]
	// writer, when set, is the Cache the writer invalidates through:
	// another process's, as far as the readers' L1 and primary window
	// know. Nil: the readers' Cache.
	writer *kura.Cache[history.Value]
	// window, when set, is a run whose guarantee has a documented
	// window (replica reads without the Invalidate wait): a history that
	// breaks the guarantee is logged, not failed.
	window    bool
	writerMsg atomic.Pointer[error] // the writer's first error
	rec       history.Recorder

	mu    sync.Mutex
	calls []call
}

type call struct {
	start, end time.Time
	loaded     bool
}

type loadReport struct {
	Calls, Errors, Stale, Loads, Writes, WriterErrors int64
	P99Before, P99During                              time.Duration
	CallsDuring                                       int
	FirstHit                                          time.Duration // event end to the first call after it served without a load
	Event                                             time.Duration
	History                                           history.Result
}

func (r loadReport) String() string {
	return fmt.Sprintf("calls %d, errors %d, stale reads %d, loader calls %d, writes %d (writer errors %d); p99 before %v, p99 of the %d calls overlapping the event %v; event %v, first hit after it ended %v; history: %d reads, %d after an Invalidate, %d stale, ok %v",
		r.Calls, r.Errors, r.Stale, r.Loads, r.Writes, r.WriterErrors, r.P99Before, r.CallsDuring, r.P99During, r.Event.Round(time.Millisecond), r.FirstHit.Round(time.Millisecond),
		r.History.Reads, r.History.AfterInvalidate, r.History.Stale, r.History.OK())
}

// newFailoverLoad makes nkeys keys "user:{g}:i", in groups of groups
// hash slots (the {g} hash tag), so batches hold several keys of one
// slot; groups 0 gives every key its own name "user:i".
func newFailoverLoad(nkeys, groups int) *failoverLoad {
	l := &failoverLoad{callers: 64, groups: groups, source: make([]atomic.Int64, nkeys), floor: make([]atomic.Int64, nkeys), index: map[string]int{}}
	for i := range nkeys {
		k := fmt.Sprintf("user:%d", i)
		if groups > 0 {
			k = fmt.Sprintf("user:{g%d}:%d", i%groups, i)
		}
		l.keys = append(l.keys, k)
		l.index[k] = i
	}
	return l
}

func (l *failoverLoad) fail(err error) {
	l.errs.Add(1)
	l.firstErr.CompareAndSwap(nil, &err)
}

// load is the loader's read of the source, recorded.
func (l *failoverLoad) load(key string, client int) history.Value {
	id := strconv.FormatInt(l.loads.Add(1), 10)
	start := history.Now()
	ver := l.source[l.index[key]].Load()
	l.rec.Add(history.Op{Kind: history.Load, Client: client, Key: key, Start: start, End: history.Now(), Ver: ver, Load: id})
	return history.Value{Key: key, Ver: ver, Load: id}
}

// read records a read through the Cache and checks it against its floor.
func (l *failoverLoad) read(client int, via string, start int64, floor int64, v history.Value) {
	l.rec.Add(history.Op{Kind: history.Read, Client: client, Key: v.Key, Start: start, End: history.Now(), Ver: v.Ver, Load: v.Load, Via: via})
	if v.Ver < floor {
		l.stale.Add(1)
	}
}

// run drives the load around event and returns the figures; the history
// is checked against the guarantee for leases with the L1 when l1 is set.
func (l *failoverLoad) run(t *testing.T, c *kura.Cache[history.Value], l1 bool, warm, after time.Duration, event func()) loadReport {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w := range l.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			// This caller's loader calls. Atomic: one FetchMany may run its
			// loader for its leased and its unleased keys at once.
			var myLoads atomic.Int64
			loader := func(_ context.Context, key string) (history.Value, error) {
				myLoads.Add(1)
				v := l.load(key, w)
				time.Sleep(time.Millisecond) // a database round trip: leases matter
				return v, nil
			}
			many := func(ctx context.Context, keys []string) (map[string]history.Value, error) {
				myLoads.Add(1)
				m := make(map[string]history.Value, len(keys))
				for _, k := range keys {
					m[k] = l.load(k, w)
				}
				time.Sleep(time.Millisecond)
				return m, nil
			}
			var mine []call
			defer func() {
				l.mu.Lock()
				l.calls = append(l.calls, mine...)
				l.mu.Unlock()
			}()
			for ctx.Err() == nil {
				before := myLoads.Load()
				start := time.Now()
				hstart := history.Now()
				if w%4 == 0 {
					keys := make([]string, 8)
					floors := make([]int64, 8)
					for j := range keys {
						i := rng.IntN(len(l.keys))
						keys[j], floors[j] = l.keys[i], l.floor[i].Load()
					}
					m, err := c.FetchMany(ctx, keys, time.Hour, many)
					if err != nil {
						if ctx.Err() == nil {
							l.fail(err)
						}
						continue
					}
					for j, k := range keys {
						l.read(w, "FetchMany", hstart, floors[j], m[k])
					}
				} else {
					i := rng.IntN(len(l.keys))
					floor := l.floor[i].Load()
					v, err := c.Fetch(ctx, l.keys[i], time.Hour, loader)
					if err != nil {
						if ctx.Err() == nil {
							l.fail(err)
						}
						continue
					}
					l.read(w, "Fetch", hstart, floor, v)
				}
				// A call served without this caller's loader: from the
				// cache (or another caller's load in flight).
				mine = append(mine, call{start: start, end: time.Now(), loaded: myLoads.Load() != before})
			}
		}()
	}
	// The writer: version up at the source, then Invalidate (every third
	// time two keys of one slot, one DEL of both); the floor rises only
	// once Invalidate has returned.
	wc := cmp.Or(l.writer, c)
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(99, 1))
		for n := 0; ctx.Err() == nil; n++ {
			idx := []int{rng.IntN(len(l.keys))}
			if n%3 == 0 && l.groups > 0 && len(l.keys)%l.groups == 0 {
				// Keys i and i+groups share a hash tag (newFailoverLoad).
				idx = append(idx, (idx[0]+l.groups)%len(l.keys))
			}
			keys := make([]string, len(idx))
			vers := make([]int64, len(idx))
			for j, i := range idx {
				keys[j] = l.keys[i]
				start := history.Now()
				vers[j] = l.source[i].Add(1)
				l.rec.Add(history.Op{Kind: history.Write, Client: -3, Key: keys[j], Start: start, End: history.Now(), Ver: vers[j]})
			}
			for ctx.Err() == nil {
				start := history.Now()
				if err := wc.Invalidate(ctx, keys...); err != nil {
					if ctx.Err() != nil {
						break
					}
					l.writerErr.Add(1)
					l.writerMsg.CompareAndSwap(nil, &err)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				end := history.Now()
				for j, i := range idx {
					l.rec.Add(history.Op{Kind: history.Invalidate, Client: -3, Key: keys[j], Start: start, End: end})
					l.floor[i].Store(vers[j])
				}
				l.writes.Add(1)
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(warm)
	evStart := time.Now()
	event()
	evEnd := time.Now()
	time.Sleep(after)
	cancel()
	wg.Wait()

	r := loadReport{Calls: int64(len(l.calls)), Errors: l.errs.Load(), Stale: l.stale.Load(), Loads: l.loads.Load(),
		Writes: l.writes.Load(), WriterErrors: l.writerErr.Load(), Event: evEnd.Sub(evStart)}
	var before, during []time.Duration
	firstHit := time.Time{}
	slices.SortFunc(l.calls, func(a, b call) int { return a.end.Compare(b.end) })
	for _, c := range l.calls {
		d := c.end.Sub(c.start)
		switch {
		case c.end.Before(evStart):
			before = append(before, d)
		case c.start.Before(evEnd):
			during = append(during, d)
		}
		if !c.loaded && c.start.After(evEnd) && firstHit.IsZero() {
			firstHit = c.end
		}
	}
	r.P99Before, r.P99During, r.CallsDuring = p99(before), p99(during), len(during)
	if !firstHit.IsZero() {
		r.FirstHit = firstHit.Sub(evEnd)
	}
	if p := l.firstErr.Load(); p != nil {
		t.Errorf("a caller got an error: %v", *p)
	}
	if p := l.writerMsg.Load(); p != nil {
		t.Logf("the writer's first error (of %d): %v", r.WriterErrors, *p)
	}
	r.History = history.Check(l.rec.Ops(), history.Property{Leases: true, L1: l1}, 10*time.Second)
	if !r.History.OK() && l.window {
		t.Logf("the history breaks the per-read guarantee within the documented window: %d stale of %d reads after an Invalidate", r.History.Stale, r.History.AfterInvalidate)
	} else if !r.History.OK() {
		t.Errorf("the history breaks the per-read guarantee (%v):\n%s", history.Property{Leases: true, L1: l1}, strings.Join(r.History.Failures, "\n"))
	}
	return r
}

// recStore records, for the history, what the L1 read from the store
// (Tracked) and the server's reports the L1 handled (Report); every other
// method is the Store's.
type recStore struct {
	*redisstore.Store
	rec *history.Recorder
	dec *codec.Codec
}

func newRecStore(t *testing.T, s *redisstore.Store, rec *history.Recorder) *recStore {
	dec, err := codec.New(codec.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &recStore{Store: s, rec: rec, dec: dec}
}

func (r *recStore) GetTracked(ctx context.Context, key string) ([]byte, error) {
	start := history.Now()
	v, err := r.Store.GetTracked(ctx, key)
	r.tracked([]string{key}, [][]byte{v}, err, start)
	return v, err
}

func (r *recStore) GetManyTracked(ctx context.Context, keys []string) ([][]byte, error) {
	start := history.Now()
	vs, err := r.Store.GetManyTracked(ctx, keys)
	r.tracked(keys, vs, err, start)
	return vs, err
}

func (r *recStore) tracked(keys []string, vals [][]byte, err error, start int64) {
	end := history.Now()
	failed := map[string]error{}
	var be *store.BatchError
	if errors.As(err, &be) {
		failed = be.Failed()
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return
	}
	for i, k := range keys {
		if failed[k] != nil || i >= len(vals) {
			continue
		}
		op := history.Op{Kind: history.Tracked, Client: -1, Key: k, Start: start, End: end}
		if vals[i] != nil {
			var v history.Value
			h, derr := r.dec.Decode(vals[i], &v)
			if derr != nil || h.Kind != codec.KindValue {
				continue // a placeholder: no value
			}
			op.Ver, op.Load = v.Ver, v.Load
		}
		r.rec.Add(op)
	}
}

func (r *recStore) Subscribe(fn func(keys []string)) func() {
	return r.Store.Subscribe(func(keys []string) {
		start := history.Now()
		fn(keys)
		end := history.Now()
		if keys == nil {
			r.rec.Add(history.Op{Kind: history.Report, Client: -1, Flush: true, Start: start, End: end})
		}
		for _, k := range keys {
			r.rec.Add(history.Op{Kind: history.Report, Client: -1, Key: k, Start: start, End: end})
		}
	})
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)*99/100]
}

// TestSentinelFailoverUnderLoad SIGKILLs the primary under 64 callers
// (Fetch and FetchMany with leases and the L1 over tracking) and a writer
// invalidating, and lets Sentinel promote the replica: no caller sees an
// error (the loader serves them meanwhile), no read returns a version
// older than the last invalidation that returned before it began (a
// lease taken on the old primary never lands a stale fill on the new
// one), and the L1 is flushed.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, DownAfter: 500 * time.Millisecond})
	o := sentinelOpts(set)
	o.Tracking = redisstore.Tracking{Enabled: true}
	s := openSentinel(t, o)
	l := newFailoverLoad(200, 0)
	c, err := kura.New[history.Value](newRecStore(t, s, &l.rec), kura.Options{L1: kura.L1Options{MaxBytes: 8 << 20}, Leases: kura.LeasesRequired})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l1Before := c.Stats().L1.Flushes
	r := l.run(t, c, true, time.Second, time.Second, func() {
		if err := set.KillPrimary(context.Background()); err != nil {
			t.Error(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := set.WaitMaster(ctx, set.Primary.Addr); err != nil {
			t.Error(err)
		}
		// The Store has followed once a write through it lands on the
		// replica, now the primary.
		for ctx.Err() == nil {
			if err := s.Set(ctx, "probe", []byte("x"), time.Minute); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	t.Logf("sentinel failover under 64 callers: %v", r)
	st := c.Stats()
	if r.Errors != 0 || r.Stale != 0 {
		t.Fatalf("errors %d, stale reads %d; want 0", r.Errors, r.Stale)
	}
	if st.Conn == nil || st.Conn.Failovers != 1 || st.Conn.Primary != set.Replica.Addr || st.Conn.TrackingFlushes == 0 {
		t.Fatalf("Stats.Conn after one failover = %+v; want 1 failover to %s and a tracking flush", st.Conn, set.Replica.Addr)
	}
	if st.L1.Flushes <= l1Before {
		t.Fatalf("the L1 was not flushed on failover (flushes %d -> %d)", l1Before, st.L1.Flushes)
	}
	if r.FirstHit == 0 {
		t.Fatal("no call was served from the cache after the failover")
	}
	if role, _ := set.Replica.Do(context.Background(), "ROLE"); len(role) < 6 || role[:6] != "master" {
		t.Fatalf("the replica was not promoted: %q", role)
	}
}

// TestLeaseAcrossFailover: a lease won on the old primary (its
// placeholder replicated) cannot land its fill on the promoted replica
// once the key was invalidated there; without an invalidation, the fill
// lands (the lease is still the key's).
func TestLeaseAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, DownAfter: 500 * time.Millisecond})
	s := openSentinel(t, sentinelOpts(set))
	ctx := context.Background()
	opts := store.LeaseOptions{TTL: time.Minute, Placeholder: []byte("\x00lease-A")}
	res, err := s.LeaseGet(ctx, []string{"k:inval", "k:kept"}, opts)
	if err != nil || !res[0].Won || !res[1].Won {
		t.Fatalf("LeaseGet = %+v, %v", res, err)
	}
	waitReplicated(t, set, "k:inval")
	waitReplicated(t, set, "k:kept")
	if err := set.KillPrimary(context.Background()); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := s.Invalidate(wctx, []string{"k:inval"}, 0)
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("no failover: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	err = s.Fill(ctx, []store.Fill{
		{Lease: res[0].Lease, Value: []byte("loaded before the change"), TTL: time.Minute},
		{Lease: res[1].Lease, Value: []byte("fresh"), TTL: time.Minute},
	})
	var be *store.BatchError
	if !errors.As(err, &be) || !errors.Is(be.Failed()["k:inval"], store.ErrNotStored) || be.Failed()["k:kept"] != nil {
		t.Fatalf("Fill after failover = %v; want k:inval refused (lease lost), k:kept stored", err)
	}
	if _, err := s.Get(ctx, "k:inval"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the stale fill landed on the new primary: %v", err)
	}
	if v, err := s.Get(ctx, "k:kept"); err != nil || string(v) != "fresh" {
		t.Fatalf("k:kept = %q, %v", v, err)
	}
}

// BenchmarkInvalidateWait measures what waiting for a replica costs an
// Invalidate on a Sentinel-managed primary with one replica (all on this
// machine's loopback): "wait" is the default in Sentinel mode (DEL and
// WAIT 1 on a dedicated connection, concurrent invalidations sharing
// one), "wait-alone" each Invalidate with its own DEL and WAIT (before
// they were shared), "nowait" is InvalidateWait.Replicas -1 (DEL on the
// shared pipeline). 64 goroutines invalidate one key each
// per call.
func BenchmarkInvalidateWait(b *testing.B) {
	set := servertest.SentinelSet(b, servers.SentinelConfig{})
	for _, mode := range []struct {
		name  string
		wait  redisstore.InvalidateWait
		alone bool
	}{
		{"wait", redisstore.InvalidateWait{}, false},
		{"wait-alone", redisstore.InvalidateWait{}, true},
		{"nowait", redisstore.InvalidateWait{Replicas: -1}, false},
	} {
		b.Run(mode.name, func(b *testing.B) {
			o := sentinelOpts(set)
			o.InvalidateWait = mode.wait
			o.FailFast = true
			s, err := redisstore.New(context.Background(), o)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if mode.alone {
				redisstore.WaitAlone(s)
			}
			var n atomic.Int64
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					k := fmt.Sprintf("user:%d", n.Add(1)%1000)
					if err := s.Invalidate(ctx, []string{k}, 0); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkReplicaReads compares GETs of 100 warm 1 KB keys from 64
// goroutines sent to the primary and to the replica (ReadFromReplicas).
// On this machine both servers share its 2 cores with the client, so it
// shows what the routing costs, not what a replica adds in capacity.
func BenchmarkReplicaReads(b *testing.B) {
	set := servertest.SentinelSet(b, servers.SentinelConfig{})
	val := make([]byte, 1024)
	for _, mode := range []struct {
		name    string
		replica bool
	}{{"primary", false}, {"replica", true}} {
		b.Run(mode.name, func(b *testing.B) {
			o := sentinelOpts(set)
			o.ReadFromReplicas.Enabled = mode.replica
			o.FailFast = true
			s, err := redisstore.New(context.Background(), o)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			for i := range 100 {
				if err := s.Set(ctx, fmt.Sprintf("k:%d", i), val, 0); err != nil {
					b.Fatal(err)
				}
			}
			time.Sleep(1500 * time.Millisecond) // past the primary window of those writes
			var n atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Get(ctx, fmt.Sprintf("k:%d", n.Add(1)%100)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			if mode.replica && s.ConnStats().ReplicaReads == 0 {
				b.Fatal("no read went to the replica")
			}
		})
	}
}
