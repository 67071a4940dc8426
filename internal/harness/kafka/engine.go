package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrEngineStopped reports that the Debezium engine ended; the error's text carries the
// engine's own message (a connector's refusal, a lost database connection).
var ErrEngineStopped = errors.New("debezium engine stopped")

// EngineConfig configures a Debezium embedded engine that writes change events to a broker.
type EngineConfig struct {
	// Broker is the broker's host:port (bootstrap.servers of the engine's producer).
	Broker string
	// Props are the engine's and connector's properties (connector.class, database.*,
	// topic.prefix, ...); PostgresProps builds a set. The harness adds offset storage in the
	// engine's directory unless Props sets offset.storage.
	Props map[string]string
	// Heap is the JVM's -Xmx ("" means Heap).
	Heap string
	// StartTimeout bounds the wait for the connector to stream (0 means 120 s: a snapshot and a
	// JVM start on a loaded 2-core machine).
	StartTimeout time.Duration
}

// Engine is a running Debezium embedded engine (one JVM, one connector).
type Engine struct {
	// Dir is the engine's directory (properties, offsets, log), removed by Stop. Restart keeps
	// it, so the engine resumes from its stored offsets.
	Dir string
	// StartTook is how long the last start took, JVM launch to the connector streaming.
	StartTook time.Duration

	cfg EngineConfig
	j   *jvm
}

// PostgresSource describes the database a PostgreSQL connector reads.
type PostgresSource struct {
	// Host and Port of the server (loopback).
	Host string
	Port int
	// User, Password and Database to connect with; the user needs REPLICATION (or superuser).
	User, Password, Database string
	// Tables is table.include.list ("public.products,public.orders").
	Tables string
	// Prefix is topic.prefix: topics are Prefix.schema.table and Prefix.transaction.
	Prefix string
	// Slot and Publication name the replication slot and publication (created when absent).
	Slot, Publication string
	// Schemas sets converter.schemas.enable: each key and value carries its schema.
	Schemas bool
	// Snapshot is snapshot.mode ("" means "initial").
	Snapshot string
	// PollInterval is poll.interval.ms, how long the connector waits for events to fill a batch
	// before handing it on (0 means 50 ms; Debezium's own default, 500 ms, is most of the
	// commit -> Kafka lag on a quiet table).
	PollInterval time.Duration
}

// PostgresProps returns the engine properties for Debezium's PostgreSQL connector over pgoutput,
// with transaction metadata on and TRUNCATE events kept (Debezium drops them by default).
func PostgresProps(src PostgresSource) map[string]string {
	snap := src.Snapshot
	if snap == "" {
		snap = "initial"
	}
	poll := src.PollInterval
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	schemas := "false"
	if src.Schemas {
		schemas = "true"
	}
	return map[string]string{
		"name":                         "kura-" + src.Prefix,
		"connector.class":              "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname":            src.Host,
		"database.port":                itoa(src.Port),
		"database.user":                src.User,
		"database.password":            src.Password,
		"database.dbname":              src.Database,
		"plugin.name":                  "pgoutput",
		"slot.name":                    src.Slot,
		"publication.name":             src.Publication,
		"publication.autocreate.mode":  "filtered",
		"table.include.list":           src.Tables,
		"topic.prefix":                 src.Prefix,
		"provide.transaction.metadata": "true",
		"skipped.operations":           "none",
		"converter.schemas.enable":     schemas,
		"snapshot.mode":                snap,
		"offset.flush.interval.ms":     "1000",
		"poll.interval.ms":             itoa(int(poll.Milliseconds())),
	}
}

// StartEngine starts a Debezium engine in a fresh directory and returns once its connector
// streams (its streaming metrics say connected: snapshot done, slot or binlog reader live), or with ErrEngineStopped and the connector's
// message when the engine ended first.
func StartEngine(ctx context.Context, cfg EngineConfig) (*Engine, error) {
	build, err := Compile(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.Broker == "" {
		return nil, errors.New("kafka harness: EngineConfig.Broker is empty")
	}
	dir, err := os.MkdirTemp("", "kura-debezium-")
	if err != nil {
		return nil, err
	}
	props := map[string]string{}
	for k, v := range cfg.Props {
		props[k] = v
	}
	if _, ok := props["offset.storage"]; !ok {
		props["offset.storage"] = "org.apache.kafka.connect.storage.FileOffsetBackingStore"
		props["offset.storage.file.filename"] = filepath.Join(dir, "offsets.dat")
	}
	if _, ok := props["schema.history.internal"]; !ok && strings.Contains(props["connector.class"], "mysql") {
		props["schema.history.internal"] = "io.debezium.storage.file.history.FileSchemaHistory"
		props["schema.history.internal.file.filename"] = filepath.Join(dir, "schema-history.dat")
	}
	props["producer.bootstrap.servers"] = cfg.Broker
	propsPath := filepath.Join(dir, "engine.properties")
	if err := writeProps(propsPath, props, []string{"name", "connector.class"}); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args, err := jvmArgs(cfg.Heap, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	j := &jvm{name: "debezium engine", dir: dir, logPath: filepath.Join(dir, "engine.log")}
	j.args = append(args, "-cp", build.Classpath, "dev.kura.harness.DebeziumToKafka", propsPath)
	e := &Engine{Dir: dir, cfg: cfg, j: j}
	if err := e.launch(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return e, nil
}

func (e *Engine) launch(ctx context.Context) error {
	start := time.Now()
	if err := e.j.launch(); err != nil {
		return err
	}
	limit := e.cfg.StartTimeout
	if limit <= 0 {
		limit = 120 * time.Second
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	_, done, lines := e.j.current()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				<-done
				return fmt.Errorf("%w before it streamed:\n%s", ErrEngineStopped, e.j.Log())
			}
			if line == "streaming" {
				e.StartTook = time.Since(start)
				return nil
			}
			if msg, ok := strings.CutPrefix(line, "streaming-unknown "); ok {
				e.j.kill()
				return fmt.Errorf("debezium engine: cannot tell whether it streams: %s", msg)
			}
			if msg, ok := strings.CutPrefix(line, "stopped "); ok {
				e.j.kill()
				return fmt.Errorf("%w before it streamed: %s", ErrEngineStopped, msg)
			}
		case <-timer.C:
			e.j.kill()
			return fmt.Errorf("debezium engine did not stream within %v:\n%s", limit, e.j.Log())
		case <-ctx.Done():
			e.j.kill()
			return ctx.Err()
		}
	}
}

// Log returns the tail of the engine's log, for error messages.
func (e *Engine) Log() string { return e.j.Log() }

// Exited reports whether the engine's JVM has ended.
func (e *Engine) Exited() bool { return e.j.exited() }

// Kill ends the engine at once with SIGKILL, as a crash would: events it wrote to Kafka whose
// offsets it had not stored yet are written again after Restart (at-least-once).
func (e *Engine) Kill() { e.j.kill() }

// Restart kills the engine if it runs and starts it again from its stored offsets.
func (e *Engine) Restart(ctx context.Context) error {
	e.j.kill()
	return e.launch(ctx)
}

// Stop asks the engine to stop (it commits its offsets), then removes its directory. It is safe
// to call more than once. The replication slot stays in the database.
func (e *Engine) Stop() {
	e.j.stop(10 * time.Second)
	_ = os.RemoveAll(e.Dir)
}
