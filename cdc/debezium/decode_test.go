package debezium

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/kafka"
)

// loadFixtures reads a capture of testdata/: records of Debezium 3.6.1's PostgreSQL connector
// writing to Kafka (internal/harness/kafka's TestDebeziumPostgres with KURA_DEBEZIUM_CAPTURE).
func loadFixtures(t testing.TB, name string) []kafka.Captured {
	t.Helper()
	out, err := kafka.ReadCapture(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no records", name)
	}
	return out
}

// decodeAll decodes a fixture file into messages keyed by "table-or-transaction/offset".
func decodeAll(t *testing.T, name string) map[string]Message {
	t.Helper()
	out := map[string]Message{}
	for _, fx := range loadFixtures(t, name) {
		k, v := fx.Bytes()
		m, err := Decode(k, v)
		if err != nil {
			t.Fatalf("%s %s@%d: %v", name, fx.Topic, fx.Offset, err)
		}
		_, rest, _ := strings.Cut(fx.Topic, ".")
		out[rest+"/"+itoa64(fx.Offset)] = m
	}
	return out
}

func itoa64(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestFixturesBothFormats decodes the records of a real run with schemas off and on: the two
// formats decode to the same messages (but for the topic prefix and the raw source block).
func TestFixturesBothFormats(t *testing.T) {
	plain := decodeAll(t, "postgres15-json.jsonl")
	schemas := decodeAll(t, "postgres15-json-schemas.jsonl")
	if len(plain) != len(schemas) {
		t.Fatalf("%d plain records, %d with schemas", len(plain), len(schemas))
	}
	norm := func(m Message) Message {
		if m.Change != nil {
			c := *m.Change
			c.Source.Name, c.Source.Raw, c.TsMs = "", nil, 0
			if c.Source.Snapshot != "false" {
				// each engine's snapshot is a transaction of its own
				c.Source.TsMs, c.Source.LSN, c.Source.TxID = 0, 0, 0
			}
			m.Change = &c
		}
		return m
	}
	kinds := map[Kind]int{}
	for k, m := range plain {
		s, ok := schemas[k]
		if !ok {
			t.Fatalf("%s: missing with schemas", k)
		}
		kinds[m.Kind]++
		a, b := norm(m), norm(s)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: plain %+v\nschemas %+v", k, a.Change, b.Change)
		}
	}
	if kinds[KindChange] == 0 || kinds[KindTombstone] == 0 || kinds[KindTransaction] == 0 {
		t.Fatalf("kinds %v: the fixtures lack a kind", kinds)
	}
}

