// Package cdcconf reads the configuration file of `kura cdc`: the
// database, the cache targets and the tables' keys, in JSON (the standard
// library reads it strictly, so a misspelt field is an error that names
// it, and it adds no dependency; every field is documented in
// docs/cdc.md). Keys are the defaults a kura.Keyed view makes (a prefix
// and the id column in its text form, which is how Keyed formats integer
// and string ids) or a template; a custom key function needs the Go API.
package cdcconf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/debezium"
	"github.com/kuracache/kura/cdc/pgsource"
	"github.com/kuracache/kura/store/storeurl"
)

// Config is the file's content.
type Config struct {
	// Source selects where changes come from: absent or kind "postgres"
	// reads Database's logical replication; kind "debezium" reads
	// Debezium's change events from Kafka (Database, when given with url
	// and password_file only, is the PostgreSQL database Debezium reads:
	// cdc checks at start that its tables log the before image the
	// mapping needs).
	Source   *Source  `json:"source"`
	Database Database `json:"database"`
	Targets  []Target `json:"targets"`
	Tables   []Table  `json:"tables"`
	// MaxTxnKeys: cdc.Options.MaxTxnKeys (0: 10,000).
	MaxTxnKeys int `json:"max_txn_keys"`
	// MaxBatchKeys: cdc.Options.MaxBatchKeys (0: 5,000).
	MaxBatchKeys int `json:"max_batch_keys"`
	// MaxRetainedBytes: cdc.Options.MaxRetainedBytes (0: no ceiling).
	MaxRetainedBytes int64 `json:"max_retained_bytes"`
	// Inspect, when set, runs the staleness inspector (see Inspect).
	Inspect *Inspect `json:"inspect"`
}

// Database names the PostgreSQL primary.
type Database struct {
	// URL is a postgres:// URL or libpq string without a password.
	URL string `json:"url"`
	// PasswordFile holds the password (one line); else PGPASSWORD or
	// the passfile.
	PasswordFile string `json:"password_file"`
	Slot         string `json:"slot"`
	Publication  string `json:"publication"`
}

// Source is the change stream: PostgreSQL (the default) or Debezium on
// Kafka (debezium.Config's fields).
type Source struct {
	// Kind is "postgres" (the default) or "debezium".
	Kind string `json:"kind"`
	// Brokers are the Kafka seed brokers' host:port (debezium).
	Brokers []string `json:"brokers"`
	// Group is the consumer group; each cache fleet is a group of its
	// own (debezium).
	Group string `json:"group"`
	// Topics are Debezium's topics (debezium); with TopicRegex, regular
	// expressions.
	Topics     []string `json:"topics"`
	TopicRegex bool     `json:"topic_regex"`
	// SessionTimeoutMs is Kafka's session.timeout.ms (0: 10,000).
	SessionTimeoutMs int `json:"session_timeout_ms"`
}

func (s *Source) debezium() bool { return s != nil && s.Kind == "debezium" }

func (s *Source) check() error {
	if s == nil {
		return nil
	}
	switch s.Kind {
	case "", "postgres":
		if len(s.Brokers) > 0 || s.Group != "" || len(s.Topics) > 0 || s.TopicRegex || s.SessionTimeoutMs != 0 {
			return errors.New("cdc config: source.brokers, group, topics, topic_regex and session_timeout_ms are for source.kind \"debezium\"")
		}
		return nil
	case "debezium":
	default:
		return fmt.Errorf("cdc config: source.kind must be \"postgres\" or \"debezium\", not %q", s.Kind)
	}
	switch {
	case len(s.Brokers) == 0:
		return errors.New("cdc config: source.brokers is empty: give the Kafka brokers, e.g. [\"127.0.0.1:9092\"]")
	case s.Group == "":
		return errors.New("cdc config: source.group is required: the consumer group whose offsets cdc commits")
	case len(s.Topics) == 0:
		return errors.New("cdc config: source.topics is empty: give Debezium's topics, e.g. [\"dbserver1.public.items\"]")
	case s.SessionTimeoutMs < 0:
		return errors.New("cdc config: source.session_timeout_ms must not be negative")
	}
	for i, b := range s.Brokers {
		if b == "" {
			return fmt.Errorf("cdc config: source.brokers[%d] is empty", i)
		}
		if err := debezium.CheckBrokers([]string{b}); err != nil {
			return fmt.Errorf("cdc config: source.brokers[%d] is not host:port (not shown: it may hold a password); Kafka takes no user or password in a broker's address: write host:port, such as 127.0.0.1:9092", i)
		}
	}
	for i, tp := range s.Topics {
		if tp == "" {
			return fmt.Errorf("cdc config: source.topics[%d] is empty", i)
		}
	}
	return nil
}

