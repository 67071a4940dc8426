package cdc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/cdc/pgsource"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/store"
)

// benchEnv starts PostgreSQL (logical), Redis and memcached and a table
// of rows rows, with a mapping of its id column.
func benchEnv(t *testing.T, rows int) (*servers.Postgres, *pgxpool.Pool, []cdc.Target, *cdc.Mapping) {
	pg, pool := cdctest.StartPostgres(t, []string{"max_wal_size=4GB", "synchronous_commit=on"},
		"CREATE TABLE items (id bigint PRIMARY KEY, v bigint NOT NULL)",
		fmt.Sprintf("INSERT INTO items SELECT g, 0 FROM generate_series(1, %d) g", rows))
	caches := cdctest.StartCaches(t)
	rs, ms := caches.RS, caches.MS
	rule, err := cdc.Template("items", "item:{id}")
	if err != nil {
		t.Fatal(err)
	}
	mapping, err := cdc.NewMapping(rule)
	if err != nil {
		t.Fatal(err)
	}
	return pg, pool, []cdc.Target{{Name: "redis", Store: rs}, {Name: "memcached", Store: store.Store(ms)}}, mapping
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// writeBenchJSON writes a benchmark's figures, per round, to the file
// KURA_CDC_BENCH_JSON names (make bench-report reads it:
// internal/harness/benchreport); without it, nothing.
func writeBenchJSON(t *testing.T, figures map[string][]float64) {
	path := os.Getenv("KURA_CDC_BENCH_JSON")
	if path == "" {
		return
	}
	b, err := json.Marshal(figures)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// TestBenchLag (KURA_CDC_BENCH=1): 1,000 commits/s of 1-10 rows for
// KURA_CDC_BENCH_SECONDS (10): kura's own share (received -> applied on
// Redis and memcached) and commit -> applied, per batch. Under make soak
// (KURA_SOAK=1): 1,000 commits/s of 10 rows for 60 s, failing if the lag
// grows. KURA_CDC_BENCH_JSON=<file> also writes the figures as JSON.
func TestBenchLag(t *testing.T) {
	if os.Getenv("KURA_CDC_BENCH") != "1" && os.Getenv("KURA_SOAK") != "1" {
		t.Skip("benchmark: KURA_CDC_BENCH=1 (or make soak)")
	}
	secs := 10
	soak := os.Getenv("KURA_SOAK") == "1"
	if soak {
		secs = 60
	}
	if s, err := strconv.Atoi(os.Getenv("KURA_CDC_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	const rows = 100_000
	pg, pool, targets, mapping := benchEnv(t, rows)
	src, err := pgsource.New(pgsource.Options{ConnString: pg.DSN(), Mapping: mapping})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var (
		mu             sync.Mutex
		share, toApply []time.Duration
		txns           int
		ready          = make(chan struct{})
		once           sync.Once
		lagSamples     []time.Duration
		measuring      bool
	)
	m := cdc.NewMetrics()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cdc.Run(ctx, cdc.Options{Source: src, Mapping: mapping, Targets: targets, Metrics: m,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnApplied: func(a cdc.Applied) {
				once.Do(func() { close(ready) })
				if a.Txns == 0 {
					return
				}
				mu.Lock()
				if measuring {
					share = append(share, a.At.Sub(a.First))
					toApply = append(toApply, a.At.Sub(a.Commit))
					txns += a.Txns
				}
				mu.Unlock()
			}})
	}()
	<-ready
	mu.Lock()
	measuring = true
	mu.Unlock()
	wctx, stop := context.WithTimeout(ctx, time.Duration(secs)*time.Second)
	defer stop()
	var wg sync.WaitGroup
	var commits, late int64
	var cmu sync.Mutex
	const writers = 8
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second * writers / 1000)
			defer tick.Stop()
			n := 0
			for {
				select {
				case <-wctx.Done():
					cmu.Lock()
					commits += int64(n)
					cmu.Unlock()
					return
				case <-tick.C:
				}
				k := 1 + rand.Int64N(10)
				if soak {
					k = 10 // make soak: 1,000 commits/s of 10 rows
				}
				first := 1 + rand.Int64N(rows-k)
				start := time.Now()
				if _, err := pool.Exec(wctx, "UPDATE items SET v = v + 1 WHERE id BETWEEN $1 AND $2", first, first+k-1); err == nil {
					n++
				}
				if time.Since(start) > time.Second*writers/1000 {
					cmu.Lock()
					late++
					cmu.Unlock()
				}
			}
		}()
	}
	go func() {
		for wctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			mu.Lock()
			lagSamples = append(lagSamples, m.Lag())
			mu.Unlock()
		}
	}()
	wg.Wait()
	time.Sleep(2 * time.Second)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	t.Logf("lag: %d commits in %ds (%.0f/s, %d writer calls slower than their slot), %d transactions applied in %d batches; load %s",
		commits, secs, float64(commits)/float64(secs), late, txns, len(share), loadavg())
	t.Logf("kura's share (received -> applied on Redis and memcached), per batch: p50 %v p99 %v max %v",
		quantile(share, .5).Round(10*time.Microsecond), quantile(share, .99).Round(10*time.Microsecond), quantile(share, 1).Round(10*time.Microsecond))
	t.Logf("commit -> applied, per batch: p50 %v p99 %v max %v",
		quantile(toApply, .5).Round(10*time.Microsecond), quantile(toApply, .99).Round(10*time.Microsecond), quantile(toApply, 1).Round(10*time.Microsecond))
	first, second := quantile(lagSamples[:len(lagSamples)/2], .5), quantile(lagSamples[len(lagSamples)/2:], .5)
	t.Logf("lag gauge every 0.5 s: first half p50 %v, second half p50 %v (growing lag would show here)", first, second)
	writeBenchJSON(t, map[string][]float64{
		"commits/s":                  {float64(commits) / float64(secs)},
		"received -> applied p50 ms": {millis(quantile(share, .5))},
		"received -> applied p99 ms": {millis(quantile(share, .99))},
		"commit -> applied p50 ms":   {millis(quantile(toApply, .5))},
		"commit -> applied p99 ms":   {millis(quantile(toApply, .99))},
	})
	// The mechanism, with a generous bound: cdc keeps up (the lag does
	// not grow through the run). The tight numbers are the figures above.
	if second > first+time.Second {
		t.Errorf("the lag grew from %v to %v over the run: cdc does not keep up with %.0f commits/s", first, second, float64(commits)/float64(secs))
	}
}

