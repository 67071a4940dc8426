package move_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/memcache"
	"github.com/kuracache/kura/store/move"
	"github.com/kuracache/kura/store/redisring"
	"github.com/kuracache/kura/store/storetest"
)

// fleet is a move's two rings on real servers.
type fleet struct {
	name     string
	open     func(t testing.TB, side string) store.Store // side: "old" or "new"
	oldAddrs []string
}

// openStore opens a redisring ("redis") or memcached pool over addrs.
func openStore(t testing.TB, kind string, addrs []string) store.Store {
	t.Helper()
	var s store.Store
	var err error
	if kind == "redis" {
		s, err = redisring.New(context.Background(), redisring.Options{Servers: addrs})
	} else {
		s, err = memcache.New(context.Background(), memcache.Options{Servers: addrs, MaxIdleConns: 64})
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newFleet is the move of kind's servers from old to new.
func newFleet(name, kind string, old, new []string) fleet {
	return fleet{name: name, oldAddrs: old, open: func(t testing.TB, side string) store.Store {
		if side == "new" {
			return openStore(t, kind, new)
		}
		return openStore(t, kind, old)
	}}
}

// fleets starts 3 redis-servers that move to 2 (one of them new, one
// kept: some keys stay) and 3 memcached servers that move to 4 (one
// added: about a quarter of the keys move).
func fleets(t *testing.T) []fleet {
	t.Helper()
	_, rs := servertest.RedisShards(t, 4, servers.RedisConfig{})
	ms := servertest.Addrs(servertest.MemcachedPool(t, 4, servers.MemcachedConfig{MaxItemSize: 2 << 20}))
	return []fleet{newFleet("redisring-3-to-2", "redis", rs[:3], []string{rs[0], rs[3]}), newFleet("memcached-3-to-4", "memcached", ms[:3], ms)}
}

func (f fleet) move(t testing.TB, opts move.Options) *move.Store {
	t.Helper()
	opts.Old, opts.New = f.open(t, "old"), f.open(t, "new")
	s, err := move.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs the store suite on a move in each phase: whatever
// the phase, the Store keeps the store contract, leases included.
func TestConformance(t *testing.T) {
	for fi, f := range fleets(t) {
		for _, p := range []move.Phase{move.PhaseDual, move.PhaseWarm, move.PhaseNew} {
			// make test runs the warm-up phase on Redis (guards that
			// are values there) and phase 1 on memcached (leases on
			// the old side); make soak runs all six.
			if os.Getenv("KURA_SOAK") != "1" && !(fi == 0 && p == move.PhaseWarm || fi == 1 && p == move.PhaseDual) {
				continue
			}
			t.Run(f.name+"/"+p.String(), func(t *testing.T) {
				storetest.RunWithOptions(t, func(t *testing.T) store.Store {
					return f.move(t, move.Options{Phase: p})
				}, storetest.Options{LargeValue: 1 << 20})
			})
		}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// movedKeys returns n keys (with prefix) whose owner changes in s, and
// one that stays when the rings share a server.
func movedKeys(t *testing.T, f fleet, prefix string, n int) (moved []string, stay string) {
	t.Helper()
	o, nw := f.open(t, "old"), f.open(t, "new")
	defer o.Close()
	defer nw.Close()
	ol, _ := store.Find[store.NodeLocator](o)
	nl, _ := store.Find[store.NodeLocator](nw)
	for i := 0; len(moved) < n || stay == ""; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if ol.NodeOf(k) != nl.NodeOf(k) {
			if len(moved) < n {
				moved = append(moved, k)
			}
		} else if stay == "" {
			stay = k
		}
	}
	return moved, stay
}

// value is a kura envelope entry, as a Cache writes it (a negative entry
// is the smallest one there is).
var value = codec.AppendEntry(nil, codec.KindNegative, codec.Fields{Written: time.Now(), TTL: time.Hour})

// TestWarmUp fills the old ring, then walks a move through its phases:
// phase 1 reads the old ring and writes both, phase 2 serves the moved
// keys from the old owners and copies them, once, phase 3 reads the new
// ring only.
func TestWarmUp(t *testing.T) {
	for _, f := range fleets(t) {
		t.Run(f.name, func(t *testing.T) {
			ctx := ctxT(t)
			keys, stay := movedKeys(t, f, "warm:"+t.Name()+":", 20)
			old := f.open(t, "old")
			defer old.Close()
			for _, k := range append(keys, stay) {
				if err := old.Set(ctx, k, value, time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			var clock time.Time
			now := func() time.Time { return clock }
			start := time.Now()
			clock = start
			s := f.move(t, move.Options{WarmAt: start.Add(time.Minute), NewAt: start.Add(2 * time.Minute), Now: now})
			if s.Phase() != move.PhaseDual {
				t.Fatalf("phase %v before WarmAt", s.Phase())
			}
			if v, err := s.Get(ctx, keys[0]); err != nil || !bytes.Equal(v, value) {
				t.Fatalf("phase dual: Get = %q, %v; want the old ring's value", v, err)
			}
			// A write in phase 1 reaches both owners.
			if err := s.Set(ctx, keys[1], []byte("v1"), time.Hour); err != nil {
				t.Fatal(err)
			}
			if v, err := s.New().Get(ctx, keys[1]); err != nil || string(v) != "v1" {
				t.Fatalf("phase dual: Set did not reach the new owner: %q, %v", v, err)
			}
			clock = start.Add(time.Minute)
			if s.Phase() != move.PhaseWarm {
				t.Fatalf("phase %v at WarmAt", s.Phase())
			}
			// Get of a moved key: served from the old owner, copied.
			if v, err := s.Get(ctx, keys[2]); err != nil || !bytes.Equal(v, value) {
				t.Fatalf("phase warm: Get = %q, %v", v, err)
			}
			if v, err := s.New().Get(ctx, keys[2]); err != nil || !bytes.Equal(v, value) {
				t.Fatalf("phase warm: the copy is not on the new owner: %q, %v", v, err)
			}
			// GetMany of many moved keys: one batch, each copied.
			vals, err := s.GetMany(ctx, keys[3:10])
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				if !bytes.Equal(v, value) {
					t.Errorf("phase warm: GetMany[%d] = %q", i, v)
				}
			}
			// The lease read: a copy under the caller's lease on the new
			// owner, returned as a hit.
			res, err := s.LeaseGet(ctx, keys[10:12], store.LeaseOptions{TTL: 5 * time.Second, Placeholder: []byte("ph-" + t.Name())})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Won || !bytes.Equal(r.Value, value) {
					t.Errorf("phase warm: LeaseGet[%d] = %+v, want the old owner's value", i, r)
				}
			}
			st := s.Stats()
			if st.Copies != 10 || st.WarmHits != 10 || st.Phase != move.PhaseWarm {
				t.Errorf("stats %+v, want 10 warm hits and copies", st)
			}
			// A second read finds the copy on the new owner.
			if _, err := s.GetMany(ctx, keys[3:10]); err != nil {
				t.Fatal(err)
			}
			if got := s.Stats().Copies; got != 10 {
				t.Errorf("copies %d after reading copied keys again, want 10", got)
			}
			// A key whose owner does not change is not written twice.
			dual := s.Stats().DualWrites
			if err := s.Set(ctx, stay, value, time.Hour); err != nil {
				t.Fatal(err)
			}
			if got := s.Stats().DualWrites; got != dual {
				t.Errorf("a key that stays on its server was written to both sides (%d -> %d)", dual, got)
			}
			clock = start.Add(2 * time.Minute)
			if _, err := s.Get(ctx, keys[12]); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("phase new: Get of a key only the old ring holds = %v, want a miss", err)
			}
			if err := s.SetPhase(move.PhaseWarm); !errors.Is(err, move.ErrPhase) {
				t.Errorf("SetPhase back to warm = %v, want ErrPhase", err)
			}
		})
	}
}

// hookStore runs before on every GetMany of the old owner, after the
// Store took its lease or guard on the new one: the place where an
// Invalidate overtakes a copy.
type hookStore struct {
	store.Store
	store.Leaser
	before func()
}

func (h *hookStore) GetMany(ctx context.Context, keys []string) ([][]byte, error) {
	vals, err := store.GetMany(ctx, h.Store, keys)
	if h.before != nil {
		h.before()
	}
	return vals, err
}

// TestNoResurrection invalidates a key between the warm-up's read of the
// old owner and its copy (through another process's view of the move, in
// phase 1): the copy must be refused, and nobody may read the old value
// afterwards, on either path (lease read and plain read).
func TestNoResurrection(t *testing.T) {
	for _, f := range fleets(t) {
		for _, path := range []string{"lease", "plain"} {
			t.Run(f.name+"/"+path, func(t *testing.T) {
				ctx := ctxT(t)
				keys, _ := movedKeys(t, f, "res:"+t.Name()+":", 1)
				key := keys[0]
				other := f.move(t, move.Options{Phase: move.PhaseDual})             // a process not yet switched
				if err := other.Old().Set(ctx, key, value, time.Hour); err != nil { // cached before the move
					t.Fatal(err)
				}
				var once sync.Once
				invalidated := make(chan error, 1)
				o := f.open(t, "old")
				l, _ := store.FindLeaser(o)
				oldSide := &hookStore{Store: o, Leaser: l}
				oldSide.before = func() {
					once.Do(func() {
						_, lease := store.FindLeaser(other)
						if !lease {
							invalidated <- errors.New("no leases")
							return
						}
						invalidated <- other.Invalidate(ctx, []string{key}, 0)
					})
				}
				s, err := move.New(move.Options{Old: oldSide, New: f.open(t, "new"), Phase: move.PhaseWarm})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				switch path {
				case "lease":
					res, err := s.LeaseGet(ctx, []string{key}, store.LeaseOptions{TTL: 5 * time.Second, Placeholder: []byte("ph-" + t.Name())})
					if err != nil {
						t.Fatal(err)
					}
					if res[0].Value != nil || !res[0].Won {
						t.Errorf("LeaseGet across an Invalidate = %+v, want the caller's lease and no value", res[0])
					}
					if err := s.Fill(ctx, []store.Fill{{Lease: res[0].Lease, Value: []byte("loaded-before"), TTL: time.Hour}}); !errors.Is(err, store.ErrNotStored) {
						t.Errorf("Fill under the voided lease = %v, want ErrNotStored", err)
					}
				case "plain":
					if v, err := s.Get(ctx, key); err == nil {
						t.Logf("the read overlapping the Invalidate got %q", v)
					}
				}
				select {
				case err := <-invalidated:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the warm-up never read the old owner")
				}
				if got := s.Stats().CopiesRefused; got != 1 {
					t.Errorf("CopiesRefused = %d, want 1", got)
				}
				for _, st := range []store.Store{s, s.New(), other} {
					if v, err := st.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
						t.Errorf("%T: after the Invalidate returned, Get = %q, %v; want a miss", st, v, err)
					}
				}
			})
		}
	}
}

// TestLeaseAcrossSwitch takes a lease in phase 1 (on the old owner) and
// fills it after the process switched to phase 2: the fill goes back to
// the old owner, where the lease is.
func TestLeaseAcrossSwitch(t *testing.T) {
	for _, f := range fleets(t) {
		t.Run(f.name, func(t *testing.T) {
			ctx := ctxT(t)
			keys, _ := movedKeys(t, f, "switch:"+t.Name()+":", 1)
			s := f.move(t, move.Options{})
			res, err := s.LeaseGet(ctx, keys, store.LeaseOptions{TTL: 5 * time.Second, Placeholder: []byte("ph-" + t.Name())})
			if err != nil || !res[0].Won {
				t.Fatalf("LeaseGet = %+v, %v", res, err)
			}
			if err := s.SetPhase(move.PhaseWarm); err != nil {
				t.Fatal(err)
			}
			if err := s.Fill(ctx, []store.Fill{{Lease: res[0].Lease, Value: value, TTL: time.Hour}}); err != nil {
				t.Fatalf("Fill of a phase-1 lease in phase 2 = %v", err)
			}
			if v, err := s.Old().Get(ctx, keys[0]); err != nil || !bytes.Equal(v, value) {
				t.Errorf("the fill is not on the old owner: %q, %v", v, err)
			}
			// and phase 2 reads it through a copy
			if v, err := s.Get(ctx, keys[0]); err != nil || !bytes.Equal(v, value) {
				t.Errorf("phase 2 Get = %q, %v", v, err)
			}
		})
	}
}

// TestPlaceholderNotCopied: a lease placeholder on the old owner (a
// phase-1 process loading the key) is a miss for the warm-up, never a
// value to copy.
func TestPlaceholderNotCopied(t *testing.T) {
	f := fleets(t)[0] // Redis keeps placeholders as values
	ctx := ctxT(t)
	keys, _ := movedKeys(t, f, "ph:", 1)
	ph := codec.AppendEntry(nil, codec.KindLease, codec.Fields{Token: "someone"})
	dual := f.move(t, move.Options{})
	res, err := dual.LeaseGet(ctx, keys, store.LeaseOptions{TTL: 5 * time.Second, Placeholder: ph})
	if err != nil || !res[0].Won {
		t.Fatalf("LeaseGet = %+v, %v", res, err)
	}
	s := f.move(t, move.Options{Phase: move.PhaseWarm})
	if v, err := s.Get(ctx, keys[0]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get = %q, %v; want a miss", v, err)
	}
	res, err = s.LeaseGet(ctx, keys, store.LeaseOptions{TTL: 5 * time.Second, Placeholder: []byte("mine")})
	if err != nil || !res[0].Won || res[0].Value != nil {
		t.Errorf("LeaseGet = %+v, %v; want a lease on the new owner", res, err)
	}
	if st := s.Stats(); st.Copies != 0 || st.Fallbacks != 2 {
		t.Errorf("stats %+v: want no copy, 2 fallbacks", st)
	}
}

func TestOptions(t *testing.T) {
	f := fleets(t)[1]
	a, b := f.open(t, "old"), f.open(t, "new")
	defer a.Close()
	defer b.Close()
	now := time.Now()
	for _, tc := range []struct {
		o    move.Options
		want string
	}{
		{move.Options{New: b}, "Old is nil"},
		{move.Options{Old: a}, "New is nil"},
		{move.Options{Old: a, New: a}, "same store"},
		{move.Options{Old: a, New: b, Phase: 9}, "Phase 9"},
		{move.Options{Old: a, New: b, WarmAt: now, NewAt: now.Add(-time.Second)}, "before WarmAt"},
		{move.Options{Old: a, New: b, CopyTTL: -1}, "CopyTTL"},
		{move.Options{Old: a, New: b, GuardTTL: -1}, "GuardTTL"},
	} {
		if _, err := move.New(tc.o); !errors.Is(err, move.ErrOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want ErrOptions naming %q", tc.o, err, tc.want)
		}
	}
	s, err := move.New(move.Options{Old: a, New: b})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPhase(0); !errors.Is(err, move.ErrPhase) {
		t.Errorf("SetPhase(0) = %v", err)
	}
	s.End()
	if s.Phase() != move.PhaseNew {
		t.Errorf("phase %v after End", s.Phase())
	}
	if _, ok := store.Find[store.Tracker](s); ok {
		t.Error("a move lets a Tracker through: its reports would cover one side only")
	}
	if _, ok := store.FindLeaser(s); !ok {
		t.Error("no leases through a move of two memcached pools")
	}
}

// TestOldOwnerDown stops the old ring's servers in the middle of the
// warm-up: reads fall back to a miss (the Cache loads), never an error,
// and count the failure; an Invalidate that cannot reach the old owner
// reports it, since a copy could bring back what the old owner still
// holds.
func TestOldOwnerDown(t *testing.T) {
	ctx := ctxT(t)
	rs, addrs := servertest.RedisShards(t, 3, servers.RedisConfig{})
	f := newFleet("redis-2-to-1", "redis", addrs[:2], addrs[2:])
	keys := []string{"down:0", "down:1", "down:2", "down:3"} // no server on both rings: every key moves
	s := f.move(t, move.Options{Phase: move.PhaseWarm, GuardTTL: time.Second})
	for _, r := range rs[:2] {
		r.Stop()
	}
	if v, err := s.Get(ctx, keys[0]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get with the old owner down = %q, %v; want a miss", v, err)
	}
	vals, err := s.GetMany(ctx, keys[1:3])
	if err != nil || vals[0] != nil || vals[1] != nil {
		t.Errorf("GetMany with the old owner down = %q, %v; want misses", vals, err)
	}
	res, err := s.LeaseGet(ctx, keys[3:], store.LeaseOptions{TTL: time.Second, Placeholder: []byte("ph-down")})
	if err != nil || !res[0].Won {
		t.Errorf("LeaseGet with the old owner down = %+v, %v; want the lease on the new owner", res, err)
	}
	if st := s.Stats(); st.OldErrors == 0 || st.Copies != 0 {
		t.Errorf("stats %+v: want old-owner errors counted, no copies", st)
	}
	if err := s.Invalidate(ctx, keys[:1], 0); err == nil {
		t.Error("Invalidate with the old owner down reported success")
	}
}

// TestCacheOverMove: a kura Cache over a move takes its leases, and an
// L1 only when bounded by MaxStaleness (tracking reports do not pass a
// move: they would cover one ring).
func TestCacheOverMove(t *testing.T) {
	f := fleets(t)[1]
	s := f.move(t, move.Options{Phase: move.PhaseWarm})
	c, err := kura.New[string](s, kura.Options{L1: kura.L1Options{MaxBytes: 1 << 20, MaxStaleness: 10 * time.Millisecond}})
	if err != nil {
		t.Fatalf("a Cache with a MaxStaleness L1 over a move: %v", err)
	}
	defer c.Close()
	if got := c.Stats().Coordination; got != "leases" {
		t.Errorf("coordination %q over a move of two memcached pools, want leases", got)
	}
	ctx := ctxT(t)
	v, err := c.Fetch(ctx, "cache-over-move", time.Minute, func(context.Context, string) (string, error) { return "loaded", nil })
	if err != nil || v != "loaded" {
		t.Errorf("Fetch = %q, %v", v, err)
	}
	if _, err := kura.New[string](s, kura.Options{L1: kura.L1Options{MaxBytes: 1 << 20}}); err == nil {
		t.Error("an L1 without MaxStaleness was accepted over a move, where no change reports pass")
	}
}
