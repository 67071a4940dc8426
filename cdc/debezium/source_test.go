package debezium

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/cdc/pgsource"
	"github.com/kuracache/kura/store"
)

// fixtureMapping maps the captured fixtures' tables: products to a record key and an index id
// list by category, orders and notes to record keys.
func fixtureMapping(t *testing.T, withOrders bool) *cdc.Mapping {
	t.Helper()
	var rules []cdc.Rule
	for _, tm := range []struct{ table, tmpl string }{
		{"public.products", "product:{id}"},
		{"public.products", "products_by_category:{category}"},
		{"public.notes", "note:{id}"},
		{"public.orders", "order:{id}"},
	} {
		if tm.table == "public.orders" && !withOrders {
			continue
		}
		r, err := cdc.Template(tm.table, tm.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	m, err := cdc.NewMapping(rules...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// the keys the fixtures' changes invalidate, and one they must leave alone
var (
	fixtureKeys = []string{"product:1", "product:2", "product:3", "product:10",
		"products_by_category:tea", "products_by_category:coffee", "note:1"}
	orderKeys = []string{"order:1", "order:2", "order:7"} // order:7 only by the TRUNCATE
	otherKey  = "product_stats:1"
)

func seed(t *testing.T, stores []store.Store, keys ...string) {
	t.Helper()
	for _, s := range stores {
		for _, k := range keys {
			if err := s.Set(context.Background(), k, []byte("cached"), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func present(t *testing.T, s store.Store, key string) bool {
	t.Helper()
	_, err := s.Get(context.Background(), key)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// runSource streams a KafkaSource through cdc.Run until the returned stop is called.
func runSource(t *testing.T, cfg Config, m *cdc.Mapping, targets []cdc.Target) (stop func()) {
	t.Helper()
	src, err := NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cdc.Run(ctx, cdc.Options{Source: src, Mapping: m, Targets: targets, BacklogEvery: 100 * time.Millisecond})
	}()
	return func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("cdc.Run: %v", err)
		}
	}
}

func testConfig(addr, group, topic string) Config {
	return Config{Brokers: []string{addr}, Group: group, Topics: []string{topic},
		SessionTimeout: 1500 * time.Millisecond, HeartbeatInterval: 300 * time.Millisecond,
		RebalanceTimeout: 10 * time.Second, RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 50 * time.Millisecond}
}

// TestSourceInvalidates: the captured fixtures, produced into a topic, invalidate through cdc's
// delivery on a real Redis and memcached: record keys, both index id lists of the row that moved
// from tea to coffee (Debezium's before image), the TRUNCATEd table whole; nothing else. The
// offsets are all committed once that landed.
func TestSourceInvalidates(t *testing.T) {
	b := broker(t)
	topic, group := "source-invalidates", "g-source"
	n := produceFixtures(t, b, topic, "postgres15-json.jsonl")
	c := cdctest.StartCaches(t)
	stores := []store.Store{c.RS, c.MS}
	seed(t, stores, append(append(fixtureKeys, orderKeys...), otherKey)...)
	stop := runSource(t, testConfig(b.Addr, group, topic), fixtureMapping(t, true),
		[]cdc.Target{{Name: "redis", Store: c.RS}, {Name: "memcached", Store: c.MS}})
	waitFor(t, 60*time.Second, "all offsets committed", func() bool { return total(committed(t, b, group, topic)) == int64(n) })
	stop()
	for _, s := range stores {
		for _, k := range append(append([]string{}, fixtureKeys...), orderKeys...) {
			if present(t, s, k) {
				t.Errorf("%T: %s still cached after its change's offset was committed", s, k)
			}
		}
		if !present(t, s, otherKey) {
			t.Errorf("%T: %s (no rule maps it) was invalidated", s, otherKey)
		}
	}
}

// downStore fails every delete while down is set: a target that is down.
type downStore struct {
	store.Store
	down *atomic.Bool
}

func (d downStore) Delete(ctx context.Context, key string) error {
	if d.down.Load() {
		return errors.New("target down")
	}
	return d.Store.Delete(ctx, key)
}

// commitWhileDown runs the source against a target that is down for a while and reports
// whether any offset was committed before the target came back; it then checks that the
// invalidations landed and everything was committed.
func commitWhileDown(t *testing.T, group string, fault bool) bool {
	b := broker(t)
	topic := "source-" + group
	n := produceFixtures(t, b, topic, "postgres15-json.jsonl")
	c := cdctest.StartCaches(t)
	seed(t, []store.Store{c.RS}, fixtureKeys...)
	var down atomic.Bool
	down.Store(true)
	cfg := testConfig(b.Addr, group, topic)
	cfg.commitBeforeApply = fault
	// orders are unmapped here: the down target cannot walk keys for the TRUNCATE
	stop := runSource(t, cfg, fixtureMapping(t, false), []cdc.Target{{Name: "down", Store: downStore{Store: c.RS, down: &down}}})
	defer stop()
	early := false
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && !early {
		early = total(committed(t, b, group, topic)) > 0
		time.Sleep(100 * time.Millisecond)
	}
	down.Store(false)
	if !fault {
		waitFor(t, 60*time.Second, "all offsets committed", func() bool { return total(committed(t, b, group, topic)) == int64(n) })
		for _, k := range fixtureKeys {
			if present(t, c.RS, k) {
				t.Errorf("%s still cached after its offset was committed", k)
			}
		}
	}
	return early
}

// TestSourceCommitsOnlyAfterApplied: while the target is down nothing is committed; the
// checker catches the injected fault (offsets committed before the invalidation landed).
func TestSourceCommitsOnlyAfterApplied(t *testing.T) {
	if commitWhileDown(t, "src-down", false) {
		t.Error("an offset was committed while the target was down")
	}
	if !commitWhileDown(t, "src-down-fault", true) {
		t.Error("the checker missed the injected fault: offsets committed before Apply")
	}
}

func TestSourceConfigErrors(t *testing.T) {
	if _, err := NewSource(Config{Group: "g", Topics: []string{"t"}}); err == nil {
		t.Error("no brokers: no error")
	}
	if _, err := NewSource(Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, Applier: ApplierFunc(nil)}); err == nil {
		t.Error("an Applier: no error")
	}
}

// TestSourceBadRecordIsFatal: a record that is not Debezium's stops cdc.Run with cdc.ErrFatal
// (retrying cannot fix it) and commits nothing at or after it.
func TestSourceBadRecordIsFatal(t *testing.T) {
	b := broker(t)
	topic, group := "source-bad", "g-source-bad"
	produce(t, b, topic, &kgo.Record{Key: []byte(`{"id":1}`), Value: []byte(`{"op":"c","after":{"id":1}`)})
	src, err := NewSource(testConfig(b.Addr, group, topic))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := cdctest.StartCaches(t)
	err = cdc.Run(ctx, cdc.Options{Source: src, Mapping: fixtureMapping(t, false), Targets: []cdc.Target{{Name: "redis", Store: c.RS}}})
	if !errors.Is(err, cdc.ErrFatal) || !errors.Is(err, ErrBadRecord) {
		t.Fatalf("cdc.Run: %v, want ErrFatal and ErrBadRecord", err)
	}
	if got := total(committed(t, b, group, topic)); got != 0 {
		t.Errorf("committed %d records past a bad one", got)
	}
}

// TestSourceCaughtUp: the source's backlog is the group's lag in records; the status line says
// caught up only once every record is applied and committed, and behind again when records
// arrive that nobody consumes.
func TestSourceCaughtUp(t *testing.T) {
	b := broker(t)
	topic, group := "source-caught-up", "g-caught-up"
	n := produceFixtures(t, b, topic, "postgres15-json.jsonl")
	src, err := NewSource(testConfig(b.Addr, group, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	var bl cdc.Backlog
	// right after the broker started, the group coordinator may not be up yet
	waitFor(t, 30*time.Second, "the group's lag read", func() bool {
		if bl, err = src.Backlog(ctx); err != nil {
			t.Fatal(err)
		}
		if bl.LagRecords < 0 {
			t.Log(bl.Head)
		}
		return bl.LagRecords >= 0
	})
	if bl.LagRecords != int64(n) {
		t.Fatalf("before the group consumed anything: lag %d records, want %d", bl.LagRecords, n)
	}
	c := cdctest.StartCaches(t)
	m := cdc.NewMetrics()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- cdc.Run(rctx, cdc.Options{Source: src, Mapping: fixtureMapping(t, true), Metrics: m, BacklogEvery: 100 * time.Millisecond,
			Targets: []cdc.Target{{Name: "redis", Store: c.RS}}})
	}()
	waitFor(t, 60*time.Second, "the status says caught up", func() bool { return strings.HasPrefix(m.Status(), "cdc: caught up") })
	if got := total(committed(t, b, group, topic)); got != int64(n) {
		t.Errorf("caught up with %d of %d records committed", got, n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	produceFixtures(t, b, topic, "postgres15-json.jsonl")
	if bl, err = src.Backlog(ctx); err != nil || bl.LagRecords != int64(n) {
		t.Errorf("records nobody consumed: lag %d records (%v), want %d", bl.LagRecords, err, n)
	}
}

// TestSourceRefusesTableWithoutBeforeImage: with the before-image check on, a table whose index
// rule reads a column its replica identity does not log (REPLICA IDENTITY DEFAULT) stops
// cdc.Run at start with cdc.ErrFatal and the ALTER TABLE that fixes it; after the fix the check
// passes.
func TestSourceRefusesTableWithoutBeforeImage(t *testing.T) {
	pg, pool := cdctest.StartPostgres(t, nil,
		"CREATE TABLE products (id bigint PRIMARY KEY, category text NOT NULL)")
	m := fixtureMapping(t, false) // public.products by id and by category; public.notes by id
	cdctest.Exec(t, pool, "CREATE TABLE notes (id bigint PRIMARY KEY, body text)")
	cfg := testConfig("127.0.0.1:1", "g-before", "t") // the check runs before any broker is asked
	cfg.CheckBeforeImage = PostgresBeforeImage(pgsource.Options{ConnString: pg.DSN(), Mapping: m})
	src, err := NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := cdctest.StartCaches(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = cdc.Run(ctx, cdc.Options{Source: src, Mapping: m, Targets: []cdc.Target{{Name: "redis", Store: c.RS}}})
	if !errors.Is(err, cdc.ErrFatal) || !strings.Contains(err.Error(), `ALTER TABLE "public"."products" REPLICA IDENTITY FULL`) {
		t.Fatalf("cdc.Run: %v; want cdc.ErrFatal naming ALTER TABLE \"public\".\"products\" REPLICA IDENTITY FULL", err)
	}
	t.Logf("refused: %v", err)
	cdctest.Exec(t, pool, "ALTER TABLE products REPLICA IDENTITY FULL")
	if err := cfg.CheckBeforeImage(ctx); err != nil {
		t.Errorf("after ALTER TABLE ... REPLICA IDENTITY FULL: %v", err)
	}
}

// TestSourceLagUnknownWithoutBroker: when the group's lag cannot be read the backlog says so
// (LagRecords -1), so the status line cannot say caught up.
func TestSourceLagUnknownWithoutBroker(t *testing.T) {
	src, err := NewSource(testConfig("127.0.0.1:1", "g", "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	bl, err := src.Backlog(ctx)
	if err != nil || bl.LagRecords != -1 || !strings.Contains(bl.Head, "could not be read") {
		t.Fatalf("Backlog with no broker: %+v, %v; want LagRecords -1 and a Head that says why", bl, err)
	}
}

// TestSourceMarkReached: a Mark names the partitions with records (not an empty topic, not a
// topic the broker does not know); a group that never committed has not reached it; once
// cdc.Run applied and committed everything it has, and it stays reached when later records
// arrive, which a new Mark waits for. A Mark needs the topics by name.
func TestSourceMarkReached(t *testing.T) {
	b := broker(t)
	topic, empty, group := "source-mark", "source-mark-empty", "g-mark"
	n := produceFixtures(t, b, topic, "postgres15-json.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.CreateTopic(ctx, empty, 2); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
	cfg := testConfig(b.Addr, group, topic)
	cfg.Topics = append(cfg.Topics, empty)
	src, err := NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	mark, err := src.Mark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s/0@%d", topic, n); mark.String() != want {
		t.Fatalf("mark %s, want %s (the empty topic needs nothing)", mark, want)
	}
	if ok, err := src.Reached(ctx, mark); ok {
		t.Fatalf("a group that never committed reached %s (err %v)", mark, err)
	}
	absent, err := NewSource(testConfig(b.Addr, group, "source-mark-no-such-topic"))
	if err != nil {
		t.Fatal(err)
	}
	defer absent.Close()
	if m, err := absent.Mark(ctx); err != nil || m.String() != "nothing to apply" {
		t.Errorf("a topic the broker does not know: mark %q (%v), want nothing to apply", m, err)
	} else if ok, err := absent.Reached(ctx, m); !ok || err != nil {
		t.Errorf("an empty mark is not reached (%v)", err)
	}

	c := cdctest.StartCaches(t)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- cdc.Run(rctx, cdc.Options{Source: src, Mapping: fixtureMapping(t, true), Targets: []cdc.Target{{Name: "redis", Store: c.RS}}})
	}()
	waitFor(t, 60*time.Second, "the mark reached", func() bool {
		ok, err := src.Reached(ctx, mark)
		if err != nil {
			t.Logf("not known yet: %v", err)
		}
		return ok
	})
	if got := total(committed(t, b, group, topic)); got != int64(n) {
		t.Errorf("reached with %d of %d records committed", got, n)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	produceFixtures(t, b, topic, "postgres15-json.jsonl")
	if ok, err := src.Reached(ctx, mark); !ok {
		t.Errorf("later records un-reached the earlier mark (%v)", err)
	}
	later, err := src.Mark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := src.Reached(ctx, later); ok || err != nil {
		t.Errorf("a mark past what the group committed: reached %v (%v), want false", ok, err)
	}

	cfg.TopicRegex = true
	rx, err := NewSource(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	if _, err := rx.Mark(ctx); err == nil || !strings.Contains(err.Error(), "TopicRegex") {
		t.Errorf("a Mark over topic patterns: %v, want an error naming Config.TopicRegex", err)
	}
}
