package demo

import (
	"bytes"
	"encoding/gob"
	"fmt"

	"github.com/golang/snappy"
)

// gobSerializer is encoding/gob as the seed's service used it: a fresh
// Encoder per value, so every value carries its type description.
type gobSerializer struct{}

func (gobSerializer) ID() byte     { return 200 }
func (gobSerializer) Name() string { return "gob" }
func (gobSerializer) Marshal(dst []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	err := gob.NewEncoder(buf).Encode(v)
	return buf.Bytes(), err
}
func (gobSerializer) Unmarshal(data []byte, v any) error {
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}

// goSnappy is github.com/golang/snappy as the seed's service called it,
// plugged in as a user compressor so its row is the seed's own code.
type goSnappy struct{}

func (goSnappy) ID() byte     { return 201 }
func (goSnappy) Name() string { return "golang/snappy" }
func (goSnappy) Compress(dst, src []byte) ([]byte, error) {
	return append(dst, snappy.Encode(nil, src)...), nil
}
func (goSnappy) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n != rawLen {
		return nil, fmt.Errorf("snappy: decoded length %d, header says %d", n, rawLen)
	}
	out, err := snappy.Decode(nil, src)
	return append(dst, out...), err
}
