// Package debezium reads Debezium's change events from Kafka for kura's change-stream
// invalidation: a decoder for Debezium's JSON envelope (with and without schemas: before,
// after, op, source, the transaction block, tombstones, TRUNCATE, transaction BEGIN/END and
// heartbeat records) and a consumer-group Consumer that commits a batch's offsets only after an
// Applier reports that the batch's invalidations landed.
//
// The package knows nothing of cache keys: an Applier maps rows to keys and invalidates them
// (the PostgreSQL change stream's mapping plugs in there), so the same mapping serves both
// sources. Which database settings give the `before` image the old/new index-value rule needs
// is in docs/cdc-debezium.md.
package debezium

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// ErrMalformed reports a Kafka record that is not a Debezium record this package can read: not
// JSON, an envelope with a missing or mistyped field, an unknown op. The error names the field,
// never a column's value.
var ErrMalformed = errors.New("debezium: malformed record")

// Op is a change event's operation, as Debezium writes it in the envelope's "op" field.
type Op byte

// The operations of Debezium's envelope.
const (
	OpRead     Op = 'r' // a row read by a snapshot
	OpCreate   Op = 'c' // INSERT
	OpUpdate   Op = 'u' // UPDATE
	OpDelete   Op = 'd' // DELETE
	OpTruncate Op = 't' // TRUNCATE: no row, the whole table
	OpMessage  Op = 'm' // a logical decoding message (pg_logical_emit_message): no row
)

// String returns the op's letter.
func (o Op) String() string { return string(rune(o)) }

// Kind tells which of Debezium's records a Message is.
type Kind int