// TestFixtureEvents checks what the decoder makes of the events that matter to invalidation.
func TestFixtureEvents(t *testing.T) {
	var ups, dels, truncs, tombs, begins, ends int
	var sawFullBefore, sawKeyOnlyBefore, sawNilBefore, sawUnavailable, sawTxBlock bool
	for _, fx := range loadFixtures(t, "postgres15-json.jsonl") {
		k, v := fx.Bytes()
		m, err := Decode(k, v)
		if err != nil {
			t.Fatal(err)
		}
		switch m.Kind {
		case KindTombstone:
			tombs++
			if m.Key == nil || m.Key.IsNull("id") {
				t.Errorf("%s@%d: tombstone without key id", fx.Topic, fx.Offset)
			}
		case KindTransaction:
			switch m.Transaction.Status {
			case "BEGIN":
				begins++
			case "END":
				ends++
				if m.Transaction.EventCount <= 0 || len(m.Transaction.Collections) == 0 {
					t.Errorf("END without counts: %+v", m.Transaction)
				}
			}
		case KindChange:
			c := m.Change
			if c.Source.Connector != "postgresql" || c.Source.Schema != "public" || c.Source.TsMs == 0 {
				t.Errorf("%s@%d: source %+v", fx.Topic, fx.Offset, c.Source)
			}
			if !strings.HasSuffix(fx.Topic, "."+c.Source.Table) {
				t.Errorf("topic %s, source table %s", fx.Topic, c.Source.Table)
			}
			if c.Transaction != nil {
				sawTxBlock = true
				if c.Source.Snapshot != "false" {
					t.Errorf("snapshot event with a transaction block")
				}
			}
			switch c.Op {
			case OpUpdate:
				ups++
				switch c.Source.Table {
				case "products": // REPLICA IDENTITY FULL: the old index value is there
					if old, ok := c.Before.Text("category"); !ok || old == "" {
						t.Errorf("products update without before.category")
					}
					sawFullBefore = true
				default: // REPLICA IDENTITY DEFAULT: no before image
					if c.Before != nil {
						t.Errorf("%s update with before %v", c.Source.Table, c.Before)
					}
					sawNilBefore = true
				}
				if c.After.IsUnavailable("body") {
					sawUnavailable = true
				}
			case OpDelete:
				dels++
				if c.Source.Table == "orders" {
					if !c.Before.IsNull("qty") || c.Before.IsNull("id") {
						t.Errorf("orders delete under DEFAULT identity: before %v", c.Before)
					}
					sawKeyOnlyBefore = true
				}
				id, _ := c.Before.Text("id")
				kid, _ := m.Key.Text("id")
				if id != kid {
					t.Errorf("delete: key id %q, before id %q", kid, id)
				}
			case OpTruncate:
				truncs++
				if m.Key != nil || c.Source.Table != "orders" {
					t.Errorf("truncate: key %v, table %q", m.Key, c.Source.Table)
				}
			}
		}
	}
	if ups != 4 || dels != 3 || truncs != 1 || tombs != 3 || begins != ends || begins == 0 {
		t.Errorf("updates %d deletes %d truncates %d tombstones %d begins %d ends %d", ups, dels, truncs, tombs, begins, ends)
	}
	if !sawFullBefore || !sawKeyOnlyBefore || !sawNilBefore || !sawUnavailable || !sawTxBlock {
		t.Errorf("full before %v, key-only before %v, nil before %v, unavailable TOAST %v, tx block %v",
			sawFullBefore, sawKeyOnlyBefore, sawNilBefore, sawUnavailable, sawTxBlock)
	}
}

func TestRowText(t *testing.T) {
	r := Row{"id": json.RawMessage(`9007199254740993`), "s": json.RawMessage(`"a\"b"`), "n": json.RawMessage(`null`),
		"b": json.RawMessage(`true`), "o": json.RawMessage(`{"x":1}`)}
	if v, ok := r.Text("id"); !ok || v != "9007199254740993" {
		t.Errorf("id %q %v: a 64-bit id must keep its digits", v, ok)
	}
	if v, ok := r.Text("s"); !ok || v != `a"b` {
		t.Errorf("s %q %v", v, ok)
	}
	for _, c := range []string{"n", "o", "missing"} {
		if _, ok := r.Text(c); ok {
			t.Errorf("%s: ok", c)
		}
	}
	if v, ok := r.Text("b"); !ok || v != "true" {
		t.Errorf("b %q", v)
	}
	r["toast"] = json.RawMessage(`"` + Unavailable + `"`)
	for col, want := range map[string]Column{
		"id": {Text: "9007199254740993"}, "s": {Text: `a"b`}, "n": {Null: true}, "b": {Text: "true"},
		"o": {Text: `{"x":1}`}, "missing": {Unknown: true}, "toast": {Unknown: true},
	} {
		if got := r.Column(col); got != want {
			t.Errorf("Column(%q) = %+v, want %+v", col, got, want)
		}
	}
}

