package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	hashslot "github.com/kuracache/kura/internal/slot"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

// TestStalledServerUnderTraffic: against a redis-server stopped with
// SIGSTOP, every call still ends at its own deadline, however many calls
// ran out of time before it. rueidis keeps each abandoned command's slot
// in its connection's ring (1,024 slots) until the server answers, and a
// command that finds the ring full waits for a slot without looking at
// its context: once about a thousand reads had timed out, every caller
// waited until rueidis closed the connection (10 s later) instead of its
// 250 ms budget. One connection per server (this Store's default) filled
// it twice as fast as rueidis's own default on 2 CPUs; at a production
// rate either fills in well under a second. After SIGCONT the values are
// read again.
func TestStalledServerUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	for _, tc := range []struct {
		name      string
		configure func(*rueidis.ClientOption)
	}{
		{"default", nil},
		{"rueidis-multiplex", func(co *rueidis.ClientOption) { co.PipelineMultiplex = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := servertest.Redis(t, servers.RedisConfig{})
			s := open(t, srv.URL(), redisstore.Options{Configure: tc.configure})
			ctx := context.Background()
			if err := s.Set(ctx, "k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			// Concurrent reads first, as a service under traffic has: they
			// put the connection in rueidis's pipelined mode (its ring and
			// background writer), which a lone caller never starts.
			var warm sync.WaitGroup
			for range 64 {
				warm.Add(1)
				go func() {
					defer warm.Done()
					for range 50 {
						if _, err := s.Get(ctx, "k"); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			warm.Wait()
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			resumed := false
			defer func() {
				if !resumed {
					_ = srv.Resume()
				}
			}()
			// More abandoned reads than four connections' rings hold,
			// from 64 callers with a short deadline each.
			const deadline = 5 * time.Millisecond
			slowest := floodStalled(t, s, "k")
			cctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
			start := time.Now()
			_, err := s.Get(cctx, "k")
			last := time.Since(start)
			cancel()
			if err == nil {
				t.Fatal("Get answered by a stopped server")
			}
			// A bound far above the deadlines and far below rueidis's
			// 10 s connection timeout, which is what held the callers.
			const bound = 3 * time.Second
			t.Logf("slowest %v, last %v: %v", slowest, last, err)
			if slowest > bound || last > bound {
				t.Fatalf("against a stopped server, calls with a %v deadline took up to %v and one with 250ms took %v (bound %v): %v",
					deadline, slowest, last, bound, err)
			}
			if errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a stalled server's error reads as a miss: %v", err)
			}
			if err := srv.Resume(); err != nil {
				t.Fatal(err)
			}
			resumed = true
			servertest.Eventually(t, "the value read again after SIGCONT", func() error {
				cctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
				defer cancel()
				v, err := s.Get(cctx, "k")
				if err != nil {
					return err
				}
				if string(v) != "v" {
					return errors.New("read " + string(v))
				}
				return nil
			})
		})
	}
}

// TestStalledReplicaKeepsPrimary: with Sentinel replica reads, a stalled
// replica trips the stall guard for the reads rueidis sends to it, not
// for the calls to a primary that answers: once the replica's reads have
// run out of time hundreds of times, a write and a read of a key this
// Store just wrote (both go to the primary) still succeed.
func TestStalledReplicaKeepsPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	t.Parallel()
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: dataPW, FailoverTimeout: time.Minute})
	o := sentinelOpts(set)
	o.ReadFromReplicas = redisstore.ReplicaReads{Enabled: true, PrimaryWindow: time.Minute}
	o.InvalidateWait = redisstore.InvalidateWait{Replicas: -1}
	reader := openSentinel(t, o)
	writer := openSentinel(t, sentinelOpts(set))
	ctx := context.Background()
	if err := writer.Set(ctx, "r", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, set, "r")
	var warm sync.WaitGroup
	for range 32 {
		warm.Add(1)
		go func() {
			defer warm.Done()
			for range 20 {
				if _, err := reader.Get(ctx, "r"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	warm.Wait()
	if err := set.Replica.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = set.Replica.Resume()
		}
	}()
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
				_, _ = reader.Get(cctx, "r") // a replica read: times out
				cancel()
			}
		}()
	}
	wg.Wait()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := reader.Set(cctx, "w", []byte("x"), 0); err != nil {
		t.Fatalf("a write to the primary failed while only the replica was stalled: %v", err)
	}
	if v, err := reader.Get(cctx, "w"); err != nil || string(v) != "x" {
		t.Fatalf("a read of a key this Store just wrote (primary window) = %q, %v", v, err)
	}
	if err := set.Replica.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
}

