package inspect_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/inspect"
)

// TestWarnsDictionaryWithoutDigest: a value compressed with a dictionary
// but without the digest field (written before digests existed) was
// matched to its dictionary by a 28-bit id only; inspect says so.
func TestWarnsDictionaryWithoutDigest(t *testing.T) {
	dict := bytes.Repeat([]byte(`{"id":1,"title":"a title","body":"cache me if you can"}`), 40)
	id := codec.DictionaryID(dict)
	c, err := codec.New(codec.Options{Compressor: codec.Zstd(3), MinCompressSize: -1, Dictionaries: map[uint32][]byte{id: dict}, Dictionary: id})
	if err != nil {
		t.Fatal(err)
	}
	enc, _, err := c.Encode(nil, map[string]any{"id": 1, "title": "a title", "body": strings.Repeat("cache me if you can ", 20)})
	if err != nil {
		t.Fatal(err)
	}
	with := inspect.Bytes("k", enc, inspect.Options{Codec: c})
	if strings.Contains(with.Note, "no digest") || len(with.Value) == 0 {
		t.Fatalf("with its digest: %+v", with)
	}
	// Take the digest field out: the fields are the digest only (tag,
	// length, 16 bytes), after magic, version, kind and their length.
	if enc[4] != 18 || enc[5] != codec.TagDictDigest {
		t.Fatalf("unexpected header % x", enc[:8])
	}
	old := append(append(append([]byte(nil), enc[:4]...), 0), enc[5+18:]...)
	r := inspect.Bytes("k", old, inspect.Options{Codec: c})
	if len(r.Value) == 0 || !strings.Contains(r.Note, "carries no digest") {
		t.Errorf("without a digest: value %s, note %q", r.Value, r.Note)
	}
}
