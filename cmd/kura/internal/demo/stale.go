package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/pgsource"
	"github.com/kuracache/kura/cdc/staleness"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/redisstore"
)

func staleScenario() scenario {
	return scenario{
		name:    "stale",
		title:   "A write the cache never heard of",
		problem: "A migration, a psql session or another service changes rows in plain SQL; nothing calls Invalidate, so the service keeps serving the old values until their TTL runs out.",
		answer:  "kura cdc reads PostgreSQL's own change stream and invalidates the changed rows' keys at commit; kura's staleness inspector compares sampled entries with the database and counts what is still stale.",
		needs:   []string{"postgres", "redis"},
		run:     runStale,
	}
}

const (
	staleProducts = 200
	staleChanged  = 50
	staleTTL      = 10 * time.Minute
)

// product is a row of products as the shop caches it.
type product struct {
	Name  string `msgpack:"name"`
	Price int    `msgpack:"price_cents"`
}

// stalePhase is what the service served after the plain-SQL writes.
type stalePhase struct {
	staleReads, staleLater int // service reads that differ from the database, at once and a second later (-1: not looked)
	insp                   staleness.Report
}

func runStale(ctx context.Context, env *Env, res *Result) error {
	db := env.db
	if _, err := db.Exec(ctx, `CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL, price_cents int NOT NULL);
INSERT INTO products SELECT g, 'product ' || g, 1000 + g FROM generate_series(1, 200) g`); err != nil {
		return err
	}
	st, err := redisstore.New(ctx, redisstore.Options{Addrs: []string{env.redis.Addr}})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := kura.New[product](st, kura.Options{Name: "products", TTL: staleTTL})
	if err != nil {
		return err
	}
	products, err := kura.NewKeyed[int64, product](c, kura.KeyedOptions[int64]{Prefix: "product:"})
	if err != nil {
		return err
	}
	loadOne := func(ctx context.Context, id int64) (product, error) {
		var p product
		err := db.QueryRow(ctx, "SELECT name, price_cents FROM products WHERE id = $1", id).Scan(&p.Name, &p.Price)
		if errors.Is(err, pgx.ErrNoRows) {
			return p, kura.ErrNotFound
		}
		return p, err
	}
	ids := make([]int64, staleProducts)
	keys := make([]string, staleProducts)
	for i := range ids {
		ids[i] = int64(i + 1)
		keys[i] = products.Key(ids[i])
	}
	insp, err := staleness.New(c, staleness.Options[product]{
		Keys: func(context.Context, int) ([]string, error) { return keys, nil },
		Load: func(ctx context.Context, key string) (product, error) {
			var id int64
			if _, err := fmt.Sscanf(key, "product:%d", &id); err != nil {
				return product{}, err
			}
			return loadOne(ctx, id)
		},
		SampleSize: staleProducts, MaxLoadsPerSecond: 5000, Grace: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	fill := func() error {
		for _, id := range ids {
			if _, err := products.Fetch(ctx, id, loadOne); err != nil {
				return err
			}
		}
		return nil
	}
	// serve reads every product as the service does and counts the
	// answers that differ from the database.
	serve := func() (int, error) {
		truth := map[int64]product{}
		rows, err := db.Query(ctx, "SELECT id, name, price_cents FROM products")
		if err != nil {
			return 0, err
		}
		for rows.Next() {
			var id int64
			var p product
			if err := rows.Scan(&id, &p.Name, &p.Price); err != nil {
				return 0, err
			}
			truth[id] = p
		}
		if err := rows.Err(); err != nil {
			return 0, err
		}
		stale := 0
		for _, id := range ids {
			p, err := products.Fetch(ctx, id, loadOne)
			if err != nil {
				return 0, err
			}
			if p != truth[id] {
				stale++
			}
		}
		return stale, nil
	}
	// The writer: plain SQL on a connection of its own, one commit per
	// row, with synchronous_commit on (PostgreSQL's default; the demo's
	// server is started with it off, and PostgreSQL decodes only flushed
	// WAL, so off would add the WAL writer's 200 ms to every commit).
	update := func(each func(id int64, sent time.Time) error) error {
		conn, err := db.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
			return err
		}
		defer conn.Exec(context.Background(), "RESET synchronous_commit") //nolint:errcheck // the pool's next user gets the server's setting
		for id := 1; id <= staleChanged; id++ {
			sent := time.Now()
			if _, err := conn.Exec(ctx, "UPDATE products SET price_cents = price_cents + 100 WHERE id = $1", id); err != nil {
				return err
			}
			if each != nil {
				if err := each(int64(id), sent); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// phase reads as the service does, the inspector checks, and with
	// again the service reads once more a second after the first.
	phase := func(again bool) (stalePhase, error) {
		var p stalePhase
		var err error
		first := time.Now()
		if p.staleReads, err = serve(); err != nil {
			return p, err
		}
		if p.insp, err = insp.Check(ctx, keys); err != nil || !again {
			p.staleLater = -1
			return p, err
		}
		time.Sleep(time.Until(first.Add(time.Second)))
		p.staleLater, err = serve()
		return p, err
	}

	fmt.Fprintf(env.progress, "  without cdc: %d products cached, then %d prices changed in plain SQL ...\n", staleProducts, staleChanged)
	if err := fill(); err != nil {
		return err
	}
	if err := update(nil); err != nil {
		return err
	}
	before, err := phase(true)
	if err != nil {
		return err
	}

	fmt.Fprintln(env.progress, "  with kura cdc on PostgreSQL's change stream: the same again ...")
	lags, after, err := staleWithCDC(ctx, env, products, fill, update, phase)
	if err != nil {
		return err
	}
	slices.Sort(lags)
	p50, worst := lags[len(lags)/2], lags[len(lags)-1]

	res.count("without_cdc.stale_reads", int64(before.staleReads))
	res.count("without_cdc.stale_reads_1s_later", int64(before.staleLater))
	res.count("without_cdc.inspector_stale", int64(before.insp.Stale))
	res.count("with_cdc.stale_reads", int64(after.staleReads))
	res.count("with_cdc.inspector_stale", int64(after.insp.Stale))
	res.count("with_cdc.inspector_compared", int64(after.insp.Fresh+after.insp.Stale+after.insp.Raced))
	res.count("with_cdc.lag_p50_us", p50.Microseconds())
	res.count("with_cdc.lag_max_us", worst.Microseconds())

	t := Table{Title: fmt.Sprintf("%d products cached (TTL %s), then %d prices changed by plain-SQL UPDATEs", staleProducts, fmt.Sprintf("%.0f min", staleTTL.Minutes()), staleChanged),
		Columns: []string{"", "stale reads served", "again 1 s later", "inspector: stale of compared", "oldest stale entry"}}
	for _, r := range []struct {
		name string
		p    stalePhase
	}{{"without cdc", before}, {"with kura cdc", after}} {
		oldest, later := "-", "-"
		if r.p.insp.Stale > 0 {
			oldest = round0(r.p.insp.OldestStale())
		}
		if r.p.staleLater >= 0 {
			later = fmt.Sprintf("%d of %d", r.p.staleLater, staleProducts)
		}
		t.Rows = append(t.Rows, []string{r.name, fmt.Sprintf("%d of %d", r.p.staleReads, staleProducts), later,
			fmt.Sprintf("%d of %d", r.p.insp.Stale, r.p.insp.Fresh+r.p.insp.Stale+r.p.insp.Raced), oldest})
	}
	lt := Table{Title: fmt.Sprintf("kura cdc: each UPDATE, from sent (one statement, autocommit) to its invalidation landed on Redis (%d commits)", len(lags)),
		Columns: []string{"commits", "p50", "max"},
		Rows:    [][]string{{fmt.Sprint(len(lags)), round(p50), round(worst)}}}
	res.Tables = append(res.Tables, t, lt)
	res.Charts = append(res.Charts,
		Chart{Title: fmt.Sprintf("Stale reads served after %d prices changed in plain SQL", staleChanged), Unit: "reads",
			Bars: []Bar{{Label: "without cdc", Value: float64(before.staleReads)}, {Label: "with kura cdc", Value: float64(after.staleReads), Kura: true}}},
		Chart{Title: "kura cdc: UPDATE sent to invalidation landed", Unit: "ms",
			Note: "one machine: PostgreSQL, Redis and kura cdc share its 2 cores",
			Bars: []Bar{{Label: "p50", Value: ms(p50), Kura: true}, {Label: "max", Value: ms(worst), Kura: true}}})
	res.Checks = append(res.Checks,
		Check{What: "stale reads served after the plain-SQL UPDATEs, without vs with kura cdc", Before: int64(before.staleReads), After: int64(after.staleReads), Want: "less"},
		Check{What: "stale entries the inspector found, without vs with kura cdc", Before: int64(before.insp.Stale), After: int64(after.insp.Stale), Want: "less"})
	res.Headline = fmt.Sprintf("after %d of %d prices changed in plain SQL: without cdc the service served %d stale prices (%d a second later); with kura cdc %d, each invalidated a median %s after its UPDATE was sent (max %s), and the inspector found %d stale of %d compared",
		staleChanged, staleProducts, before.staleReads, before.staleLater, after.staleReads, round(p50), round(worst), after.insp.Stale, after.insp.Fresh+after.insp.Stale+after.insp.Raced)
	res.note("Without cdc nothing invalidates the changed rows: their entries stay until the TTL (%.0f min here) or an Invalidate; the demo looked again only %s later, so the card claims no more than that.", staleTTL.Minutes(), "1 s")
	res.note("The inspector reads each sampled entry from Redis, loads the row with the service's own loader and counts a difference as stale only if the entry is still unchanged %s after the load (a write whose invalidation is on its way counts as raced, not stale).", "200 ms")
	res.Commands = append(res.Commands, "kura demo --only stale", "kura cdc --config cdc.json --metrics 127.0.0.1:9187   # with an \"inspect\" section: the stale count in the status line")
	return nil
}

// staleWithCDC runs kura cdc over the products table, fills the cache,
// makes the plain-SQL UPDATEs one commit at a time and measures each one
// from the moment it was sent (autocommit: the statement and its COMMIT)
// to its invalidation applied on Redis; then phase reads as the service
// does.
func staleWithCDC(ctx context.Context, env *Env, products *kura.Keyed[int64, product], fill func() error,
	update func(func(int64, time.Time) error) error, phase func(bool) (stalePhase, error)) ([]time.Duration, stalePhase, error) {
	rule, err := cdc.Record("products", "id", products)
	if err != nil {
		return nil, stalePhase{}, err
	}
	m, err := cdc.NewMapping(rule)
	if err != nil {
		return nil, stalePhase{}, err
	}
	src, err := pgsource.New(pgsource.Options{ConnString: env.pg.DSN(), Mapping: m, Slot: "kura_demo", Publication: "kura_demo"})
	if err != nil {
		return nil, stalePhase{}, err
	}
	defer src.Close()
	applied := make(chan time.Time, 1024)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- cdc.Run(cctx, cdc.Options{Source: src, Mapping: m, Targets: []cdc.Target{{Name: "redis", Store: products.Cache().Store()}},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnApplied: func(a cdc.Applied) {
				if a.Txns > 0 || len(a.Tables) > 0 { // a transaction or the reset, not a keepalive
					applied <- a.At
				}
			}})
	}()
	defer func() { cancel(); <-done }()
	wait := func() (time.Time, error) {
		select {
		case at := <-applied:
			return at, nil
		case err := <-done:
			return time.Time{}, fmt.Errorf("kura cdc stopped: %v", err)
		case <-time.After(30 * time.Second):
			return time.Time{}, errors.New("kura cdc applied nothing in 30 s")
		}
	}
	if _, err := wait(); err != nil { // the new slot's reset: the mapped keys invalidated whole
		return nil, stalePhase{}, err
	}
	if err := fill(); err != nil {
		return nil, stalePhase{}, err
	}
	var lags []time.Duration
	st := products.Cache().Store()
	err = update(func(id int64, sent time.Time) error {
		at, err := wait()
		if err != nil {
			return err
		}
		lags = append(lags, at.Sub(sent))
		// The batch reported is this UPDATE's: its key is gone.
		if _, err := st.Get(ctx, products.Key(id)); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("kura cdc reported product %d's UPDATE applied, but its key is still cached (%v)", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, stalePhase{}, err
	}
	p, err := phase(false)
	return lags, p, err
}

// round0 rounds d to whole seconds ("3s"); under a second, "under 1s".
func round0(d time.Duration) string {
	if d < time.Second {
		return "under 1s"
	}
	return d.Round(time.Second).String()
}
