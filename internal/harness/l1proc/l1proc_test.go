package l1proc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/proctest"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/redisstore"
)

func TestMain(m *testing.M) {
	os.Exit(proctest.Main(m, proctest.Workers{"reader": reader, "writer": writer}))
}

// val is the cached value: a version, and when the writer began writing
// it (unix ns), for the delay.
type val struct {
	V  int   `msgpack:"v"`
	At int64 `msgpack:"at"`
}

type args struct {
	URL    string
	Rounds int
}

// readerReport is what process A saw.
type readerReport struct {
	Rounds, Stale int
	Reads         int64
	Delays        []int64 // ns from the start of B's write to A's drop
	L1            kura.L1Stats
}

func key(r int) string { return "x:" + strconv.Itoa(r) }

// signal pushes r on list; await pops the next round from list.
func signal(ctx context.Context, c rueidis.Client, list string, r int) error {
	return c.Do(ctx, c.B().Rpush().Key(list).Element(strconv.Itoa(r)).Build()).Error()
}

func await(ctx context.Context, c rueidis.Client, list string, want int) error {
	got, err := c.Do(ctx, c.B().Blpop().Key(list).Timeout(30).Build()).AsStrSlice()
	if err != nil {
		return fmt.Errorf("waiting for round %d on %s: %w", want, list, err)
	}
	if len(got) != 2 || got[1] != strconv.Itoa(want) {
		return fmt.Errorf("waiting for round %d on %s: got %v", want, list, got)
	}
	return nil
}

