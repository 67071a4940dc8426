package codecfit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/kuracache/kura/codec"
)

// MaxValueSize is the largest single value Load reads (64 MiB, kura's
// decode limit).
const MaxValueSize = codec.DefaultMaxDecodedSize

// FromJSON returns the Value of one JSON document.
func FromJSON(doc []byte) (Value, error) {
	var v any
	if err := unmarshalJSON(doc, &v); err != nil {
		return Value{}, err
	}
	return Value{V: v, JSONBytes: len(bytes.TrimSpace(doc))}, nil
}

// FromBytes returns the Value of bytes that are not JSON: a []byte value,
// whose JSON baseline is its own length.
func FromBytes(b []byte) Value {
	return Value{V: slices.Clone(b), JSONBytes: len(b)}
}

// FromAny returns the Value of a Go value, measuring its JSON form.
func FromAny(v any) (Value, error) {
	b, err := appendJSON(nil, v)
	if err != nil {
		return Value{}, err
	}
	return Value{V: v, JSONBytes: len(b)}, nil
}

// Read reads values from r: JSON Lines (one document per line), a JSON
// array (each element a value), or a single JSON document. name labels
// errors ("stdin", a file name).
func Read(r io.Reader, name string) ([]Value, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	first, err := firstNonSpace(br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if first == '[' {
		data, err := io.ReadAll(io.LimitReader(br, 1<<31))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var docs []json.RawMessage
		if err := json.Unmarshal(data, &docs); err != nil {
			return nil, fmt.Errorf("%s: not a JSON array: %w", name, err)
		}
		out := make([]Value, 0, len(docs))
		for i, d := range docs {
			v, err := FromJSON(d)
			if err != nil {
				return nil, fmt.Errorf("%s: element %d: %w", name, i, err)
			}
			out = append(out, v)
		}
		return out, nil
	}
	// JSON Lines, or one document spread over lines: decode a stream of
	// documents, which covers both.
	dec := json.NewDecoder(br)
	dec.UseNumber()
	var out []Value
	for i := 1; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if len(raw) > MaxValueSize {
			return nil, fmt.Errorf("%s: document %d is %d bytes, over the %d-byte limit", name, i, len(raw), MaxValueSize)
		}
		v, err := FromJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		out = append(out, v)
	}
}

func firstNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return b, br.UnreadByte()
		}
	}
}

// LoadPath reads a file (JSON, JSON Lines, NDJSON; any other file is one
// raw value) or every file of a directory, recursively, in name order.
func LoadPath(path string) ([]Value, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return loadFile(path)
	}
	var out []Value
	err = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		vs, err := loadFile(p)
		if err != nil {
			return err
		}
		out = append(out, vs...)
		return nil
	})
	return out, err
}

func loadFile(path string) ([]Value, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json", ".jsonl", ".ndjson":
		return Read(f, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxValueSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxValueSize {
		return nil, fmt.Errorf("%s: over the %d-byte value limit", path, MaxValueSize)
	}
	if json.Valid(b) {
		v, err := FromJSON(b)
		return []Value{v}, err
	}
	return []Value{FromBytes(b)}, nil
}

func appendJSON(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// unmarshalJSON decodes numbers as json.Number-free float64/int64 values
// the way msgpack will carry them: integers stay integers.
func unmarshalJSON(b []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	*v = numbers(*v)
	return nil
}

// numbers turns json.Number into int64 or float64, so values serialize as
// a program's own structs would (msgpack integers, not strings).
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

// processCPU is the process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
