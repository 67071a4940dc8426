// Command inventory shows an index cache in front of PostgreSQL: a game
// keeps, per user, the list of the user's item rows (the secondary index
// user_items.user_id), caches that id list and every row by id in a pool
// of three memcached servers, and on a login reads all of a user's items
// with one id-list read, one batched read of the rows, and (cold) one
// query for the missing rows and one batched write-back.
//
// It takes the servers as flags: a PostgreSQL database it may create two
// tables in, and a pool of memcached servers (its test starts private ones):
//
//	go run ./examples/inventory -postgres postgres://user:pw@127.0.0.1/db \
//		-memcached 127.0.0.1:11211,127.0.0.1:11212,127.0.0.1:11213
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/store/memcache"
)

// UserItem is one row of user_items: how many of one item a user holds.
type UserItem struct {
	ID     int64 `msgpack:"id"`
	UserID int64 `msgpack:"user_id"`
	ItemID int64 `msgpack:"item_id"`
	Count  int   `msgpack:"count"`
}

const schema = `
CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE user_items (
  id      bigserial PRIMARY KEY,
  user_id bigint NOT NULL REFERENCES users(id),
  item_id bigint NOT NULL,
  count   int NOT NULL
);
CREATE INDEX user_items_user_id ON user_items (user_id);
INSERT INTO users VALUES (1, 'alice'), (2, 'bob');
INSERT INTO user_items (user_id, item_id, count)
  SELECT u, i, i % 7 + 1 FROM generate_series(1, 2) u, generate_series(1, 2000) i ORDER BY u, i;`

func main() {
	dsn := flag.String("postgres", "", "PostgreSQL connection string (postgres://...); the example creates the tables users and user_items there")
	mc := flag.String("memcached", "", "memcached servers, host:port,host:port,...")
	flag.Parse()
	if *dsn == "" || *mc == "" {
		fmt.Fprintln(os.Stderr, "inventory: give -postgres and -memcached")
		flag.Usage()
		os.Exit(2)
	}
	if err := run(context.Background(), *dsn, strings.Split(*mc, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "inventory:", err)
		os.Exit(1)
	}
}

// run creates the tables in the database at dsn and logs a user in twice
// with its items cached in the memcached pool addrs.
func run(ctx context.Context, dsn string, addrs []string) error {
	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(ctx, schema); err != nil {
		return err
	}
	queries := 0

	st, err := memcache.New(ctx, memcache.Options{Servers: addrs})
	if err != nil {
		return err
	}
	defer st.Close()
	cache, err := kura.New[UserItem](st, kura.Options{TTL: time.Hour})
	if err != nil {
		return err
	}
	items, err := kura.NewKeyed[int64, UserItem](cache, kura.KeyedOptions[int64]{Prefix: "user_item:"})
	if err != nil {
		return err
	}
	byUser, err := kura.NewIndex(items, kura.IndexOptions[int64, int64, UserItem]{
		Prefix: "user_items:by_user:",
		LoadIDs: func(ctx context.Context, userID int64) ([]int64, error) {
			queries++
			rows, err := db.Query(ctx, `SELECT id FROM user_items WHERE user_id = $1 ORDER BY id`, userID)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var ids []int64
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return nil, err
				}
				ids = append(ids, id)
			}
			return ids, rows.Err()
		},
		LoadRecords: func(ctx context.Context, ids []int64) (map[int64]UserItem, error) {
			queries++
			rows, err := db.Query(ctx, `SELECT id, user_id, item_id, count FROM user_items WHERE id = ANY($1)`, ids)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			out := make(map[int64]UserItem, len(ids))
			for rows.Next() {
				var r UserItem
				if err := rows.Scan(&r.ID, &r.UserID, &r.ItemID, &r.Count); err != nil {
					return nil, err
				}
				out[r.ID] = r
			}
			return out, rows.Err()
		},
	})
	if err != nil {
		return err
	}

	for _, phase := range []string{"cold login", "warm login"} {
		queries = 0
		start := time.Now()
		got, err := byUser.Fetch(ctx, 1)
		if err != nil {
			return err
		}
		fmt.Printf("%-11s %d items in %v, %d database queries\n", phase+":", len(got), time.Since(start).Round(100*time.Microsecond), queries)
	}

	// An item changes: only its row is reloaded, the id list stays cached.
	var id int64
	if err := db.QueryRow(ctx, `UPDATE user_items SET count = count + 10 WHERE user_id = 1 AND item_id = 42 RETURNING id`).Scan(&id); err != nil {
		return err
	}
	if err := byUser.Changed(ctx, id); err != nil { // no indexed column changed
		return err
	}
	queries = 0
	got, err := byUser.Fetch(ctx, 1)
	if err != nil {
		return err
	}
	for _, it := range got {
		if it.ID == id {
			fmt.Printf("after one item changed: %d items, item 42 count %d, %d database query\n", len(got), it.Count, queries)
		}
	}
	return nil
}