// TestStalledClusterNodeUnderTraffic: the stall guard per Cluster node.
// One master of a Cluster is stopped with SIGSTOP (no replica to
// promote, and a node timeout longer than the test, so the Cluster does
// not go down): reads of its keys still end at their own deadline
// however many ran out of time before, and the other masters' keys keep
// being read and written, alone and in a batch that also holds the
// stalled node's keys (those fail per key). rueidis keeps one ring of
// 1,024 slots per node, so the stalled node's abandoned reads filled it
// as they do a standalone server's. After SIGCONT the stalled node's
// keys are read again.
func TestStalledClusterNodeUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	c := servertest.RedisClusterWith(t, servers.ClusterConfig{Replicas: -1, NodeTimeout: 5 * time.Minute})
	s := open(t, c.URL(), redisstore.Options{})
	ctx := context.Background()
	stalled := c.Nodes[0]
	// One key on the stalled master, one on each other master.
	var stalledKey string
	var liveKeys []string
	for i := 0; stalledKey == "" || len(liveKeys) < len(c.Nodes)-1; i++ {
		k := fmt.Sprintf("k%d", i)
		m, err := c.MasterOf(ctx, int(hashslot.Of(k)))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m == stalled:
			if stalledKey == "" {
				stalledKey = k
			}
		case !slices.ContainsFunc(liveKeys, func(l string) bool { mm, _ := c.MasterOf(ctx, int(hashslot.Of(l))); return mm == m }):
			liveKeys = append(liveKeys, k)
		}
	}
	all := append([]string{stalledKey}, liveKeys...)
	for _, k := range all {
		if err := s.Set(ctx, k, []byte("v-"+k), 0); err != nil {
			t.Fatal(err)
		}
	}
	var warm sync.WaitGroup
	for range 64 {
		warm.Add(1)
		go func() {
			defer warm.Done()
			for i := range 50 {
				if _, err := s.Get(ctx, all[i%len(all)]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	warm.Wait()
	if err := stalled.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = stalled.Resume()
		}
	}()
	// Readers of the live masters' keys run through the flood; each read
	// has a generous deadline: a failure is the stalled node's doing.
	stop := make(chan struct{})
	var liveReads, liveFails atomic.Int64
	var liveErr atomic.Pointer[error]
	var live sync.WaitGroup
	for i := range 4 {
		live.Add(1)
		go func() {
			defer live.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := liveKeys[(i+n)%len(liveKeys)]
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				v, err := s.Get(cctx, k)
				cancel()
				liveReads.Add(1)
				if err != nil || string(v) != "v-"+k {
					liveFails.Add(1)
					if err == nil {
						err = fmt.Errorf("read %q", v)
					}
					liveErr.Store(&err)
				}
			}
		}()
	}
	const deadline = 5 * time.Millisecond
	slowest := floodStalled(t, s, stalledKey)
	// A batch over every master: the live keys are read, the stalled
	// node's key fails alone.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	start := time.Now()
	vals, err := s.GetMany(cctx, all)
	batchTook := time.Since(start)
	cancel()
	var be *store.BatchError
	if !errors.As(err, &be) || len(be.Errors) != 1 || be.Errors[0].Key != stalledKey {
		t.Errorf("GetMany over every master = %v, want only %s failed", err, stalledKey)
	}
	for i, k := range liveKeys {
		if string(vals[i+1]) != "v-"+k {
			t.Errorf("GetMany read %s = %q while another node was stalled", k, vals[i+1])
		}
	}
	cctx, cancel = context.WithTimeout(ctx, 2*time.Second)
	if err := s.Set(cctx, liveKeys[0], []byte("v-"+liveKeys[0]), 0); err != nil {
		t.Errorf("a write to a live master failed while another was stalled: %v", err)
	}
	cancel()
	close(stop)
	live.Wait()
	t.Logf("slowest stalled read %v, batch %v; live reads %d, failed %d", slowest, batchTook, liveReads.Load(), liveFails.Load())
	if p := liveErr.Load(); p != nil {
		t.Errorf("%d of %d reads of the live masters' keys failed while one master was stalled; last: %v", liveFails.Load(), liveReads.Load(), *p)
	}
	// As for a standalone server: far above the deadlines, far below
	// rueidis's 10 s connection timeout.
	const bound = 3 * time.Second
	if slowest > bound || batchTook > bound {
		t.Errorf("against a stopped node, reads with a %v deadline took up to %v and a 2s batch took %v (bound %v)", deadline, slowest, batchTook, bound)
	}
	if err := stalled.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	servertest.Eventually(t, "the stalled node's key read again after SIGCONT", func() error {
		cctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		defer cancel()
		v, err := s.Get(cctx, stalledKey)
		if err != nil {
			return err
		}
		if string(v) != "v-"+stalledKey {
			return errors.New("read " + string(v))
		}
		return nil
	})
}