// The kinds of records on Debezium's topics.
const (
	// KindChange is a change event: Message.Change is set.
	KindChange Kind = iota + 1
	// KindTombstone is the record with a null value that follows a delete (same key), for log
	// compaction. It changes nothing a cache holds beyond what the delete did.
	KindTombstone
	// KindTransaction is a BEGIN or END record of the transaction topic: Message.Transaction is
	// set.
	KindTransaction
	// KindHeartbeat is a heartbeat record (heartbeat.interval.ms): only Message.HeartbeatMs.
	KindHeartbeat
	// KindSchemaChange is a schema change record (the MySQL connector's schema change topic):
	// nothing to invalidate.
	KindSchemaChange
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindChange:
		return "change"
	case KindTombstone:
		return "tombstone"
	case KindTransaction:
		return "transaction"
	case KindHeartbeat:
		return "heartbeat"
	case KindSchemaChange:
		return "schema change"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Message is one decoded Kafka record of Debezium's.
type Message struct {
	Kind Kind
	// Key is the record's key: the row's primary key columns for a change or a tombstone (nil
	// for a table without a key, and for TRUNCATE).
	Key Row
	// Change is set for KindChange.
	Change *Change
	// Transaction is set for KindTransaction.
	Transaction *TransactionEvent
	// HeartbeatMs is a heartbeat's time (milliseconds since the epoch), for KindHeartbeat.
	HeartbeatMs int64
}

// Change is a change event's envelope.
type Change struct {
	Op Op
	// Before is the row before the change: nil for a create or a read; for an update or a delete
	// what the database logged, which depends on its settings (docs/cdc-debezium.md): every
	// column under PostgreSQL's REPLICA IDENTITY FULL or MySQL's binlog_row_image=FULL, else
	// only the key columns (delete) or nothing (update).
	Before Row
	// After is the row after the change: nil for a delete or a truncate.
	After Row
	// Source tells where and when the change happened.
	Source Source
	// Transaction is the event's place in its transaction (provide.transaction.metadata=true),
	// nil otherwise.
	Transaction *TransactionBlock
	// TsMs is when Debezium processed the event (the envelope's ts_ms), milliseconds since the
	// epoch; Source.TsMs is when the database made the change.
	TsMs int64
}

// Source is the envelope's source block: the fields kura reads, plus the whole block in Raw
// (connector-specific fields: PostgreSQL's lsn and txId, MySQL's file, pos and gtid).
type Source struct {
	Connector string // "postgresql", "mysql", ...
	Name      string // topic.prefix
	DB        string
	Schema    string // PostgreSQL's schema; empty for MySQL
	Table     string
	// TsMs is the commit time in the database, milliseconds since the epoch (0 when absent).
	TsMs int64
	// Snapshot is "false" for a streamed change, else the snapshot phase ("true", "first",
	// "last", ...).
	Snapshot string
	// LSN is PostgreSQL's log position of the change (0 when absent).
	LSN int64
	// TxID is PostgreSQL's transaction id (0 when absent).
	TxID int64
	// Raw is the whole source block as it came.
	Raw json.RawMessage
}

// QualifiedTable returns "schema.table", or "db.table" when there is no schema (MySQL).
func (s Source) QualifiedTable() string {
	if s.Schema != "" {
		return s.Schema + "." + s.Table
	}
	if s.DB != "" {
		return s.DB + "." + s.Table
	}
	return s.Table
}

// TransactionBlock is a change event's "transaction" block.
type TransactionBlock struct {
	ID                  string
	TotalOrder          int64
	DataCollectionOrder int64
}

// TransactionEvent is a record of the transaction topic.
type TransactionEvent struct {
	// Status is "BEGIN" or "END".
	Status string
	ID     string
	// EventCount is the number of change events of the transaction (END only).
	EventCount int64
	// Collections are the per-table event counts (END only).
	Collections []CollectionCount
	// TsMs is the transaction's time, milliseconds since the epoch (0 when absent).
	TsMs int64
}

// CollectionCount is one table's event count in a transaction's END record.
type CollectionCount struct {
	// Collection is "schema.table" (PostgreSQL) or "db.table" (MySQL).
	Collection string
	EventCount int64
}

// Unavailable is the value Debezium's PostgreSQL connector puts in a column it did not receive
// (a TOASTed column that an UPDATE left unchanged, under REPLICA IDENTITY DEFAULT).
const Unavailable = "__debezium_unavailable_value"

// Row is a row image: column name to the column's JSON value as Debezium wrote it (numbers keep
// their exact digits; a 64-bit id does not pass through a float).
type Row map[string]json.RawMessage

// Has reports whether the row carries the column.
func (r Row) Has(col string) bool {
	_, ok := r[col]
	return ok
}

// IsNull reports whether the column is absent or JSON null.
func (r Row) IsNull(col string) bool {
	v, ok := r[col]
	return !ok || string(v) == "null"
}

// IsUnavailable reports whether the column holds Debezium's placeholder for a value it did not
// receive (see Unavailable): its old or new value is unknown.
func (r Row) IsUnavailable(col string) bool {
	return string(r[col]) == `"`+Unavailable+`"`
}

// Text returns the column's value as text: a string's contents, a number's digits as written, true
// or false. ok is false when the column is absent, null, or an object or array.
func (r Row) Text(col string) (string, bool) {
	v, ok := r[col]
	if !ok || len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false
		}
		return s, true
	case 'n', '{', '[':
		return "", false
	}
	return string(v), true
}

// Column is one column's value in the form the change stream's row-to-key mapping reads (the
// cdc package's Value): the text form, SQL NULL, or unknown.
type Column struct {
	// Text is the value's text: a JSON string's contents, a number's digits as written, true or
	// false, or an object's or array's JSON; empty when Null or Unknown.
	Text string
	// Null reports JSON null. Careful: in a before image under PostgreSQL's REPLICA IDENTITY
	// DEFAULT (or MySQL's binlog_row_image=MINIMAL) Debezium writes null for every column it was
	// not sent, so there null means "not known" unless the table's identity is FULL.
	Null bool
	// Unknown reports a column the row does not carry, or Debezium's Unavailable placeholder
	// (an unchanged TOAST column).
	Unknown bool
}

