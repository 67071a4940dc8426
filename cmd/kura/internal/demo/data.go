package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kuracache/kura/internal/harness/corpus"
)

// The data set: a news site's articles, and a game's users with their item
// inventories. It is generated from Config.Seed, so every run loads the
// same rows.
const schema = `
CREATE TABLE articles (
  id           bigint PRIMARY KEY,
  language     text NOT NULL,
  title        text NOT NULL,
  published_at timestamptz NOT NULL,
  doc          jsonb NOT NULL
);
CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE user_items (
  id          bigserial PRIMARY KEY,
  user_id     bigint NOT NULL REFERENCES users(id),
  item_id     bigint NOT NULL,
  master_id   int NOT NULL,
  name        text NOT NULL,
  kind        text NOT NULL,
  rarity      int NOT NULL,
  level       int NOT NULL,
  exp         bigint NOT NULL,
  count       int NOT NULL,
  locked      boolean NOT NULL,
  favorite    boolean NOT NULL,
  attack      int NOT NULL,
  defense     int NOT NULL,
  skills      int[] NOT NULL,
  acquired_at timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL
);
CREATE INDEX user_items_user_id ON user_items (user_id);`

// otherUsers is how many users besides the one who logs in; each has a
// small inventory, so the index really selects.
const otherUsers = 9

func (e *Env) loadData(ctx context.Context) error {
	db, err := pgxpool.New(ctx, e.pg.DSN())
	if err != nil {
		return err
	}
	e.db = db
	if _, err := db.Exec(ctx, schema); err != nil {
		return err
	}
	n := e.cfg.Size.Articles
	fmt.Fprintf(e.progress, "loading %d articles into PostgreSQL ...\n", n)
	rows := make([][]any, 0, n)
	for i := range n {
		a := corpus.NewArticle(e.cfg.Seed, i)
		a.ID = int64(i + 1)
		doc, err := json.Marshal(&a)
		if err != nil {
			return err
		}
		rows = append(rows, []any{a.ID, a.Language, a.Title, a.PublishedAt, string(doc)})
	}
	if _, err := db.CopyFrom(ctx, pgx.Identifier{"articles"},
		[]string{"id", "language", "title", "published_at", "doc"}, pgx.CopyFromRows(rows)); err != nil {
		return err
	}

	fmt.Fprintf(e.progress, "loading %d users and their inventories (%d items for the user who logs in) ...\n",
		otherUsers+1, e.cfg.Size.Items)
	var users, items [][]any
	for u := int64(1); u <= otherUsers+1; u++ {
		users = append(users, []any{u, fmt.Sprintf("player-%d", u)})
		count := 50
		if u == e.userID {
			count = e.cfg.Size.Items
		}
		for _, it := range corpus.Inventory(e.cfg.Seed, u, count) {
			skills := make([]int32, len(it.Skills))
			for i, s := range it.Skills {
				skills[i] = int32(s)
			}
			items = append(items, []any{u, it.ItemID, it.MasterID, it.Name, it.Kind, it.Rarity, it.Level,
				it.Exp, it.Count, it.Locked, it.Favorite, it.Attack, it.Defense, skills, it.AcquiredAt, it.UpdatedAt})
		}
	}
	if _, err := db.CopyFrom(ctx, pgx.Identifier{"users"}, []string{"id", "name"}, pgx.CopyFromRows(users)); err != nil {
		return err
	}
	if _, err := db.CopyFrom(ctx, pgx.Identifier{"user_items"}, []string{"user_id", "item_id", "master_id", "name",
		"kind", "rarity", "level", "exp", "count", "locked", "favorite", "attack", "defense", "skills",
		"acquired_at", "updated_at"}, pgx.CopyFromRows(items)); err != nil {
		return err
	}
	_, err = db.Exec(ctx, "ANALYZE")
	return err
}

// dbCounter counts what a scenario asked of PostgreSQL.
type dbCounter struct {
	queries, rows atomic.Int64
}

func (c *dbCounter) snapshot() (queries, rows int64) { return c.queries.Load(), c.rows.Load() }

// Item is one row of user_items as the game caches it.
type Item struct {
	ID     int64 `json:"id" msgpack:"id"`
	UserID int64 `json:"user_id" msgpack:"user_id"`
	corpus.Item
}

const itemColumns = `id, user_id, item_id, master_id, name, kind, rarity, level, exp, count, locked, favorite,
  attack, defense, skills, acquired_at, updated_at`

func scanItem(rows pgx.Rows) (Item, error) {
	var it Item
	var skills []int32
	var acquired, updated time.Time
	err := rows.Scan(&it.ID, &it.UserID, &it.ItemID, &it.MasterID, &it.Name, &it.Kind, &it.Rarity, &it.Level,
		&it.Exp, &it.Count, &it.Locked, &it.Favorite, &it.Attack, &it.Defense, &skills, &acquired, &updated)
	it.Item.UserID = it.UserID
	it.AcquiredAt, it.UpdatedAt = acquired.UTC(), updated.UTC()
	for _, s := range skills {
		it.Skills = append(it.Skills, int(s))
	}
	return it, err
}

// itemIDs is the index query: the ids of one user's items.
func (e *Env) itemIDs(ctx context.Context, c *dbCounter, userID int64) ([]int64, error) {
	c.queries.Add(1)
	rows, err := e.db.Query(ctx, `SELECT id FROM user_items WHERE user_id = $1 ORDER BY id`, userID)
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
		c.rows.Add(1)
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// itemsByID loads item rows by primary key.
func (e *Env) itemsByID(ctx context.Context, c *dbCounter, ids []int64) (map[int64]Item, error) {
	c.queries.Add(1)
	rows, err := e.db.Query(ctx, `SELECT `+itemColumns+` FROM user_items WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]Item, len(ids))
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, err
		}
		c.rows.Add(1)
		out[it.ID] = it
	}
	return out, rows.Err()
}

// itemsOfUser loads a user's whole inventory in one query.
func (e *Env) itemsOfUser(ctx context.Context, c *dbCounter, userID int64) ([]Item, error) {
	c.queries.Add(1)
	rows, err := e.db.Query(ctx, `SELECT `+itemColumns+` FROM user_items WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Item
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			return nil, err
		}
		c.rows.Add(1)
		out = append(out, it)
	}
	return out, rows.Err()
}

// articlesByID loads articles by primary key.
func (e *Env) articlesByID(ctx context.Context, c *dbCounter, ids []int64) (map[int64]corpus.Article, error) {
	c.queries.Add(1)
	rows, err := e.db.Query(ctx, `SELECT id, doc FROM articles WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]corpus.Article, len(ids))
	for rows.Next() {
		var id int64
		var doc []byte
		if err := rows.Scan(&id, &doc); err != nil {
			return nil, err
		}
		var a corpus.Article
		if err := json.Unmarshal(doc, &a); err != nil {
			return nil, fmt.Errorf("article %d: %w", id, err)
		}
		c.rows.Add(1)
		out[id] = a
	}
	return out, rows.Err()
}
