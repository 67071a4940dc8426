package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/cdcconf"
	"github.com/kuracache/kura/cdc/debezium"
)

func newCDCCmd() *cobra.Command {
	var (
		config      string
		metricsAddr string
		every       time.Duration
		untilCaught bool
	)
	cmd := &cobra.Command{
		Use:   "cdc --config FILE",
		Short: "Invalidate the cache from PostgreSQL's own change stream, for writes that never call kura",
		Long: `cdc reads PostgreSQL's logical replication stream (pgoutput) and invalidates,
at each commit, the cache keys of every changed row on every target, so a
write from psql, a migration or another service cannot leave a stale value
until its TTL. It confirms a position to PostgreSQL only after every
invalidation up to it landed on every target, so a crash loses nothing: the
next run resumes from the confirmed position. A target that is down holds
the position back (PostgreSQL keeps the WAL) until max_retained_bytes.

PostgreSQL needs wal_level = logical and a role with REPLICATION; every mapped
table needs a replica identity carrying its key columns (cdc says which
ALTER TABLE fixes it). The publication and the slot are created if absent.
The password comes from PGPASSWORD or database.password_file, never the URL.

The config file is JSON: database {url, password_file, slot, publication},
targets [{name, url}], tables [{table, keys [{prefix, column} or {template}]}],
max_txn_keys, max_batch_keys, max_retained_bytes. A key {prefix, column} is
what a kura.Keyed view with that Prefix reads; a template spells the key with
{column} placeholders ("items:cat:{category}"). See docs/cdc.md.

A status line goes to stdout every --status-every; --metrics serves
Prometheus metrics (prefix kura_cdc_) on /metrics and the line on /status.
Run a second cdc on the same slot as a standby: it takes over when the active
one dies. An "inspect" section ({keys [{prefix, query}], sample, every_seconds,
grace_seconds}) samples cached keys, reads each fresh with its query (the
value as JSON, $1 the key without its prefix) and adds how many were stale to
the status line and the metrics (kura_staleness_*).

Fleets that run Debezium on Kafka give "source": {"kind": "debezium",
"brokers": ["127.0.0.1:9092"], "group": "kura", "topics": [...]} instead of
database: the same keys and delivery, with the group's offsets committed only
after the invalidations landed; --until-caught-up waits for the group's
commits to pass the topics' ends read at the start.`,
		Example: `  # PostgreSQL (wal_level=logical) on 127.0.0.1:5432, Redis on 6379, memcached on 11211
  cat > cdc.json <<'EOF'
  {"database": {"url": "postgres://kura@127.0.0.1:5432/postgres?sslmode=disable"},
   "targets": [{"name": "redis", "url": "redis://127.0.0.1:6379"},
               {"name": "memcached", "url": "memcached://127.0.0.1:11211"}],
   "tables": [{"table": "items", "keys": [{"prefix": "item:", "column": "id"},
                                          {"template": "items:cat:{category}"}]}]}
  EOF
  psql -h 127.0.0.1 -U kura -d postgres -c 'CREATE TABLE IF NOT EXISTS items (id bigint PRIMARY KEY, category text)' \
       -c 'ALTER TABLE items REPLICA IDENTITY FULL'
  kura cdc --config cdc.json --until-caught-up
  kura cdc --config cdc.json --metrics 127.0.0.1:9187`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if config == "" {
				return errors.New("--config is required: the JSON file naming the database, the targets and the tables' keys (see kura cdc --help)")
			}
			if every <= 0 {
				return fmt.Errorf("--status-every: must be above zero (got %v)", every)
			}
			conf, err := cdcconf.Load(config)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			opts, src, err := conf.Open(ctx)
			if err != nil {
				return err
			}
			defer src.Close()
			defer cdcconf.CloseTargets(opts.Targets)
			inspect := func(l *slog.Logger) (*cdcconf.Inspection, error) { return conf.Inspectors(opts.Targets, l) }
			return runCDC(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), opts, inspect, metricsAddr, every, untilCaught)
		},
	}
	f := cmd.Flags()
	f.StringVar(&config, "config", "", "the JSON config file (database or source, targets, tables)")
	f.StringVar(&metricsAddr, "metrics", "", "serve Prometheus metrics on /metrics and the status line on /status at this address (e.g. 127.0.0.1:9187)")
	f.DurationVar(&every, "status-every", 10*time.Second, "how often to print the status line")
	f.BoolVar(&untilCaught, "until-caught-up", false, "exit 0 once every change committed before the start is applied on every target (Debezium: every event on Kafka at the start)")
	return cmd
}