// Column returns col's value as a Column.
func (r Row) Column(col string) Column {
	v, ok := r[col]
	if !ok || len(v) == 0 {
		return Column{Unknown: true}
	}
	switch v[0] {
	case 'n':
		return Column{Null: true}
	case '"':
		if r.IsUnavailable(col) {
			return Column{Unknown: true}
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return Column{Unknown: true}
		}
		return Column{Text: s}
	}
	return Column{Text: string(v)}
}

// Decode reads one Kafka record that Debezium wrote: a change event (with or without schemas),
// a tombstone, a transaction BEGIN/END, a heartbeat or a schema change. A value it cannot read is
// an error wrapping ErrMalformed that names what is wrong and never quotes a column's value.
func Decode(key, value []byte) (Message, error) {
	var m Message
	k, err := decodeKey(key)
	if err != nil {
		return Message{}, err
	}
	m.Key = k
	value = bytes.TrimSpace(value)
	if len(value) == 0 || string(value) == "null" {
		if key == nil {
			return Message{}, fmt.Errorf("%w: a record with neither key nor value", ErrMalformed)
		}
		m.Kind = KindTombstone
		return m, nil
	}
	obj, err := object(value, "value")
	if err != nil {
		return Message{}, err
	}
	obj, err = unwrapSchema(obj, "value")
	if err != nil {
		return Message{}, err
	}
	switch {
	case has(obj, "op"):
		c, err := decodeChange(obj)
		if err != nil {
			return Message{}, err
		}
		m.Kind, m.Change = KindChange, c
	case has(obj, "status") && has(obj, "id"):
		t, err := decodeTransaction(obj)
		if err != nil {
			return Message{}, err
		}
		m.Kind, m.Transaction = KindTransaction, t
	case has(obj, "ddl") || has(obj, "tableChanges") || has(obj, "historyRecord"):
		m.Kind = KindSchemaChange
	case len(obj) == 1 && has(obj, "ts_ms"):
		ts, err := int64Field(obj, "ts_ms", "heartbeat")
		if err != nil {
			return Message{}, err
		}
		m.Kind, m.HeartbeatMs = KindHeartbeat, ts
	default:
		return Message{}, fmt.Errorf("%w: value is a JSON object with fields %s: not a change event (no \"op\"), a transaction record, a heartbeat or a schema change", ErrMalformed, fieldList(obj))
	}
	return m, nil
}

func decodeKey(key []byte) (Row, error) {
	key = bytes.TrimSpace(key)
	if len(key) == 0 || string(key) == "null" {
		return nil, nil
	}
	obj, err := object(key, "key")
	if err != nil {
		return nil, err
	}
	obj, err = unwrapSchema(obj, "key")
	if err != nil {
		return nil, err
	}
	return Row(obj), nil
}

// object parses b as a JSON object whose fields are kept raw.
func object(b []byte, what string) (map[string]json.RawMessage, error) {
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: %s is not a JSON object (starts with %s)", ErrMalformed, what, firstByte(b))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, what, jsonErr(err))
	}
	return obj, nil
}

// unwrapSchema returns the payload of a {"schema":...,"payload":...} record
// (converter.schemas.enable=true), else obj itself.
func unwrapSchema(obj map[string]json.RawMessage, what string) (map[string]json.RawMessage, error) {
	if len(obj) != 2 || !has(obj, "schema") || !has(obj, "payload") {
		return obj, nil
	}
	p := bytes.TrimSpace(obj["payload"])
	if string(p) == "null" {
		return nil, fmt.Errorf("%w: %s has a schema and a null payload", ErrMalformed, what)
	}
	inner, err := object(p, what+" payload")
	if err != nil {
		return nil, err
	}
	return inner, nil
}

