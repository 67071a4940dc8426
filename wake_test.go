package kura_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/health"
	"github.com/kuracache/kura/store/move"
	"github.com/kuracache/kura/store/redisstore"
)

// wakeRig is two processes on one Redis (two Stores, two Caches): A holds
// a key's lease with a loader that waits for release, B waits for A's
// fill.
type wakeRig struct {
	key            string
	a, b           *kura.Cache[Profile]
	sb             *redisstore.Store
	release        chan struct{}
	aDone, bDone   chan Profile
	bErr           chan error
	aLoads, bLoads atomic.Int64
}

// startWakeRig opens the rig on url and starts A's load and B's wait; it
// returns once B waits with a watched read (the server will report the
// key's change). wrapB, when set, wraps B's store.
func startWakeRig(t *testing.T, url string, bOpts kura.Options, trackB bool, wrapB func(*redisstore.Store) store.Store) *wakeRig {
	t.Helper()
	ctx := context.Background()
	open := func(track bool) *redisstore.Store {
		s, err := redisstore.NewFromURL(ctx, url, redisstore.Options{Tracking: redisstore.Tracking{Enabled: track}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	sa, sb := open(false), open(trackB)
	r := &wakeRig{key: leaseKey("wake"), sb: sb, release: make(chan struct{}),
		aDone: make(chan Profile, 1), bDone: make(chan Profile, 1), bErr: make(chan error, 1)}
	var bs store.Store = sb
	if wrapB != nil {
		bs = wrapB(sb)
	}
	r.a = newCache(t, sa, kura.Options{LeaseWait: 30 * time.Second})
	r.b = newCache(t, bs, bOpts)
	t.Cleanup(func() { r.b.Close() })
	entered := make(chan struct{})
	go func() {
		v, err := r.a.Fetch(ctx, r.key, time.Minute, func(ctx context.Context, key string) (Profile, error) {
			r.aLoads.Add(1)
			close(entered)
			<-r.release
			return Profile{ID: 1, Name: "from A"}, nil
		})
		if err != nil {
			t.Error(err)
		}
		r.aDone <- v
	}()
	<-entered
	reads0, _, _ := sb.LeaseWakeReports()
	go func() {
		v, err := r.b.Fetch(ctx, r.key, time.Minute, func(ctx context.Context, key string) (Profile, error) {
			r.bLoads.Add(1)
			return Profile{ID: 2, Name: "from B"}, nil
		})
		r.bErr <- err
		r.bDone <- v
	}()
	// The push connection opens in the background on B's first read;
	// until then B polls.
	waitFor(t, "a watched read of B", func() bool {
		reads, _, _ := sb.LeaseWakeReports()
		return reads > reads0
	})
	return r
}

// finish releases A and checks that B got A's value without a load of its
// own and without giving up on the wait.
func (r *wakeRig) finish(t *testing.T) {
	t.Helper()
	close(r.release)
	a := <-r.aDone
	if err := <-r.bErr; err != nil {
		t.Fatalf("B: %v", err)
	}
	b := <-r.bDone
	if a.Name != "from A" || b.Name != a.Name {
		t.Fatalf("B got %+v, A %+v: B must get A's fill", b, a)
	}
	if n := r.bLoads.Load(); n != 0 || r.b.Stats().LeaseFailOpen != 0 {
		t.Fatalf("B loaded %d times (fail-open %d): it must wait for A's fill", n, r.b.Stats().LeaseFailOpen)
	}
}

// TestLeaseWaitersWokenByServer: a caller waiting for another process's
// lease is woken by Redis's report of the fill (client tracking on the
// lease path's own connection), with default options and with the L1 on
// tracking, on Redis and Redis Cluster: while it waits, its Cache reads
// the key only at the slow fallback pace, not the 1-20 ms poll; it gets
// the holder's value, and nothing of the wait outlives the stores.
func TestLeaseWaitersWokenByServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	cl := servertest.RedisCluster(t)
	for _, tc := range []struct {
		name, url string
		l1        bool
	}{
		{"redis", r.URL(), false},
		{"redis/l1", r.URL(), true},
		{"redis-cluster", cl.URL(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			t.Run("wait", func(t *testing.T) {
				o := kura.Options{LeaseWait: 30 * time.Second}
				if tc.l1 {
					o.L1 = kura.L1Options{MaxBytes: 1 << 20}
				}
				rig := startWakeRig(t, tc.url, o, tc.l1, nil)
				// Polling reads the key every 10-20 ms: 30 reads or
				// more in 600 ms. Woken by the server, B reads at the
				// fallback pace (20 ms doubling to 100 ms). A loaded
				// machine only makes timers late, never early.
				before := rig.b.Stats().Latency[kura.OpGetMany].Count
				time.Sleep(600 * time.Millisecond)
				if n := rig.b.Stats().Latency[kura.OpGetMany].Count - before; n >= 20 {
					t.Errorf("B read the key %d times in 600 ms while waiting: it polls", n)
				}
				_, reports0, _ := rig.sb.LeaseWakeReports()
				rig.finish(t)
				if _, reports, _ := rig.sb.LeaseWakeReports(); reports <= reports0 {
					t.Errorf("the server reported no change to the lease path (%d reports before the fill, %d after)", reports0, reports)
				}
			})
			// rueidis closes the connections a cluster topology refresh
			// replaced 5 s later, in a goroutine of its own.
			goleak.VerifyNone(t, ignore, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"))
		})
	}
}

// deafWaker is a store whose lease reports never arrive: the server's
// pushes are lost while the connection stays up.
type deafWaker struct{ *redisstore.Store }

func (deafWaker) WatchLeases(func([]string)) func() { return func() {} }

// TestLeaseWaitLostPush: a waiter whose report never comes still gets
// the holder's fill: when the push connection is killed mid-wait (CLIENT
// KILL: the loss is noticed, every key is read again), when reports are
// lost on a connection that stays up (the hub's fallback poll), and when
// the server is stopped (SIGSTOP) the waiter gives up at LeaseWait and
// loads for itself, within its context.
func TestLeaseWaitLostPush(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	srv := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	long := kura.Options{LeaseWait: 30 * time.Second}
	t.Run("client-kill", func(t *testing.T) {
		rig := startWakeRig(t, srv.URL(), long, false, nil)
		list, err := srv.Do(ctx, "CLIENT", "LIST")
		if err != nil {
			t.Fatal(err)
		}
		killed := 0
		for _, line := range strings.Split(list, "\n") {
			if !strings.Contains(line, "name="+redisstore.WakeClientName+" ") {
				continue
			}
			id, _, _ := strings.Cut(strings.TrimPrefix(line, "id="), " ")
			if _, err := srv.Do(ctx, "CLIENT", "KILL", "ID", id); err != nil {
				t.Fatal(err)
			}
			killed++
		}
		if killed != 1 {
			t.Fatalf("killed %d push connections, want B's one:\n%s", killed, list)
		}
		waitFor(t, "B's store to notice the lost push connection", func() bool {
			_, _, flushes := rig.sb.LeaseWakeReports()
			return flushes > 0
		})
		rig.finish(t)
	})
	t.Run("reports-lost", func(t *testing.T) {
		rig := startWakeRig(t, srv.URL(), long, false, func(s *redisstore.Store) store.Store { return deafWaker{s} })
		rig.finish(t)
	})
	t.Run("sigstop", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		t.Run("wait", func(t *testing.T) {
			rig := startWakeRig(t, srv.URL(), kura.Options{LeaseWait: 300 * time.Millisecond, StoreTimeout: 100 * time.Millisecond}, false, nil)
			if err := srv.Pause(); err != nil {
				t.Fatal(err)
			}
			// B cannot be woken nor read: it gives up at LeaseWait and
			// loads for itself, within its own context.
			err := <-rig.bErr
			b := <-rig.bDone
			if rerr := srv.Resume(); rerr != nil {
				t.Fatal(rerr)
			}
			if err != nil || b.Name != "from B" || rig.bLoads.Load() != 1 {
				t.Fatalf("B: %+v, %v, %d loads: want its own load after LeaseWait", b, err, rig.bLoads.Load())
			}
			close(rig.release)
			<-rig.aDone
			// After the server resumes, B is woken again.
			key := leaseKey("after-stop")
			if _, err := rig.b.Fetch(ctx, key, time.Minute, func(context.Context, string) (Profile, error) { return Profile{ID: 3}, nil }); err != nil {
				t.Fatal(err)
			}
		})
		goleak.VerifyNone(t, ignore)
	})
}

// TestLeaseWakeThroughWrappers: a store wrapper with leases passes the
// lease path's server reports (store.LeaseWaker) through itself: the
// Cache finds the capability on the wrapper, its waiter's reads reach the
// wrapped Redis as watched reads through the wrapper's own routing, and
// it is woken by the holder's fill. store/move hid it (its waiters polled
// every 1-20 ms): a move over Redis in any phase, and the breaker.
func TestLeaseWakeThroughWrappers(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	r := servertest.Redis(t, servers.RedisConfig{})
	other := servertest.Redis(t, servers.RedisConfig{})
	ctx := context.Background()
	openOther := func() store.Store {
		s, err := redisstore.NewFromURL(ctx, other.URL(), redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Each wrapper is B's store over B's own Store on r, where A holds the
	// lease: in PhaseDual a key that moves is leased on the old side, from
	// PhaseWarm on on the new side.
	moveOver := func(p move.Phase, onOld bool) func(*redisstore.Store) store.Store {
		return func(s *redisstore.Store) store.Store {
			o := move.Options{Old: openOther(), New: store.Store(s), Phase: p}
			if onOld {
				o.Old, o.New = o.New, o.Old
			}
			m, err := move.New(o)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	for _, tc := range []struct {
		name string
		wrap func(*redisstore.Store) store.Store
	}{
		{"health", func(s *redisstore.Store) store.Store {
			h, err := health.New(s, health.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return h
		}},
		{"move/dual", moveOver(move.PhaseDual, true)},
		{"move/warm", moveOver(move.PhaseWarm, false)},
		{"move/new", moveOver(move.PhaseNew, false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wrapped store.Store
			rig := startWakeRig(t, r.URL(), kura.Options{LeaseWait: 30 * time.Second}, false, func(s *redisstore.Store) store.Store {
				wrapped = tc.wrap(s)
				t.Cleanup(func() { _ = wrapped.Close() }) // closes the other side of a move too
				if l, ok := store.FindLeaser(wrapped); !ok || l != wrapped.(store.Leaser) {
					t.Fatalf("FindLeaser(%T) = %T, %v: want the wrapper itself", wrapped, l, ok)
				}
				if _, ok := wrapped.(store.LeaseWaker); !ok {
					t.Fatalf("%T has leases but hides the lease reports (store.LeaseWaker)", wrapped)
				}
				return wrapped
			})
			// startWakeRig returned once B's reads reached r watched,
			// through the wrapper: B is woken, not polling.
			before := rig.b.Stats().Latency[kura.OpGetMany].Count
			time.Sleep(400 * time.Millisecond)
			if n := rig.b.Stats().Latency[kura.OpGetMany].Count - before; n >= 15 {
				t.Errorf("B read the key %d times in 400 ms through %s while waiting: it polls", n, tc.name)
			}
			rig.finish(t)
		})
	}
}