// Target is one cache fleet, by store URL.
type Target struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// Table maps one table to its keys.
type Table struct {
	Table string `json:"table"`
	Keys  []Key  `json:"keys"`
}

// Key is one key per row: Prefix + the Column's text form, or Template.
type Key struct {
	Prefix   string `json:"prefix"`
	Column   string `json:"column"`
	Template string `json:"template"`
}

// Load reads and checks the file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cdc config: %w", err)
	}
	return Parse(b)
}

// Parse reads and checks a configuration. Errors name the field.
func Parse(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("cdc config: not valid JSON at byte %d: %v", se.Offset, se)
		case errors.As(err, &te):
			return nil, fmt.Errorf("cdc config: field %s must be a %s, not a JSON %s", te.Field, te.Type, te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field"):
			return nil, fmt.Errorf("cdc config: %s (the fields are source, database, targets, tables, max_txn_keys, max_batch_keys, max_retained_bytes, inspect)", strings.TrimPrefix(err.Error(), "json: "))
		}
		return nil, fmt.Errorf("cdc config: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("cdc config: text after the configuration object")
	}
	return &c, c.check()
}

func (c *Config) check() error {
	if err := c.Source.check(); err != nil {
		return err
	}
	if err := c.Inspect.check(c.Source.debezium()); err != nil {
		return err
	}
	if c.Source.debezium() {
		if c.Database.Slot != "" || c.Database.Publication != "" {
			return errors.New("cdc config: database.slot and database.publication are for the PostgreSQL source; with source.kind \"debezium\" give database.url (and password_file) only, to check the before image at start")
		}
		if c.Database == (Database{}) {
			return c.checkRest()
		}
		if c.Database.URL == "" {
			return errors.New("cdc config: database.url is required with database.password_file (postgres://user@127.0.0.1:5432/dbname)")
		}
	} else if c.Database.URL == "" {
		return errors.New("cdc config: database.url is required (postgres://user@127.0.0.1:5432/dbname)")
	}
	pc, err := pgconn.ParseConfig(c.Database.URL)
	if err != nil {
		// Not echoed, not even masked: a string that does not parse has
		// no certain password boundaries (a quote left open, a "/" or
		// "@" in a password), so any mask may leave part of it showing.
		return errors.New("cdc config: database.url does not parse (not shown: it may hold a password); give postgres://user@127.0.0.1:5432/dbname?sslmode=disable, with / # ? @ % in a part URL-escaped, or libpq's host=... user=... dbname=... with a value holding spaces in single quotes")
	}
	if pc.Password != "" && passwordInString(c.Database.URL) {
		return errors.New("cdc config: database.url holds a password: give it in PGPASSWORD or database.password_file instead, so it appears in no file listing or process table")
	}
	return c.checkRest()
}

// passwordInString reports whether a connection string spells a password
// itself. pgconn.ParseConfig's Password does not tell: it also comes from
// PGPASSWORD or the passfile, where the password belongs.
func passwordInString(s string) bool {
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return true // pgconn read it and found a password; take no chance
		}
		_, has := u.User.Password()
		return has || u.Query().Has("password")
	}
	return keywordPassword.MatchString(s)
}

var keywordPassword = regexp.MustCompile(`(^|\s)password\s*=`)

func (c *Config) checkRest() error {
	if len(c.Targets) == 0 {
		return errors.New("cdc config: targets is empty: give at least one {\"url\": \"redis://127.0.0.1:6379\"}")
	}
	named := make(map[string]int, len(c.Targets))
	for i, t := range c.Targets {
		if t.URL == "" {
			return fmt.Errorf("cdc config: targets[%d].url is required", i)
		}
		tg, err := storeurl.ParseServer(t.URL)
		if err != nil {
			return fmt.Errorf("cdc config: targets[%d].url: %w", i, err)
		}
		// The name labels the target's metrics, the inspector's and the
		// status line: two alike would make the Prometheus registry
		// refuse the second inspector (a panic in kura cdc --metrics).
		name := targetName(t, tg, i)
		if j, dup := named[name]; dup {
			return fmt.Errorf("cdc config: targets[%d] and targets[%d] are both named %q; give each a name of its own", j, i, name)
		}
		named[name] = i
	}
	if len(c.Tables) == 0 {
		return errors.New("cdc config: tables is empty: map at least one table to its keys")
	}
	if _, err := c.Mapping(); err != nil {
		return err
	}
	if c.MaxTxnKeys < 0 || c.MaxBatchKeys < 0 || c.MaxRetainedBytes < 0 {
		return errors.New("cdc config: max_txn_keys, max_batch_keys and max_retained_bytes must not be negative")
	}
	return nil
}

