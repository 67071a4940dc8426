package kafka

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Captured is one line of a capture file (cdc/debezium/testdata/*.jsonl): a Kafka record as
// Debezium wrote it, key and value as the exact strings, null for a tombstone's value or a
// TRUNCATE event's key.
type Captured struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
}

// Bytes returns the record's key and value (nil where the capture holds null).
func (c Captured) Bytes() (key, value []byte) {
	if c.Key != nil {
		key = []byte(*c.Key)
	}
	if c.Value != nil {
		value = []byte(*c.Value)
	}
	return key, value
}

// WriteCapture writes records to path, one JSON line each.
func WriteCapture(path string, recs []*kgo.Record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		c := Captured{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		if r.Key != nil {
			s := string(r.Key)
			c.Key = &s
		}
		if r.Value != nil {
			s := string(r.Value)
			c.Value = &s
		}
		if err := enc.Encode(c); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadCapture reads a capture file.
func ReadCapture(path string) ([]Captured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Captured
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var c Captured
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