// TestStalledServerStallsAgain: a server that stalls, resumes and stalls
// again (a VM paused twice, a GC-like freeze): the stall guard trips on
// the first stall, lets go once the server answers again, and trips again
// on the second, so the calls of both stalls end at their own deadline
// and the reads between and after succeed. A guard whose count or probe
// time survived the first stall would either keep refusing a server that
// answers or hold the second stall's callers.
func TestStalledServerStallsAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	s := open(t, srv.URL(), redisstore.Options{})
	ctx := context.Background()
	if err := s.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	read := func() error {
		cctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		defer cancel()
		v, err := s.Get(cctx, "k")
		if err == nil && string(v) != "v" {
			err = errors.New("read " + string(v))
		}
		return err
	}
	resumed := true
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	for round := 1; round <= 2; round++ {
		var warm sync.WaitGroup
		for range 32 {
			warm.Add(1)
			go func() {
				defer warm.Done()
				for range 20 {
					if err := read(); err != nil {
						t.Errorf("round %d, before the stall: %v", round, err)
						return
					}
				}
			}()
		}
		warm.Wait()
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		resumed = false
		slowest := floodStalled(t, s, "k")
		const bound = 3 * time.Second
		t.Logf("round %d: slowest call against the stopped server %v", round, slowest)
		if slowest > bound {
			t.Errorf("round %d: calls with a 5ms deadline took up to %v against a stopped server (bound %v)", round, slowest, bound)
		}
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		resumed = true
		servertest.Eventually(t, fmt.Sprintf("round %d: the value read again after SIGCONT", round), read)
		// Once it answered, the guard lets every call through again.
		for i := range 50 {
			if err := read(); err != nil {
				t.Fatalf("round %d: read %d after the server answered again: %v", round, i, err)
			}
		}
	}
}

// floodStalled reads key from 64 callers, 80 times each, with a 5 ms
// deadline, against a stopped server, and returns the slowest call.
func floodStalled(t *testing.T, s *redisstore.Store, key string) time.Duration {
	t.Helper()
	var mu sync.Mutex
	var slowest time.Duration
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 80 {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
				start := time.Now()
				_, err := s.Get(cctx, key)
				took := time.Since(start)
				cancel()
				if err == nil {
					t.Error("Get answered by a stopped server")
					return
				}
				mu.Lock()
				slowest = max(slowest, took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return slowest
}

// TestSlowServerIsNotStalled: a server that answers, only more slowly
// than many of its callers' deadlines (here a link with 20 ms round
// trips and callers with a 2 ms budget), is not a stalled one. Their
// calls end by their context by the hundred, and the stall guard tripped
// on that count alone: it then refused the calls of callers whose
// deadline the server meets ("the server is stalled; the call was not
// sent"), and the guard's probe, one such short call every 100 ms, could
// not tell it otherwise, so it kept refusing while the short callers ran.
// A caller with a 5 s deadline is never refused here.
func TestSlowServerIsNotStalled(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	proxy := servertest.Proxy(t, srv.Addr, faults.ProxyOptions{})
	s := open(t, "redis://"+proxy.Addr(), redisstore.Options{})
	ctx := context.Background()
	if err := s.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	var warm sync.WaitGroup
	for range 16 {
		warm.Add(1)
		go func() {
			defer warm.Done()
			for range 20 {
				if _, err := s.Get(ctx, "k"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	warm.Wait()
	proxy.SetDelay(10 * time.Millisecond)

	var late, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cctx, cancel := context.WithTimeout(ctx, 2*time.Millisecond)
				_, err := s.Get(cctx, "k")
				cancel()
				switch {
				case errors.Is(err, context.DeadlineExceeded):
					late.Add(1)
				case err != nil:
					refused.Add(1)
				}
			}
		}()
	}
	// Past the guard's limit of abandoned calls, or (the old guard)
	// refusing the short callers already.
	servertest.Eventually(t, "the short callers' calls ran out of time hundreds of times", func() error {
		if n := late.Load(); n < 600 && refused.Load() == 0 {
			return fmt.Errorf("%d so far", n)
		}
		return nil
	})
	for i := range 30 {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := s.Get(cctx, "k")
		cancel()
		if err != nil || string(v) != "v" {
			t.Fatalf("read %d with a 5s deadline, from a server that answers in about 20ms: %q, %v (short calls: %d ran out of time, %d failed otherwise)",
				i, v, err, late.Load(), refused.Load())
		}
	}
	t.Logf("short calls: %d ran out of time, %d failed otherwise", late.Load(), refused.Load())
}
