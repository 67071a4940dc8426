package kura_test

import (
	"context"
	"math/rand/v2"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store"
)

// raceCacheOptions are the Cache options of the index race test's
// treatment run: the read-through settings a user would pick to keep an
// index consistent under concurrent writes.
var raceCacheOptions = kura.Options{}

// TestIndexRace runs writers that change rows in PostgreSQL against readers
// that use the index at the same time, then (after every writer and reader
// has stopped) compares every cached id list and record with the database.
// With the invalidation helpers (Index.Changed) nothing cached may differ;
// the control run, the same load without them, must show stale entries, or
// the test would prove nothing.
func TestIndexRace(t *testing.T) {
	backends := indexBackends(t)
	rounds := 150
	if os.Getenv("KURA_SOAK") != "" {
		rounds = 3000
	}
	for _, name := range []string{"redis", "memcached"} {
		t.Run(name, func(t *testing.T) {
			control := runIndexRace(t, backends[name](t), rounds, false)
			treated := runIndexRace(t, backends[name](t), rounds, true)
			t.Logf("%s: %d writes; stale cached entries after quiesce: %d without invalidation (control), %d with Index.Changed",
				name, rounds, control, treated)
			if control == 0 {
				t.Fatal("the control run left nothing stale: the test cannot tell a race from no race")
			}
			if treated != 0 {
				t.Fatalf("%d stale cached entries after quiesce with Index.Changed", treated)
			}
		})
	}
}

// runIndexRace returns how many cached lists and records differ from the
// database once the writers and readers have stopped.
func runIndexRace(t *testing.T, s store.Store, rounds int, invalidate bool) int {
	t.Helper()
	const users, items = 6, 20
	ctx := context.Background()
	inv := newInventory(t, users, items)
	c, err := kura.New[UserItem](s, raceCacheOptions)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := kura.NewKeyed[int64, UserItem](c, kura.KeyedOptions[int64]{Prefix: "race_item:"})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := kura.NewIndex(recs, kura.IndexOptions[int64, int64, UserItem]{
		Prefix: "race_items:by_user:", LoadIDs: inv.loadIDs, LoadRecords: inv.loadRecords,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each run has its own database and drops the keys it will use
	// first, so the control leaves nothing for the treatment to read.
	var allIDs []int64
	for u := int64(1); u <= users; u++ {
		ids, err := inv.loadIDs(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		allIDs = append(allIDs, ids...)
		if err := idx.Invalidate(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := recs.Delete(ctx, allIDs...); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var readers sync.WaitGroup
	for r := 0; r < 8; r++ {
		readers.Add(1)
		go func(seed uint64) {
			defer readers.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				u := int64(rng.IntN(users)) + 1
				if rng.IntN(4) == 0 {
					id := allIDs[rng.IntN(len(allIDs))]
					_, _ = recs.Fetch(ctx, id, func(ctx context.Context, id int64) (UserItem, error) {
						m, err := inv.loadRecords(ctx, []int64{id})
						if err != nil {
							return UserItem{}, err
						}
						r, ok := m[id]
						if !ok {
							return r, kura.ErrNotFound
						}
						return r, nil
					})
					continue
				}
				if _, err := idx.Fetch(ctx, u); err != nil {
					t.Errorf("reader: %v", err)
					return
				}
			}
		}(uint64(r))
	}
	var writers sync.WaitGroup
	for w := 0; w < 2; w++ {
		writers.Add(1)
		go func(seed uint64) {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(seed, 2))
			for i := 0; i < rounds/2; i++ {
				id := allIDs[rng.IntN(len(allIDs))]
				var from, to int64
				if rng.IntN(2) == 0 {
					// Move the row to another user: both lists change.
					to = int64(rng.IntN(users)) + 1
					if err := inv.db.QueryRow(ctx, `UPDATE user_items u SET user_id = $2 FROM user_items o
						WHERE u.id = o.id AND u.id = $1 RETURNING o.user_id`, id, to).Scan(&from); err != nil {
						t.Errorf("writer: %v", err)
						return
					}
				} else if _, err := inv.db.Exec(ctx, `UPDATE user_items SET count = count + 1 WHERE id = $1`, id); err != nil {
					t.Errorf("writer: %v", err)
					return
				}
				if !invalidate {
					continue
				}
				var err error
				if to != 0 {
					err = idx.Changed(ctx, id, from, to)
				} else {
					err = idx.Changed(ctx, id)
				}
				if err != nil {
					t.Errorf("invalidate: %v", err)
					return
				}
			}
		}(uint64(w) + 10)
	}
	writers.Wait()
	// Let readers go on a little after the last write, so fills that
	// raced the last invalidations land, then quiesce.
	time.Sleep(50 * time.Millisecond)
	close(stop)
	readers.Wait()

	stale := 0
	for u := int64(1); u <= users; u++ {
		want, err := inv.loadIDs(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := idx.Lists().Get(ctx, u); err == nil && !reflect.DeepEqual(got, want) {
			stale++
		}
	}
	truth, err := inv.loadRecords(ctx, allIDs)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range allIDs {
		if got, err := recs.Get(ctx, id); err == nil && got != truth[id] {
			stale++
		}
	}
	return stale
}
