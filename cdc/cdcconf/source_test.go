package cdcconf

import (
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
	if _, err := Parse([]byte(`{"source": {"kind": "postgres"}, "database": {"url": "postgres://kura@127.0.0.1:5432/db"}, ` + tablesJSON + `}`)); err != nil {
		t.Errorf("kind postgres: %v", err)
	}
	for _, tc := range []struct{ conf, field string }{
		{`"source": {"kind": "mysql"}`, "source.kind"},
		{`"source": {"kind": "debezium", "group": "g", "topics": ["t"]}`, "source.brokers"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "topics": ["t"]}`, "source.group"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "group": "g"}`, "source.topics"},
		{`"source": {"kind": "debezium", "brokers": [""], "group": "g", "topics": ["t"]}`, "source.brokers[0]"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "group": "g", "topics": [""]}`, "source.topics[0]"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "group": "g", "topics": ["t"], "session_timeout_ms": -1}`, "source.session_timeout_ms"},
		{`"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "group": "g", "topics": ["t"], "grup": "x"}`, "grup"},
		{kafkaSource + `, "database": {"url": "postgres://kura@127.0.0.1:5432/db"}`, "database"},
		{`"source": {"brokers": ["127.0.0.1:9092"]}, "database": {"url": "postgres://kura@127.0.0.1:5432/db"}`, "source.brokers"},
		{`"source": {"kind": "debezium"}, "database": {"url": "postgres://kura@127.0.0.1:5432/db"}`, "source.brokers"},
		{kafkaSource + `, "targets": []`, "targets"},
	} {
		conf := `{` + tc.conf + `, ` + tablesJSON + `}`
		if strings.Contains(tc.conf, `"targets"`) {
			conf = `{` + tc.conf + `, "tables": [{"table": "items", "keys": [{"prefix": "item:", "column": "id"}]}]}`
		}
		_, err := Parse([]byte(conf))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming %s", tc.conf, err, tc.field)
		}
	}
}
