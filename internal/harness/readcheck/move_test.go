package readcheck_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/move"
	"github.com/kuracache/kura/store/redisring"
)

// moveSchedule is when the processes of a move run switch phase: process
// i enters PhaseWarm at Start+Warm+i*Skew and PhaseNew New later, so two
// processes are in different phases for Skew at each switch.
type moveSchedule struct {
	Start           time.Time
	Warm, New, Skew time.Duration
}

// moveSizes are the move run's sizes: the two processes that
// switch 5 s apart, each phase long enough for thousands of reads.
func moveSizes() (keys, readers int, sched moveSchedule, dur time.Duration) {
	sched = moveSchedule{Warm: time.Second, New: 6 * time.Second, Skew: 5 * time.Second}
	if soak() {
		sched.Warm, sched.New = 10*time.Second, 20*time.Second
		return 16, 6, sched, sched.Warm + sched.New + sched.Skew + 5*time.Second
	}
	return 24, 1, sched, sched.Warm + sched.New + sched.Skew + time.Second
}

// moveCombos: the move of 3 Redis shards to 2 (one kept, one new) and of
// 3 memcached servers to 4 (one added), with leases (and without, under
// make soak: that guarantee is weaker), and a fault: a move whose invalidations miss the old owner, which a warm-up
// copy then brings back.
func moveCombos() []combo {
	var out []combo
	for _, b := range []string{"move-ring", "move-memcached"} {
		out = append(out, combo{Backend: b, Leases: true})
		if soak() || b == "move-ring" { // one fault shows the checker sees it
			out = append(out, combo{Backend: b, Leases: true, Fault: "old-not-invalidated"})
		}
		if soak() {
			out = append(out, combo{Backend: b, Leases: false})
		}
	}
	return out
}

// openMove opens the move of c's backend for process proc, on its
// schedule.
func openMove(ctx context.Context, a args, c combo, proc int) (store.Store, error) {
	oldA, newA := a.Addrs[c.Backend+"-old"], a.Addrs[c.Backend+"-new"]
	open := func(addrs []string) (store.Store, error) {
		if c.Backend == "move-ring" {
			return redisring.New(ctx, redisring.Options{Servers: addrs})
		}
		return memcache.New(ctx, memcache.Options{Servers: addrs, MaxIdleConns: 64})
	}
	o, err := open(oldA)
	if err != nil {
		return nil, err
	}
	n, err := open(newA)
	if err != nil {
		_ = o.Close()
		return nil, err
	}
	if c.Fault == "old-not-invalidated" {
		o = noInvalidate{o}
	}
	warm := a.Move.Start.Add(a.Move.Warm + time.Duration(proc)*a.Move.Skew)
	return move.New(move.Options{Old: o, New: n, WarmAt: warm, NewAt: warm.Add(a.Move.New)})
}

// noInvalidate drops invalidations and deletes (the fault).
type noInvalidate struct{ store.Store }

func (s noInvalidate) leaser() store.Leaser { l, _ := store.FindLeaser(s.Store); return l }

func (s noInvalidate) Delete(context.Context, string) error { return nil }
func (s noInvalidate) LeaseGet(ctx context.Context, keys []string, o store.LeaseOptions) ([]store.LeaseResult, error) {
	return s.leaser().LeaseGet(ctx, keys, o)
}
func (s noInvalidate) Fill(ctx context.Context, fills []store.Fill) error {
	return s.leaser().Fill(ctx, fills)
}
func (s noInvalidate) Release(ctx context.Context, leases []store.Lease) error {
	return s.leaser().Release(ctx, leases)
}
func (s noInvalidate) Invalidate(context.Context, []string, time.Duration) error { return nil }

// TestMoveHistories records histories of two processes reading through a
// move while child 0 writes and invalidates: both start in PhaseDual,
// switch to PhaseWarm 5 s apart and to PhaseNew 5 s apart. No read may
// return a value loaded before an Invalidate that ended before it began
// (with leases); the fault must be caught.
func TestMoveHistories(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test on real servers")
	}
	db := servertest.Redis(t, servers.RedisConfig{})
	_, rs := servertest.RedisShards(t, 4, servers.RedisConfig{})
	mc := servertest.Addrs(servertest.MemcachedPool(t, 4, servers.MemcachedConfig{}))
	addrs := map[string][]string{
		"move-ring-old": rs[:3], "move-ring-new": {rs[0], rs[3]},
		"move-memcached-old": mc[:3], "move-memcached-new": mc,
	}
	keys, readers, sched, dur := moveSizes()
	// The children take a while to start on a loaded machine; the
	// schedule counts from when they are all ready (run sets it).
	runMove(t, addrs, db.Addr, moveCombos(), keys, readers, sched, dur)
	printSummary(t)
	summaryMu.Lock()
	defer summaryMu.Unlock()
	for _, o := range summary {
		m := o.move
		t.Logf("%s: phase %v at the end; %d warm-up hits, %d copies, %d copies refused, %d fallbacks",
			o.combo.Name(), m.Phase, m.WarmHits, m.Copies, m.CopiesRefused, m.Fallbacks)
		// The run must have moved something: reads in phase 2 served
		// from the old owners, and processes that reached phase 3.
		if o.combo.Fault == "" && (m.Copies == 0 || m.Phase != move.PhaseNew) {
			t.Errorf("%s: the move did not run its course (%+v)", o.combo.Name(), m)
		}
	}
}

// runMove is run with the move's keys and schedule: the schedule starts
// a few seconds after the children are launched, when they are ready.
func runMove(t *testing.T, addrs map[string][]string, db string, cs []combo, keys, readers int, sched moveSchedule, dur time.Duration) {
	t.Helper()
	sched.Start = time.Now().Add(moveStartup)
	run2(t, addrs, db, cs, "", func(a *args) {
		a.Keys, a.Move, a.Duration = keys, sched, dur+moveStartup
		a.Readers = readers
	}, 2)
}

// moveStartup is how long the children have to start before the
// schedule's clock starts.
const moveStartup = 4 * time.Second

func (s moveSchedule) String() string {
	return fmt.Sprintf("warm at +%v, new at +%v, processes %v apart", s.Warm, s.Warm+s.New, s.Skew)
}
