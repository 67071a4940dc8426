package cdcconf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/staleness"
)

// Inspect configures the staleness inspector `kura cdc` runs beside its
// stream (package cdc/staleness): each round samples keys under the
// given prefixes on every target, reads the fresh value with the key's
// query, and counts the cached entries that differ.
type Inspect struct {
	// Database is where fresh values are read (url, password_file).
	// With the PostgreSQL source it may be left out: database is used.
	Database *Database `json:"database"`
	// Keys are the key prefixes to sample and the query that reads a
	// key's value.
	Keys []InspectKey `json:"keys"`
	// Sample is the keys a round checks per target (0: 100, at most
	// 10,000).
	Sample int `json:"sample"`
	// EverySeconds is the pause between rounds (0: 10).
	EverySeconds float64 `json:"every_seconds"`
	// GraceSeconds is how long a mismatch may take to be invalidated
	// before it counts as stale (0: 2).
	GraceSeconds float64 `json:"grace_seconds"`
	// MaxLoadsPerSecond paces the queries, per target (0: 50).
	MaxLoadsPerSecond float64 `json:"max_loads_per_second"`
}

// InspectKey is one kind of key the inspector samples.
type InspectKey struct {
	// Prefix is the keys' prefix (a kura.Keyed view's Prefix).
	Prefix string `json:"prefix"`
	// Query returns one row of one column: the value as the application
	// caches it, as JSON (json, jsonb or text), with its fields named as
	// the cached struct names them (docs/FORMAT.md's field-name rule:
	// the msgpack tag, else the json tag, else the Go name); no row
	// means the key does not exist. $1 is the key without its prefix.
	Query string `json:"query"`
}

func (in *Inspect) check(debezium bool) error {
	if in == nil {
		return nil
	}
	if len(in.Keys) == 0 {
		return errors.New("cdc config: inspect.keys is empty: give [{\"prefix\": \"item:\", \"query\": \"SELECT to_jsonb(i) FROM items i WHERE id = $1\"}]")
	}
	for i, k := range in.Keys {
		if k.Prefix == "" || !strings.Contains(k.Query, "$1") {
			return fmt.Errorf("cdc config: inspect.keys[%d] needs a prefix and a query reading $1 (the key without its prefix)", i)
		}
	}
	switch {
	case in.Database == nil && debezium:
		return errors.New("cdc config: inspect.database is required with source.kind \"debezium\": the database fresh values are read from")
	case in.Database != nil && in.Database.URL == "":
		return errors.New("cdc config: inspect.database.url is required")
	case in.Database != nil && (in.Database.Slot != "" || in.Database.Publication != ""):
		return errors.New("cdc config: inspect.database takes url and password_file only")
	case in.Database != nil && passwordInString(in.Database.URL):
		return errors.New("cdc config: inspect.database.url holds a password: give it in PGPASSWORD or inspect.database.password_file instead")
	case in.Sample < 0 || in.Sample > staleness.MaxSampleSize:
		return fmt.Errorf("cdc config: inspect.sample must be in [0, %d]", staleness.MaxSampleSize)
	case in.EverySeconds < 0 || (in.EverySeconds > 0 && in.EverySeconds < staleness.MinEvery.Seconds()):
		return fmt.Errorf("cdc config: inspect.every_seconds must be 0 or at least %v", staleness.MinEvery.Seconds())
	case in.GraceSeconds < 0 || in.MaxLoadsPerSecond < 0:
		return errors.New("cdc config: inspect.grace_seconds and max_loads_per_second must not be negative")
	}
	return nil
}

// Inspection is the inspectors of every target, as Inspectors built them.
type Inspection struct {
	// Inspectors are one per target, named as the target (Prometheus
	// collectors: register them).
	Inspectors []*staleness.Inspector[any]
	pool       *pgxpool.Pool
}

// Run runs every inspector until ctx ends.
func (x *Inspection) Run(ctx context.Context) {
	done := make(chan struct{}, len(x.Inspectors))
	for _, in := range x.Inspectors {
		go func() { _ = in.Run(ctx); done <- struct{}{} }()
	}
	for range x.Inspectors {
		<-done
	}
}