// TestBenchThroughput (KURA_CDC_BENCH=1): two slots at one LSN drain the
// same backlog (KURA_CDC_BENCH_ROWS rows, 1,000,000 by default, in 1-10
// row transactions): one by pg_recvlogical (PostgreSQL's own decoding
// limit), one by kura cdc into Redis and memcached. Rounds alternate
// which goes first. KURA_CDC_BENCH_JSON=<file> also writes each round's
// rows/s as JSON.
func TestBenchThroughput(t *testing.T) {
	if os.Getenv("KURA_CDC_BENCH") != "1" {
		t.Skip("benchmark: KURA_CDC_BENCH=1")
	}
	total := 1_000_000
	if s, err := strconv.Atoi(os.Getenv("KURA_CDC_BENCH_ROWS")); err == nil && s > 0 {
		total = s
	}
	rounds := 3
	if s, err := strconv.Atoi(os.Getenv("KURA_CDC_BENCH_ROUNDS")); err == nil && s > 0 {
		rounds = s
	}
	recv, err := exec.LookPath("pg_recvlogical")
	if err != nil {
		t.Skip("pg_recvlogical not installed")
	}
	const table = 200_000
	pg, pool, targets, mapping := benchEnv(t, table)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE PUBLICATION kura_cdc FOR TABLE items"); err != nil {
		t.Fatal(err)
	}
	var ratios, recvRate, kuraRate []float64
	for round := 0; round < rounds; round++ {
		a, b := fmt.Sprintf("recv_%d", round), fmt.Sprintf("kura_%d", round)
		if _, err := pool.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", a); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "SELECT pg_copy_logical_replication_slot($1, $2)", a, b); err != nil {
			t.Fatal(err)
		}
		genStart := time.Now()
		// 1-10 rows per transaction, committed inside one DO block.
		if _, err := pool.Exec(ctx, fmt.Sprintf(`DO $$
DECLARE done int := 0; k int; f int;
BEGIN
  WHILE done < %d LOOP
    k := 1 + floor(random() * 10)::int;
    f := 1 + floor(random() * (%d - k))::int;
    UPDATE items SET v = v + 1 WHERE id BETWEEN f AND f + k - 1;
    done := done + k;
    COMMIT;
  END LOOP;
END$$`, total, table)); err != nil {
			t.Fatal(err)
		}
		var end string
		if err := pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&end); err != nil {
			t.Fatal(err)
		}
		endLSN, _ := pglogrepl.ParseLSN(end)
		t.Logf("round %d: backlog of %d rows generated in %v (WAL end %s)", round+1, total, time.Since(genStart).Round(time.Millisecond), end)

		runRecv := func() time.Duration {
			start := time.Now()
			cmd := exec.Command(recv, "-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port()), "-U", "kura", "-d", "postgres",
				"--slot", a, "--start", "--endpos", end, "-o", "proto_version=1", "-o", "publication_names=kura_cdc", "-f", "/dev/null", "--no-loop")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("pg_recvlogical: %v %s", err, out)
			}
			return time.Since(start)
		}
		runKura := func() time.Duration {
			src, err := pgsource.New(pgsource.Options{ConnString: pg.DSN(), Mapping: mapping, Slot: b})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			rctx, cancel := context.WithCancel(ctx)
			start := time.Now()
			var took time.Duration
			done := make(chan error, 1)
			go func() {
				done <- cdc.Run(rctx, cdc.Options{Source: src, Mapping: mapping, Targets: targets,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
					OnApplied: func(ap cdc.Applied) {
						if l, ok := ap.Pos.(pgsource.LSN); ok && pglogrepl.LSN(l) >= endLSN && took == 0 {
							took = time.Since(start)
							cancel()
						}
					}})
			}()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			return took
		}
		var tr, tk time.Duration
		if round%2 == 0 {
			tr, tk = runRecv(), runKura()
		} else {
			tk, tr = runKura(), runRecv()
		}
		ratio := tr.Seconds() / tk.Seconds()
		ratios = append(ratios, ratio)
		recvRate, kuraRate = append(recvRate, float64(total)/tr.Seconds()), append(kuraRate, float64(total)/tk.Seconds())
		t.Logf("round %d: pg_recvlogical %v (%.0f rows/s), kura cdc -> Redis + memcached %v (%.0f rows/s): kura at %.2fx; load %s",
			round+1, tr.Round(time.Millisecond), float64(total)/tr.Seconds(), tk.Round(time.Millisecond), float64(total)/tk.Seconds(), ratio, loadavg())
		for _, s := range []string{a, b} {
			_, _ = pool.Exec(ctx, "SELECT pg_drop_replication_slot($1)", s)
		}
	}
	writeBenchJSON(t, map[string][]float64{"pg_recvlogical rows/s": recvRate, "kura cdc rows/s": kuraRate})
	sort.Float64s(ratios)
	t.Logf("throughput ratio kura/pg_recvlogical over %d rounds: median %.2fx, min %.2fx, max %.2fx", rounds, ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
}
