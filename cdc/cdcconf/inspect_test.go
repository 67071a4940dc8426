package cdcconf_test

import (
	"strings"
	"testing"

	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/cdcconf"
	"github.com/kuracache/kura/store/memstore"
)

// TestInspectConfig: the inspect section's mistakes are errors that name
// the field; a password in its URL is refused without being shown.
func TestInspectConfig(t *testing.T) {
	const rest = `"targets": [{"url": "redis://127.0.0.1:1"}], "tables": [{"table": "t", "keys": [{"prefix": "t:", "column": "id"}]}]`
	const pg = `"database": {"url": "postgres://kura@127.0.0.1:1/x"}, `
	const dbz = `"source": {"kind": "debezium", "brokers": ["127.0.0.1:9092"], "group": "g", "topics": ["t"]}, `
	const key = `"keys": [{"prefix": "t:", "query": "SELECT to_jsonb(t) FROM t WHERE id = $1"}]`
	for _, tc := range []struct{ conf, want string }{
		{pg + rest + `, "inspect": {}`, "inspect.keys is empty"},
		{pg + rest + `, "inspect": {"keys": [{"prefix": "t:", "query": "SELECT 1"}]}`, "inspect.keys[0]"},
		{dbz + rest + `, "inspect": {` + key + `}`, "inspect.database is required"},
		{pg + rest + `, "inspect": {` + key + `, "sample": 1000000000}`, "inspect.sample"},
		{pg + rest + `, "inspect": {` + key + `, "every_seconds": 0.001}`, "inspect.every_seconds"},
		{pg + rest + `, "inspect": {` + key + `, "grace_seconds": -1}`, "grace_seconds"},
		{pg + rest + `, "inspect": {` + key + `, "database": {"url": "postgres://kura:Sekr1t@127.0.0.1:1/x"}}`, "holds a password"},
		{pg + rest + `, "inspect": {` + key + `, "sampel": 3}`, `unknown field "sampel"`},
	} {
		_, err := cdcconf.Parse([]byte("{" + tc.conf + "}"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "Sekr1t") {
			t.Errorf("%s:\ngot %v\nwant it to name %q", tc.conf, err, tc.want)
		}
	}
	for _, ok := range []string{pg + rest + `, "inspect": {` + key + `}`, dbz + rest + `, "inspect": {` + key + `, "database": {"url": "postgres://kura@127.0.0.1:1/x"}}`} {
		if _, err := cdcconf.Parse([]byte("{" + ok + "}")); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestInspectLongDurations: every_seconds and grace_seconds beyond a
// Duration's range mean as long as can be; they overflowed into a
// negative Duration, which the inspector refused as "negative".
func TestInspectLongDurations(t *testing.T) {
	conf := `{"database": {"url": "postgres://kura@127.0.0.1:1/x"}, "targets": [{"url": "redis://127.0.0.1:1"}],
 "tables": [{"table": "t", "keys": [{"prefix": "t:", "column": "id"}]}],
 "inspect": {"keys": [{"prefix": "t:", "query": "SELECT to_jsonb(t) FROM t WHERE id = $1"}], "every_seconds": 1e12, "grace_seconds": 1e12}}`
	c, err := cdcconf.Parse([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	st, err := memstore.New(memstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	x, err := c.Inspectors([]cdc.Target{{Name: "m", Store: st}}, nil)
	if err != nil {
		t.Fatalf("every_seconds and grace_seconds of 1e12: %v", err)
	}
	x.Close()
}
