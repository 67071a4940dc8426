package debezium

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kuracache/kura/internal/harness/kafka"
	"github.com/kuracache/kura/internal/harness/servers"
)

// TestEndToEndPostgres: plain-SQL updates on PostgreSQL 15 travel through Debezium's embedded
// engine and Kafka to a Consumer; it measures commit → applied (the Applier saw the event) and
// kills the engine with SIGKILL mid-run, then the broker: updates made while either was down
// arrive after its restart, none lost. Runs under KURA_SOAK or KURA_DEBEZIUM=1 (a Debezium JVM start costs 5-20 s here).
func TestEndToEndPostgres(t *testing.T) {
	if !kafka.Soak() && os.Getenv("KURA_DEBEZIUM") == "" {
		t.Skip("the Debezium path runs under KURA_SOAK=1 (make soak) or KURA_DEBEZIUM=1")
	}
	b := broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	pg, err := servers.StartPostgres(ctx, servers.PostgresConfig{Args: []string{
		"wal_level=logical", "max_wal_senders=4", "max_replication_slots=4"}})
	if err != nil {
		if errors.Is(err, servers.ErrNotInstalled) && !kafka.Required() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	db, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	const rows = 100
	for _, s := range []string{
		`CREATE TABLE items (id BIGINT PRIMARY KEY, v INT NOT NULL)`,
		`ALTER TABLE items REPLICA IDENTITY FULL`,
		fmt.Sprintf(`INSERT INTO items SELECT i, 0 FROM generate_series(1, %d) i`, rows),
	} {
		if _, err := db.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	const topic = "e2e.public.items"
	if err := b.CreateTopic(ctx, topic, 1); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(pg.Addr)
	portN, _ := strconv.Atoi(port)
	eng := kafka.EngineT(t, kafka.EngineConfig{Broker: b.Addr, Props: kafka.PostgresProps(kafka.PostgresSource{
		Host: host, Port: portN, User: "kura", Password: "unused_trust_auth", Database: "postgres",
		Tables: "public.items", Prefix: "e2e", Slot: "kura_e2e", Publication: "kura_e2e_pub"})})

	type kv struct{ id, v int64 }
	var mu sync.Mutex
	committedAt := map[kv]time.Time{}
	appliedAt := map[kv]time.Time{}
	producedAt := map[kv]time.Time{} // the Kafka record's timestamp: when the engine sent it
	a := ApplierFunc(func(ctx context.Context, batch []Event) error {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range batch {
			if e.Kind != KindChange || e.Change.Op != OpUpdate {
				continue
			}
			id, _ := e.Change.After.Text("id")
			v, _ := e.Change.After.Text("v")
			k := kv{atoi(id), atoi(v)}
			if _, seen := appliedAt[k]; !seen {
				appliedAt[k] = now
				producedAt[k] = e.Timestamp
			}
		}
		return nil
	})
	c := newConsumer(t, b, "g-e2e", topic, a, nil)
	rctx, rcancel := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- c.Run(rctx) }()
	defer func() {
		rcancel()
		<-runDone
		c.Close()
	}()

	// Phase 1: single-row commits at about 100/s.
	n := 300
	if kafka.Soak() {
		n = 3000
	}
	seq := int64(0)
	update := func() {
		seq++
		k := kv{seq%rows + 1, seq}
		if _, err := db.Exec(ctx, `UPDATE items SET v = $1 WHERE id = $2`, k.v, k.id); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		committedAt[k] = time.Now()
		mu.Unlock()
	}
	tick := time.NewTicker(10 * time.Millisecond)
	for i := 0; i < n; i++ {
		<-tick.C
		update()
	}
	tick.Stop()
	waitApplied := func(what string) {
		waitFor(t, 3*time.Minute, what, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for k := range committedAt {
				if _, ok := appliedAt[k]; !ok {
					return false
				}
			}
			return true
		})
	}
	waitApplied("every update applied")
	mu.Lock()
	var lags, engine, consumer []time.Duration
	for k, at := range committedAt {
		lags = append(lags, appliedAt[k].Sub(at))
		engine = append(engine, producedAt[k].Sub(at))
		consumer = append(consumer, appliedAt[k].Sub(producedAt[k]))
	}
	mu.Unlock()
	q := func(d []time.Duration, p float64) time.Duration { return pct(d, p).Round(time.Millisecond) }
	t.Logf("commit -> applied through Debezium and Kafka, %d single-row commits at ~100/s: p50 %v, p99 %v, max %v; "+
		"of which commit -> on Kafka (Debezium) p50 %v p99 %v, Kafka -> applied (broker, franz-go, Apply) p50 %v p99 %v (load %s)",
		len(lags), q(lags, 0.50), q(lags, 0.99), q(lags, 1), q(engine, 0.5), q(engine, 0.99), q(consumer, 0.5), q(consumer, 0.99), loadavg())

	// Phase 2: the engine dies (SIGKILL); updates made meanwhile arrive after its restart.
	eng.Kill()
	for i := 0; i < 50; i++ {
		update()
	}
	t0 := time.Now()
	if err := eng.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("engine restart after SIGKILL: streaming again after %v", time.Since(t0))
	waitApplied("every update made while the engine was down applied after its restart")

	// Phase 3: the broker dies (SIGKILL) and comes back on the same log directory; updates made
	// while it is down wait in the engine (its producer retries) and are applied after.
	b.Kill()
	for i := 0; i < 50; i++ {
		update()
	}
	t0 = time.Now()
	if err := b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker restart after SIGKILL: answering after %v", time.Since(t0))
	waitApplied("every update made while the broker was down applied after its restart")
	if eng.Exited() {
		t.Errorf("the engine exited while the broker was down:\n%s", eng.Log())
	}
	st := c.Stats()
	t.Logf("consumer: %d records in %d batches, %d changes (a killed engine re-sends what it had not stored offsets for)", st.Records, st.Batches, st.Changes)
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// loadavg is the 1, 5 and 15 minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