func runCDC(ctx context.Context, out, errOut io.Writer, opts cdc.Options, inspect func(*slog.Logger) (*cdcconf.Inspection, error), metricsAddr string, every time.Duration, untilCaught bool) error {
	// The log (from cdc's goroutines) and the status lines may share one
	// writer: one line at a time.
	var mu sync.Mutex
	out, errOut = &lockedWriter{w: out, mu: &mu}, &lockedWriter{w: errOut, mu: &mu}
	m := cdc.NewMetrics()
	opts.Metrics = m
	opts.Logger = slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	status := m.Status
	insp, err := inspect(opts.Logger)
	if err != nil {
		return err
	}
	if insp != nil { // the staleness inspector's line follows cdc's
		defer insp.Close()
		status = func() string { return m.Status() + "; " + insp.Status() }
		done := make(chan struct{})
		go func() { insp.Run(ctx); close(done) }()
		defer func() { <-done }()
		defer cancel()
	}
	if metricsAddr != "" {
		ln, err := net.Listen("tcp", metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(m)
		if insp != nil {
			for _, in := range insp.Inspectors {
				if err := reg.Register(in); err != nil {
					_ = ln.Close()
					return fmt.Errorf("--metrics: the staleness inspector's metrics: %w", err)
				}
			}
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, status()) })
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		fmt.Fprintf(out, "cdc: metrics on http://%s/metrics, status on /status\n", ln.Addr())
	}
	if untilCaught {
		if ks, ok := opts.Source.(*debezium.KafkaSource); ok {
			// Caught up: the group's committed offsets (committed only
			// after the invalidations landed) at or past the topics' ends
			// read at the start.
			mark, err := ks.Mark(ctx)
			if err != nil {
				return fmt.Errorf("--until-caught-up: reading the topics' end offsets: %w", err)
			}
			go untilReached(ctx, ks, mark, opts.Logger, cancel)
		} else {
			// Caught up: the first batch confirmed after the start whose
			// position is at or past the WAL head read at the start.
			bl, err := opts.Source.Backlog(ctx)
			if err != nil {
				return fmt.Errorf("cdc: reading the database's position: %w", err)
			}
			head := bl.Head
			prev := opts.OnApplied
			opts.OnApplied = func(a cdc.Applied) {
				if prev != nil {
					prev(a)
				}
				if a.Pos != nil && lsnAtLeast(a.Pos.String(), head) {
					cancel()
				}
			}
		}
	}
	done := make(chan error, 1)
	go func() { done <- cdc.Run(ctx, opts) }()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			fmt.Fprintln(out, status())
			return err
		case <-t.C:
			fmt.Fprintln(out, status())
		}
	}
}

// untilReached asks the broker every 200 ms whether the group's commits reached mark, and
// calls done once they have (or returns when ctx ends). An error (the group coordinator not
// up yet) is asked again.
func untilReached(ctx context.Context, ks *debezium.KafkaSource, mark debezium.Mark, l *slog.Logger, done func()) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := ks.Reached(ctx, mark)
		if ok {
			l.Info("cdc: caught up: the group committed past the topics' ends read at the start", "mark", mark.String())
			done()
			return
		}
		if err != nil && ctx.Err() == nil {
			l.Debug("cdc: the group's committed offsets", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lsnAtLeast compares two PostgreSQL LSNs in their text form (X/Y).
func lsnAtLeast(a, b string) bool {
	var ah, al, bh, bl uint64
	if _, err := fmt.Sscanf(a, "%X/%X", &ah, &al); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(b, "%X/%X", &bh, &bl); err != nil {
		return true
	}
	return ah<<32|al >= bh<<32|bl
}
