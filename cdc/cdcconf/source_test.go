package cdcconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	tablesJSON  = `"targets": [{"url": "redis://127.0.0.1:6379"}], "tables": [{"table": "items", "keys": [{"prefix": "item:", "column": "id"}]}]`
	kafkaSource = `"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "group": "kura", "topics": ["db.public.items"]}`
)

// TestDebeziumSource: a debezium source parses without a database, and each wrong field gets
// an error naming it.
func TestDebeziumSource(t *testing.T) {
	c, err := Parse([]byte(`{` + kafkaSource + `, ` + tablesJSON + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Source.debezium() || c.Source.Group != "kura" {
		t.Fatalf("source %+v", c.Source)
	}
	// the database Debezium reads, for the before-image check at start
	if _, err := Parse([]byte(`{` + kafkaSource + `, "database": {"url": "postgres://kura@127.0.0.1:5432/db"}, ` + tablesJSON + `}`)); err != nil {
		t.Errorf("debezium with database.url: %v", err)
	}
	if _, err := Parse([]byte(`{"source": {"kind": "postgres"}, "database": {"url": "postgres://kura@127.0.0.1:5432/db"}, ` + tablesJSON + `}`)); err != nil {
		t.Errorf("kind postgres: %v", err)
	}
	for _, tc := range []struct{ conf, field string }{
		{`"source": {"kind": "mysql"}`, "source.kind"},
		{`"source": {"kind": "debezium", "group": "g", "topics": ["t"]}`, "source.brokers"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "topics": ["t"]}`, "source.group"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "group": "g"}`, "source.topics"},
		{`"source": {"kind": "debezium", "brokers": [""], "group": "g", "topics": ["t"]}`, "source.brokers[0]"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092", "user:Sekr1t@127.0.0.1:9092"], "group": "g", "topics": ["t"]}`, "source.brokers[1]"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "group": "g", "topics": [""]}`, "source.topics[0]"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "group": "g", "topics": ["t"], "session_timeout_ms": -1}`, "source.session_timeout_ms"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "group": "g", "topics": ["t"], "grup": "x"}`, "grup"},
		{kafkaSource + `, "database": {"url": "postgres://kura@127.0.0.1:5432/db", "slot": "s"}`, "database.slot"},
		{kafkaSource + `, "database": {"password_file": "/tmp/pw"}`, "database.url"},
		{kafkaSource + `, "database": {"url": "postgres://kura:pw@127.0.0.1:5432/db"}`, "database.url"},
		{`"source": {"brokers": ["127.0.0.1:9092"]}, "database": {"url": "postgres://kura@127.0.0.1:5432/db"}`, "source.brokers"},
		{`"source": {"kind": "debezium"}, "database": {"url": "postgres://kura@127.0.0.1:5432/db"}`, "source.brokers"},
		{kafkaSource + `, "targets": []`, "targets"},
	} {
		conf := `{` + tc.conf + `, ` + tablesJSON + `}`
		if strings.Contains(tc.conf, `"targets"`) {
			conf = `{` + tc.conf + `, "tables": [{"table": "items", "keys": [{"prefix": "item:", "column": "id"}]}]}`
		}
		_, err := Parse([]byte(conf))
		if err == nil || !strings.Contains(err.Error(), tc.field) || strings.Contains(err.Error(), "Sekr1t") {
			t.Errorf("%s: error %v, want one naming %s", tc.conf, err, tc.field)
		}
	}
}

// TestPasswordFromEnvOrPassfileIsAccepted: docs/cdc.md gives the password
// through PGPASSWORD, a passfile or database.password_file; only one
// spelt in database.url itself is refused.
func TestPasswordFromEnvOrPassfileIsAccepted(t *testing.T) {
	pass := filepath.Join(t.TempDir(), "pgpass")
	if err := os.WriteFile(pass, []byte("*:*:*:*:from-the-passfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := func(url string) []byte {
		return []byte(`{"database": {"url": "` + url + `"}, ` + tablesJSON + `}`)
	}
	for _, env := range []struct{ name, value string }{{"PGPASSFILE", pass}, {"PGPASSWORD", "from-the-env"}} {
		t.Run(env.name, func(t *testing.T) {
			t.Setenv(env.name, env.value)
			for _, ok := range []string{"postgres://kura@127.0.0.1:5432/app", "host=127.0.0.1 user=kura dbname=app"} {
				if _, err := Parse(conf(ok)); err != nil {
					t.Errorf("%s with %s set: %v", ok, env.name, err)
				}
			}
			for _, bad := range []string{"postgres://kura:pw@127.0.0.1:5432/app", "postgres://kura@127.0.0.1:5432/app?password=pw", "host=127.0.0.1 password=pw", "host=127.0.0.1 password = pw"} {
				if _, err := Parse(conf(bad)); err == nil || !strings.Contains(err.Error(), "holds a password") {
					t.Errorf("%s: want the password refused, got %v", bad, err)
				}
			}
		})
	}
}