// Mapping builds the rules of the tables.
func (c *Config) Mapping() (*cdc.Mapping, error) {
	var rules []cdc.Rule
	for i, t := range c.Tables {
		if t.Table == "" {
			return nil, fmt.Errorf("cdc config: tables[%d].table is required", i)
		}
		if len(t.Keys) == 0 {
			return nil, fmt.Errorf("cdc config: tables[%d].keys is empty (table %s)", i, t.Table)
		}
		for j, k := range t.Keys {
			field := fmt.Sprintf("tables[%d].keys[%d]", i, j)
			tmpl := k.Template
			switch {
			case tmpl != "" && (k.Prefix != "" || k.Column != ""):
				return nil, fmt.Errorf("cdc config: %s: give either prefix and column or template, not both", field)
			case tmpl == "" && (k.Prefix == "" || k.Column == ""):
				return nil, fmt.Errorf("cdc config: %s: give prefix and column (the Keyed view's prefix and the id column), or template", field)
			case tmpl == "":
				if strings.ContainsAny(k.Prefix+k.Column, "{}") {
					return nil, fmt.Errorf("cdc config: %s: prefix and column must not hold braces", field)
				}
				tmpl = k.Prefix + "{" + k.Column + "}"
			}
			r, err := cdc.Template(t.Table, tmpl)
			if err != nil {
				return nil, fmt.Errorf("cdc config: %s.template: %w", field, err)
			}
			rules = append(rules, r)
		}
	}
	return cdc.NewMapping(rules...)
}

// Open connects the targets and builds the source: what cdc.Run needs.
// The caller closes the returned stores and the source.
func (c *Config) Open(ctx context.Context) (cdc.Options, io.Closer, error) {
	m, err := c.Mapping()
	if err != nil {
		return cdc.Options{}, nil, err
	}
	var (
		src    cdc.Source
		closer io.Closer
	)
	if c.Source.debezium() {
		cfg := debezium.Config{Brokers: c.Source.Brokers, Group: c.Source.Group,
			Topics: c.Source.Topics, TopicRegex: c.Source.TopicRegex,
			SessionTimeout: time.Duration(c.Source.SessionTimeoutMs) * time.Millisecond}
		if c.Database.URL != "" {
			password, err := c.Database.password()
			if err != nil {
				return cdc.Options{}, nil, err
			}
			cfg.CheckBeforeImage = debezium.PostgresBeforeImage(pgsource.Options{ConnString: c.Database.URL, Password: password, Mapping: m})
		}
		ks, err := debezium.NewSource(cfg)
		if err != nil {
			return cdc.Options{}, nil, fmt.Errorf("cdc config: source: %w", err)
		}
		src, closer = ks, ks
	} else {
		ps, err := c.openPostgres(m)
		if err != nil {
			return cdc.Options{}, nil, err
		}
		src, closer = ps, ps
	}
	opts := cdc.Options{Source: src, Mapping: m, MaxTxnKeys: c.MaxTxnKeys, MaxBatchKeys: c.MaxBatchKeys, MaxRetainedBytes: c.MaxRetainedBytes}
	for i, t := range c.Targets {
		s, err := storeurl.Open(ctx, t.URL)
		if err != nil {
			CloseTargets(opts.Targets)
			_ = closer.Close()
			return cdc.Options{}, nil, fmt.Errorf("cdc config: targets[%d]: %w", i, err)
		}
		tg, _ := storeurl.ParseServer(t.URL)
		opts.Targets = append(opts.Targets, cdc.Target{Name: targetName(t, tg, i), Store: s})
	}
	return opts, closer, nil
}

// targetName is the name of targets[i]: its own, else its kind and
// number ("redis2").
func targetName(t Target, tg storeurl.Target, i int) string {
	if t.Name != "" {
		return t.Name
	}
	return fmt.Sprintf("%s%d", tg.Kind, i+1)
}

// password reads password_file ("" when there is none).
func (d Database) password() (string, error) {
	if d.PasswordFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(d.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("cdc config: database.password_file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func (c *Config) openPostgres(m *cdc.Mapping) (*pgsource.Source, error) {
	password, err := c.Database.password()
	if err != nil {
		return nil, err
	}
	return pgsource.New(pgsource.Options{ConnString: c.Database.URL, Password: password, Mapping: m, Slot: c.Database.Slot, Publication: c.Database.Publication})
}

// CloseTargets closes the targets' stores.
func CloseTargets(ts []cdc.Target) {
	for _, t := range ts {
		_ = t.Store.Close()
	}
}