// writer is process B: per round it writes version 0 of a fresh key, lets
// A read it into its L1, then writes version 1 (or deletes the key, every
// fourth round).
func writer(ctx context.Context, ch *proctest.Child) error {
	var a args
	if err := ch.Args(&a); err != nil {
		return err
	}
	st, err := redisstore.NewFromURL(ctx, a.URL, redisstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := kura.New[val](st, kura.Options{})
	if err != nil {
		return err
	}
	rc := st.Client()
	if err := ch.Ready(ctx); err != nil {
		return err
	}
	for r := 0; r < a.Rounds; r++ {
		if err := c.Set(ctx, key(r), val{V: 0}, time.Hour); err != nil {
			return err
		}
		if err := signal(ctx, rc, "l1:b2a", r); err != nil {
			return err
		}
		if err := await(ctx, rc, "l1:a2b", r); err != nil {
			return err
		}
		if r%4 == 3 {
			err = c.Delete(ctx, key(r))
		} else {
			err = c.Set(ctx, key(r), val{V: 1, At: time.Now().UnixNano()}, time.Hour)
		}
		if err != nil {
			return err
		}
	}
	return ch.Report(map[string]int{"rounds": a.Rounds})
}

// round is what A's readers check: once the report for key arrived, no
// read of key may return a version below min.
type round struct {
	key string
	min int
}

// reader is process A: it reads each round's key into its L1, waits for
// the server's report of B's write, and from then on checks that neither
// its main loop nor its concurrent readers see version 0 again.
func reader(ctx context.Context, ch *proctest.Child) error {
	var a args
	if err := ch.Args(&a); err != nil {
		return err
	}
	st, err := redisstore.NewFromURL(ctx, a.URL, redisstore.Options{Tracking: redisstore.Tracking{Enabled: true}})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := kura.New[val](st, kura.Options{L1: kura.L1Options{MaxBytes: 8 << 20}})
	if err != nil {
		return err
	}
	defer c.Close()
	rc := st.Client()

	// Reports per key, delivered after the L1 handled them (subscribers
	// run in order; the Cache subscribed first).
	var mu sync.Mutex
	dropped := map[string]int64{}
	wake := make(chan struct{}, 1)
	cancel := st.Subscribe(func(keys []string) {
		now := time.Now().UnixNano()
		mu.Lock()
		for _, k := range keys {
			if _, ok := dropped[k]; !ok {
				dropped[k] = now
			}
		}
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	defer cancel()

	var cur atomic.Pointer[round]
	cur.Store(&round{})
	var stale, reads atomic.Int64
	check := func(rd *round, v val, err error) {
		reads.Add(1)
		if rd.min > 0 && err == nil && v.V < rd.min {
			stale.Add(1)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rd := cur.Load()
				if rd.key != "" {
					v, err := c.Get(ctx, rd.key)
					check(rd, v, err)
				}
				runtime.Gosched()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	if err := ch.Ready(ctx); err != nil {
		return err
	}
	rep := readerReport{Rounds: a.Rounds}
	for r := 0; r < a.Rounds; r++ {
		k := key(r)
		if err := await(ctx, rc, "l1:b2a", r); err != nil {
			return err
		}
		for i := 0; i < 2; i++ { // into the L1, then from it
			if v, err := c.Get(ctx, k); err != nil || v.V != 0 {
				return fmt.Errorf("round %d: A's first read = %+v, %v", r, v, err)
			}
		}
		cur.Store(&round{key: k})
		if err := signal(ctx, rc, "l1:a2b", r); err != nil {
			return err
		}
		deadline := time.After(10 * time.Second)
		var at int64
		for at == 0 {
			mu.Lock()
			at = dropped[k]
			mu.Unlock()
			if at != 0 {
				break
			}
			select {
			case <-wake:
			case <-deadline:
				return fmt.Errorf("round %d: no invalidation of %s within 10s", r, k)
			}
		}
		rd := &round{key: k, min: 1}
		cur.Store(rd)
		v, err := c.Get(ctx, k)
		check(rd, v, err)
		switch {
		case r%4 == 3 && !errors.Is(err, kura.ErrNotFound):
			return fmt.Errorf("round %d: after B's delete A read %+v, %v", r, v, err)
		case r%4 != 3 && (err != nil || v.V != 1):
			return fmt.Errorf("round %d: after B's write A read %+v, %v", r, v, err)
		case r%4 != 3:
			rep.Delays = append(rep.Delays, at-v.At)
		}
		mu.Lock()
		delete(dropped, k)
		mu.Unlock()
	}
	rep.Stale, rep.Reads, rep.L1 = int(stale.Load()), reads.Load(), c.Stats().L1
	return ch.Report(rep)
}

func rounds() int {
	if os.Getenv("KURA_SOAK") == "1" {
		return 10000
	}
	return 200
}

func TestL1CrossProcessRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	run(t, srv.URL())
}

func TestL1CrossProcessCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	cl := servertest.RedisCluster(t)
	run(t, cl.URL())
}

func run(t *testing.T, url string) {
	a := args{URL: url, Rounds: rounds()}
	opts := proctest.Options{Timeout: 30 * time.Minute}
	rg := proctest.Start(t, "reader", 1, a, opts)
	wg := proctest.Start(t, "writer", 1, a, opts)
	if err := rg.Go(); err != nil {
		t.Fatal(err)
	}
	if err := wg.Go(); err != nil {
		t.Fatal(err)
	}
	wg.WaitOK(t)
	res := rg.WaitOK(t)
	reps, err := proctest.Decode[readerReport](res)
	if err != nil || len(reps) != 1 {
		t.Fatalf("reader report: %v (%d)", err, len(reps))
	}
	r := reps[0]
	if r.Stale != 0 {
		t.Fatalf("process A returned the old value %d times after it had processed the invalidation (%d rounds, %d checked reads)", r.Stale, r.Rounds, r.Reads)
	}
	if r.L1.Hits < uint64(r.Rounds) || r.L1.Invalidations < uint64(r.Rounds) {
		t.Fatalf("L1 stats of A: %+v over %d rounds", r.L1, r.Rounds)
	}
	d := slices.Clone(r.Delays)
	slices.Sort(d)
	p := func(q float64) time.Duration { return time.Duration(d[int(q*float64(len(d)-1))]) }
	t.Logf("%d rounds, %d checked reads by A's readers, 0 stale; delay from B's write to A's L1 drop: p50 %v, p99 %v, max %v (%s)",
		r.Rounds, r.Reads, p(0.5), p(0.99), p(1), strings.Split(url, "?")[0])
}