// Status is the inspectors' status lines joined with "; ".
func (x *Inspection) Status() string {
	var parts []string
	for _, in := range x.Inspectors {
		parts = append(parts, in.Status())
	}
	return strings.Join(parts, "; ")
}

// Close closes the connections to the database.
func (x *Inspection) Close() { x.pool.Close() }

// Inspectors builds the inspectors of the config's inspect section over
// targets (from Open), or returns nil when there is none.
func (c *Config) Inspectors(targets []cdc.Target, logger *slog.Logger) (*Inspection, error) {
	in := c.Inspect
	if in == nil {
		return nil, nil
	}
	db := c.Database
	if in.Database != nil {
		db = *in.Database
	}
	pc, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		return nil, errors.New("cdc config: inspect: the database url does not parse (not shown: it may hold a password)")
	}
	if db.PasswordFile != "" {
		b, err := os.ReadFile(db.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("cdc config: inspect: password_file: %w", err)
		}
		pc.ConnConfig.Password = strings.TrimRight(string(b), "\r\n")
	}
	pc.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), pc) // connects on first use
	if err != nil {
		return nil, fmt.Errorf("cdc config: inspect: %w", err)
	}
	x := &Inspection{pool: pool}
	load := jsonLoader(pool, in.Keys)
	for _, t := range targets {
		cache, err := kura.New[any](t.Store, kura.Options{Name: t.Name})
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("cdc config: inspect: target %s: %w", t.Name, err)
		}
		var pick []func(context.Context, int) ([]string, error)
		for _, k := range in.Keys {
			pick = append(pick, staleness.StoreKeys(t.Store, k.Prefix))
		}
		insp, err := staleness.New(cache, staleness.Options[any]{
			Keys: func(ctx context.Context, n int) ([]string, error) {
				var out []string
				for i, p := range pick {
					share := n / len(pick)
					if i < n%len(pick) {
						share++
					}
					ks, err := p(ctx, share)
					if err != nil {
						return nil, err
					}
					out = append(out, ks...)
				}
				return out, nil
			},
			Load: load, Equal: sameJSON, SampleSize: in.Sample,
			Every: seconds(in.EverySeconds), Grace: seconds(in.GraceSeconds),
			MaxLoadsPerSecond: in.MaxLoadsPerSecond, Logger: logger,
		})
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("cdc config: inspect: %w", err)
		}
		x.Inspectors = append(x.Inspectors, insp)
	}
	return x, nil
}

// seconds converts a count of seconds, saturated: a count beyond a
// Duration's range (about 292 years) is as long as one can be, not the
// negative Duration the conversion alone makes of it.
func seconds(s float64) time.Duration {
	if ns := s * float64(time.Second); ns < math.MaxInt64 {
		return time.Duration(ns)
	}
	return math.MaxInt64
}

// jsonLoader reads a key's value with the query of the longest prefix
// that starts it, as generic JSON.
func jsonLoader(pool *pgxpool.Pool, keys []InspectKey) kura.Loader[any] {
	return func(ctx context.Context, key string) (any, error) {
		best := -1
		for i, k := range keys {
			if strings.HasPrefix(key, k.Prefix) && (best < 0 || len(k.Prefix) > len(keys[best].Prefix)) {
				best = i
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("no inspect key prefix matches %q", key)
		}
		var doc []byte
		// The simple protocol sends $1 as a literal, which PostgreSQL
		// casts to the column's type (bigint, uuid, text).
		err := pool.QueryRow(ctx, keys[best].Query, pgx.QueryExecModeSimpleProtocol, strings.TrimPrefix(key, keys[best].Prefix)).Scan(&doc)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && doc == nil) {
			return nil, kura.ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(doc, &v); err != nil {
			return nil, fmt.Errorf("the query for %q did not return JSON: %w", keys[best].Prefix, err)
		}
		return v, nil
	}
}

// sameJSON compares a cached value (decoded from MessagePack or JSON into
// generic values) with a fresh one from JSON, as JSON sees them: numbers
// as float64, times as RFC 3339 strings, bytes as base64.
func sameJSON(cached, fresh any) bool {
	b, err := json.Marshal(cached)
	if err != nil {
		return false
	}
	var c any
	if err := json.Unmarshal(b, &c); err != nil {
		return false
	}
	return reflect.DeepEqual(c, fresh)
}