func decodeChange(obj map[string]json.RawMessage) (*Change, error) {
	var opText string
	if err := json.Unmarshal(obj["op"], &opText); err != nil {
		return nil, fmt.Errorf("%w: \"op\" is not a string", ErrMalformed)
	}
	if len(opText) != 1 || !validOp(Op(opText[0])) {
		return nil, fmt.Errorf("%w: \"op\" is %q, not one of r, c, u, d, t, m", ErrMalformed, truncate(opText, 8))
	}
	c := &Change{Op: Op(opText[0])}
	var err error
	if c.Before, err = rowField(obj, "before"); err != nil {
		return nil, err
	}
	if c.After, err = rowField(obj, "after"); err != nil {
		return nil, err
	}
	if c.TsMs, err = optInt64(obj, "ts_ms", "envelope"); err != nil {
		return nil, err
	}
	raw, ok := obj["source"]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil, fmt.Errorf("%w: %q event without a \"source\" block", ErrMalformed, opText)
	}
	if c.Source, err = decodeSource(raw); err != nil {
		return nil, err
	}
	if tb, ok := obj["transaction"]; ok && string(bytes.TrimSpace(tb)) != "null" {
		if c.Transaction, err = decodeTxBlock(tb); err != nil {
			return nil, err
		}
	}
	switch c.Op {
	case OpRead, OpCreate:
		if c.After == nil {
			return nil, fmt.Errorf("%w: %q event for %s without an \"after\" row", ErrMalformed, opText, c.Source.QualifiedTable())
		}
	case OpUpdate:
		if c.After == nil {
			return nil, fmt.Errorf("%w: update of %s without an \"after\" row", ErrMalformed, c.Source.QualifiedTable())
		}
	case OpDelete:
		if c.After != nil {
			return nil, fmt.Errorf("%w: delete of %s with an \"after\" row", ErrMalformed, c.Source.QualifiedTable())
		}
	case OpTruncate, OpMessage:
		if c.Before != nil || c.After != nil {
			return nil, fmt.Errorf("%w: %q event with a row", ErrMalformed, opText)
		}
	}
	if c.Op != OpMessage && c.Source.Table == "" {
		return nil, fmt.Errorf("%w: %q event whose source names no table", ErrMalformed, opText)
	}
	return c, nil
}

func validOp(o Op) bool {
	switch o {
	case OpRead, OpCreate, OpUpdate, OpDelete, OpTruncate, OpMessage:
		return true
	}
	return false
}

func rowField(obj map[string]json.RawMessage, name string) (Row, error) {
	raw, ok := obj[name]
	raw = bytes.TrimSpace(raw)
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("%w: %q is not a JSON object (starts with %s)", ErrMalformed, name, firstByte(raw))
	}
	var row Row
	if err := json.Unmarshal(raw, &row); err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrMalformed, name, jsonErr(err))
	}
	return row, nil
}

func decodeSource(raw json.RawMessage) (Source, error) {
	var s struct {
		Connector *string `json:"connector"`
		Name      *string `json:"name"`
		DB        *string `json:"db"`
		Schema    *string `json:"schema"`
		Table     *string `json:"table"`
		Snapshot  *string `json:"snapshot"`
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return Source{}, fmt.Errorf("%w: \"source\" is not a JSON object", ErrMalformed)
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return Source{}, fmt.Errorf("%w: \"source\": %v", ErrMalformed, jsonErr(err))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return Source{}, fmt.Errorf("%w: \"source\": %v", ErrMalformed, jsonErr(err))
	}
	out := Source{Connector: deref(s.Connector), Name: deref(s.Name), DB: deref(s.DB), Schema: deref(s.Schema),
		Table: deref(s.Table), Snapshot: deref(s.Snapshot), Raw: raw}
	var err error
	if out.TsMs, err = optInt64(obj, "ts_ms", "source"); err != nil {
		return Source{}, err
	}
	if out.LSN, err = optInt64(obj, "lsn", "source"); err != nil {
		return Source{}, err
	}
	if out.TxID, err = optInt64(obj, "txId", "source"); err != nil {
		return Source{}, err
	}
	return out, nil
}