// TestBadInput: each malformed record gets an error wrapping ErrMalformed that says what is wrong
// and quotes no column value.
func TestBadInput(t *testing.T) {
	const secret = "s3cr3t-column-value"
	src := `"source":{"connector":"postgresql","db":"d","schema":"public","table":"t","ts_ms":1}`
	cases := []struct {
		name, key, value, want string
	}{
		{"not json", `{"id":1}`, `{"op":"c",` + secret, "invalid JSON"},
		{"array value", `{"id":1}`, `["` + secret + `"]`, "not a JSON object"},
		{"bad key", `"` + secret + `"`, `{}`, "key is not a JSON object"},
		{"unknown op", `{"id":1}`, `{"op":"x","after":{"a":"` + secret + `"},` + src + `}`, `"op" is "x"`},
		{"op not string", `{"id":1}`, `{"op":1,` + src + `}`, `"op" is not a string`},
		{"create without after", `{"id":1}`, `{"op":"c","before":null,` + src + `}`, `without an "after" row`},
		{"delete with after", `{"id":1}`, `{"op":"d","before":{"id":1},"after":{"a":"` + secret + `"},` + src + `}`, `with an "after" row`},
		{"after not object", `{"id":1}`, `{"op":"c","after":"` + secret + `",` + src + `}`, `"after" is not a JSON object`},
		{"no source", `{"id":1}`, `{"op":"c","after":{"a":"` + secret + `"}}`, `without a "source" block`},
		{"source no table", `{"id":1}`, `{"op":"c","after":{"a":1},"source":{"connector":"postgresql"}}`, "names no table"},
		{"ts not int", `{"id":1}`, `{"op":"c","after":{"a":1},"source":{"table":"t","ts_ms":"` + secret + `"}}`, `"ts_ms" is not an integer`},
		{"null payload", `{"id":1}`, `{"schema":{},"payload":null}`, "null payload"},
		{"tx bad status", `{"id":"1"}`, `{"status":"` + secret + `","id":"1"}`, `"status" is not`},
		{"unknown object", `{"id":1}`, `{"` + secret + `":1}`, "not a change event"},
		{"nothing", ``, ``, "neither key nor value"},
		{"truncate with row", ``, `{"op":"t","after":{"a":1},` + src + `}`, "with a row"},
		{"tx block no id", `{"id":1}`, `{"op":"c","after":{"a":1},"transaction":{"total_order":1},` + src + `}`, `without a string "id"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var key []byte
			if c.key != "" {
				key = []byte(c.key)
			}
			_, err := Decode(key, []byte(c.value))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %q, want it to say %q", err, c.want)
			}
			if c.name != "unknown object" && strings.Contains(err.Error(), secret) {
				t.Errorf("err %q quotes a value", err)
			}
		})
	}
}

func TestHeartbeatAndSchemaChange(t *testing.T) {
	m, err := Decode([]byte(`{"serverName":"kura"}`), []byte(`{"ts_ms":1795925066992}`))
	if err != nil || m.Kind != KindHeartbeat || m.HeartbeatMs != 1795925066992 {
		t.Fatalf("%+v %v", m, err)
	}
	m, err = Decode([]byte(`{"databaseName":"shop"}`), []byte(`{"source":{"server":"kura"},"databaseName":"shop","ddl":"ALTER TABLE t ADD c INT","tableChanges":[]}`))
	if err != nil || m.Kind != KindSchemaChange {
		t.Fatalf("%+v %v", m, err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, name := range []string{"postgres15-json.jsonl", "postgres15-json-schemas.jsonl"} {
		for _, fx := range loadFixtures(f, name) {
			k, v := fx.Bytes()
			f.Add(k, v)
		}
	}
	f.Add([]byte(nil), []byte(nil))
	f.Add([]byte(`{"id":1}`), []byte(`{"schema":1,"payload":{"op":"t","source":{"table":"x"}}}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		m, err := Decode(key, value)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		switch m.Kind {
		case KindChange:
			c := m.Change
			if c == nil || !validOp(c.Op) {
				t.Fatalf("change %+v", c)
			}
			if (c.Op == OpCreate || c.Op == OpRead || c.Op == OpUpdate) && c.After == nil {
				t.Fatalf("%c without after", c.Op)
			}
			if c.Op != OpMessage && c.Source.Table == "" {
				t.Fatal("change without table")
			}
		case KindTransaction:
			if m.Transaction == nil || m.Transaction.ID == "" {
				t.Fatal("transaction without id")
			}
		case KindTombstone, KindHeartbeat, KindSchemaChange:
		default:
			t.Fatalf("kind %v", m.Kind)
		}
	})
}
