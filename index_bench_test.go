package kura_test

import (
	"context"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/internal/harness/faults"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/memcache"
)

// BenchmarkLogin is a game's login: read all 2,000 items (~300 B each) of
// one user from PostgreSQL through three memcached servers that sit behind
// an emulated 0.5 ms round trip.
//
//   - per-key-writeback: the id list, one multi-get of the records, one
//     query for the misses, then each missed record written back with its
//     own Set (the pattern that made logins slow).
//   - index: kura's Index: the same reads, and one batched write-back per
//     server (quiet meta commands).
//
// cold = nothing cached; warm = everything cached.
//
//	go test -run '^$' -bench Login -benchtime 5x .
func BenchmarkLogin(b *testing.B) {
	inv, st, recs, idx := inventoryBench(b, "user_item:", "user_items:by_user:")
	ctx := context.Background()
	ids, _ := inv.loadIDs(ctx, 1)
	flush := func() {
		keys := []string{idx.Lists().Key(1)}
		for _, id := range ids {
			keys = append(keys, recs.Key(id))
		}
		if err := st.DeleteMany(ctx, keys); err != nil {
			b.Fatal(err)
		}
	}
	perKey := func() {
		perKeyWriteBack(b, inv, recs, idx)
	}
	viaIndex := func() {
		got, err := idx.Fetch(ctx, 1)
		if err != nil || len(got) != len(ids) {
			b.Fatalf("%d items, %v", len(got), err)
		}
	}
	for _, bc := range []struct {
		name string
		cold bool
		run  func()
	}{
		{"cold/per-key-writeback", true, perKey},
		{"cold/index", true, viaIndex},
		{"warm/per-key-writeback", false, perKey},
		{"warm/index", false, viaIndex},
	} {
		b.Run(bc.name, func(b *testing.B) {
			flush()
			bc.run() // warm-up (and fill, for the warm cases)
			for b.Loop() {
				if bc.cold {
					b.StopTimer()
					flush()
					b.StartTimer()
				}
				bc.run()
			}
		})
	}
}

// BenchmarkIndexAfterChange is the read that follows one changed item, for
// a user with 2,000 items on three memcached servers behind an emulated
// 0.5 ms round trip, in the three designs a team chooses between:
//
//   - index: kura's Index; Changed drops the one record, the read reloads
//     one row and writes it back in one batch.
//   - per-key-writeback: the same reads, each missed record written back
//     with its own Set (identity_cache's way).
//   - whole-select: the whole SELECT result cached under one key (the
//     alternative the production report rejected); a change drops it, so
//     the read reloads every row and writes them all back as one value.
//
// rows/op is the rows the database returned per read.
//
//	go test -run '^$' -bench IndexAfterChange -benchtime 20x .
func BenchmarkIndexAfterChange(b *testing.B) {
	inv, st, recs, idx := inventoryBench(b, "chg_item:", "chg_items:by_user:")
	ctx := context.Background()
	whole, _ := kura.New[[]UserItem](st, kura.Options{TTL: time.Hour})
	loadWhole := func(ctx context.Context, _ string) ([]UserItem, error) {
		rows, err := inv.db.Query(ctx, `SELECT id, user_id, item_id, count FROM user_items WHERE user_id = 1 ORDER BY id`)
		if err != nil {
			return nil, err
		}
		var out []UserItem
		for rows.Next() {
			var r UserItem
			if err := rows.Scan(&r.ID, &r.UserID, &r.ItemID, &r.Count); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		inv.mu.Lock()
		inv.rowsRead += len(out)
		inv.mu.Unlock()
		return out, rows.Err()
	}
	ids, _ := inv.loadIDs(ctx, 1)
	perKey := func() {
		perKeyWriteBack(b, inv, recs, idx)
	}
	viaIndex := func() {
		if got, err := idx.Fetch(ctx, 1); err != nil || len(got) != len(ids) {
			b.Fatalf("%d items, %v", len(got), err)
		}
	}
	viaWhole := func() {
		if got, err := whole.Fetch(ctx, "chg_whole:1", 0, loadWhole); err != nil || len(got) != len(ids) {
			b.Fatalf("%d items, %v", len(got), err)
		}
	}
	n := 0
	change := func() int64 {
		n++
		id := ids[(n*7919)%len(ids)]
		if _, err := inv.db.Exec(ctx, `UPDATE user_items SET count = count + 1 WHERE id = $1`, id); err != nil {
			b.Fatal(err)
		}
		return id
	}
	for _, bc := range []struct {
		name       string
		run        func()
		invalidate func(id int64)
	}{
		{"index", viaIndex, func(id int64) {
			if err := idx.Changed(ctx, id); err != nil {
				b.Fatal(err)
			}
		}},
		{"per-key-writeback", perKey, func(id int64) {
			if err := recs.Delete(ctx, id); err != nil {
				b.Fatal(err)
			}
		}},
		{"whole-select", viaWhole, func(int64) {
			if err := whole.Delete(ctx, "chg_whole:1"); err != nil {
				b.Fatal(err)
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bc.run() // fill
			inv.mu.Lock()
			inv.rowsRead = 0
			inv.mu.Unlock()
			for b.Loop() {
				b.StopTimer()
				bc.invalidate(change())
				b.StartTimer()
				bc.run()
			}
			inv.mu.Lock()
			b.ReportMetric(float64(inv.rowsRead)/float64(b.N), "rows/op")
			inv.mu.Unlock()
		})
	}
}

// inventoryBench is one user with 2,000 items in PostgreSQL and an Index
// over three memcached servers, each behind a proxy adding 0.25 ms per
// direction (a 0.5 ms round trip).
func inventoryBench(b *testing.B, recPrefix, listPrefix string) (*inventory, *memcache.Store, *kura.Keyed[int64, UserItem], *kura.Index[int64, int64, UserItem]) {
	b.Helper()
	inv := newInventoryTB(b, 1, 2000)
	pool := servertest.MemcachedPool(b, 3, servers.MemcachedConfig{})
	addrs := make([]string, len(pool))
	for i, m := range pool {
		addrs[i] = servertest.Proxy(b, m.Addr, faults.ProxyOptions{Delay: 250 * time.Microsecond}).Addr()
	}
	st, err := memcache.New(context.Background(), memcache.Options{Servers: addrs})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	c, _ := kura.New[UserItem](st, kura.Options{TTL: time.Hour})
	recs, _ := kura.NewKeyed[int64, UserItem](c, kura.KeyedOptions[int64]{Prefix: recPrefix})
	idx, err := kura.NewIndex(recs, kura.IndexOptions[int64, int64, UserItem]{
		Prefix: listPrefix, LoadIDs: inv.loadIDs, LoadRecords: inv.loadRecords,
	})
	if err != nil {
		b.Fatal(err)
	}
	return inv, st, recs, idx
}

// perKeyWriteBack is user 1's login the way that made logins slow: the id
// list, one multi-get of the records, one query for the misses, then each
// missed record written back with its own Set.
func perKeyWriteBack(b *testing.B, inv *inventory, recs *kura.Keyed[int64, UserItem], idx *kura.Index[int64, int64, UserItem]) {
	ctx := context.Background()
	list, err := idx.IDs(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	got, err := recs.GetMany(ctx, list)
	if err != nil {
		b.Fatal(err)
	}
	var missing []int64
	for _, id := range list {
		if _, ok := got[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return
	}
	loaded, err := inv.loadRecords(ctx, missing)
	if err != nil {
		b.Fatal(err)
	}
	for id, r := range loaded {
		if err := recs.Set(ctx, id, r); err != nil {
			b.Fatal(err)
		}
	}
}