func decodeTxBlock(raw json.RawMessage) (*TransactionBlock, error) {
	obj, err := object(bytes.TrimSpace(raw), "\"transaction\"")
	if err != nil {
		return nil, err
	}
	var t TransactionBlock
	if err := json.Unmarshal(obj["id"], &t.ID); err != nil || t.ID == "" {
		return nil, fmt.Errorf("%w: \"transaction\" block without a string \"id\"", ErrMalformed)
	}
	if t.TotalOrder, err = optInt64(obj, "total_order", "transaction"); err != nil {
		return nil, err
	}
	if t.DataCollectionOrder, err = optInt64(obj, "data_collection_order", "transaction"); err != nil {
		return nil, err
	}
	return &t, nil
}

func decodeTransaction(obj map[string]json.RawMessage) (*TransactionEvent, error) {
	var t TransactionEvent
	if err := json.Unmarshal(obj["status"], &t.Status); err != nil || (t.Status != "BEGIN" && t.Status != "END") {
		return nil, fmt.Errorf("%w: transaction record whose \"status\" is not \"BEGIN\" or \"END\"", ErrMalformed)
	}
	if err := json.Unmarshal(obj["id"], &t.ID); err != nil || t.ID == "" {
		return nil, fmt.Errorf("%w: transaction record without a string \"id\"", ErrMalformed)
	}
	var err error
	if t.EventCount, err = optInt64(obj, "event_count", "transaction record"); err != nil {
		return nil, err
	}
	if t.TsMs, err = optInt64(obj, "ts_ms", "transaction record"); err != nil {
		return nil, err
	}
	if raw, ok := obj["data_collections"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		var cols []struct {
			Collection *string `json:"data_collection"`
			EventCount *int64  `json:"event_count"`
		}
		if err := json.Unmarshal(raw, &cols); err != nil {
			return nil, fmt.Errorf("%w: transaction record's \"data_collections\": %v", ErrMalformed, jsonErr(err))
		}
		for i, c := range cols {
			if c.Collection == nil {
				return nil, fmt.Errorf("%w: transaction record's \"data_collections\"[%d] has no \"data_collection\"", ErrMalformed, i)
			}
			t.Collections = append(t.Collections, CollectionCount{Collection: *c.Collection, EventCount: derefInt(c.EventCount)})
		}
	}
	return &t, nil
}

// optInt64 reads an optional integer field (absent or null is 0).
func optInt64(obj map[string]json.RawMessage, name, where string) (int64, error) {
	raw, ok := obj[name]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return 0, nil
	}
	return int64Field(obj, name, where)
}

func int64Field(obj map[string]json.RawMessage, name, where string) (int64, error) {
	var n int64
	if err := json.Unmarshal(obj[name], &n); err != nil {
		return 0, fmt.Errorf("%w: %s's %q is not an integer", ErrMalformed, where, name)
	}
	return n, nil
}

func has(obj map[string]json.RawMessage, name string) bool {
	_, ok := obj[name]
	return ok
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}

// fieldList names at most 8 of an object's fields, for an error message (field names, never
// values).
func fieldList(obj map[string]json.RawMessage) string {
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	slices.Sort(names)
	more := ""
	if len(names) > 8 {
		more = fmt.Sprintf(" and %d more", len(names)-8)
		names = names[:8]
	}
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += strconv.Quote(truncate(n, 40))
	}
	if out == "" {
		out = "(none)"
	}
	return out + more
}

func firstByte(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	return strconv.QuoteRune(rune(b[0]))
}

// jsonErr describes a JSON error without quoting the input.
func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q holds a JSON %s", truncate(te.Field, 60), te.Value)
		}
		return fmt.Sprintf("a JSON %s where an object was expected", te.Value)
	}
	return "invalid JSON"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
