package codec

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/corpus"
	"github.com/vmihailenco/msgpack/v5"
)

// sortedMsgPack is msgpack/v5 with sorted map keys: what appendGeneric
// must write byte for byte.
func sortedMsgPack(t testing.TB, v any) []byte {
	var w appendWriter
	enc := msgpack.NewEncoder(&w)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return w.b
}

// checkGeneric asserts that MsgPack's Marshal of v is msgpack/v5's
// sorted-key bytes, and that they decode back to v.
func checkGeneric(t testing.TB, v any) {
	t.Helper()
	want := sortedMsgPack(t, v)
	got, err := MsgPack().Marshal([]byte("prefix"), v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("MsgPack().Marshal(%.200v):\n got %x\nwant %x", v, got, want)
	}
}

func TestAppendGenericMatchesMsgPack(t *testing.T) {
	many := map[string]any{}
	for i := range 70000 {
		many[strings.Repeat("k", i%40)+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676%26))] = float64(i)
	}
	long := make([]any, 70000)
	for i := range long {
		long[i] = i%3 == 0
	}
	vals := []any{
		nil, map[string]any{}, []any{}, map[string]any(nil), []any(nil),
		map[string]any{"b": 1.5, "a": "x", "c": nil, "d": true, "e": false, "f": []any{"y", 2.0, map[string]any{"z": math.Inf(-1)}}},
		map[string]any{"s31": strings.Repeat("x", 31), "s32": strings.Repeat("x", 32), "s255": strings.Repeat("x", 255),
			"s256": strings.Repeat("x", 256), "s65535": strings.Repeat("x", 65535), "s65536": strings.Repeat("x", 65536)},
		map[string]any{"nan": math.NaN(), "negzero": math.Copysign(0, -1), "max": math.MaxFloat64},
		many, long, []any{many, long},
		// Types outside the generic set: written by msgpack/v5, sorted too.
		map[string]any{"n": 3, "b": []byte("raw"), "m": map[string]string{"y": "1", "x": "2"}, "i": int64(-5)},
		[]any{json.Number("12"), uint8(3)},
	}
	p := &map[string]any{"p": "ptr", "a": 1.0}
	vals = append(vals, p, &[]any{"a", 1.0})
	deep := any("leaf")
	for range maxGenericDepth + 5 {
		deep = map[string]any{"d": deep, "a": []any{1.0}}
	}
	vals = append(vals, deep)
	for _, v := range vals {
		checkGeneric(t, v)
	}
	// Every document of the real data sets that are present.
	reals, _ := corpus.RealCorpora("..")
	for _, r := range reals {
		for _, doc := range r.Values[:min(len(r.Values), 300)] {
			var v any
			if err := json.Unmarshal(doc, &v); err != nil {
				t.Fatal(err)
			}
			checkGeneric(t, v)
		}
	}
}

// FuzzAppendGeneric: whatever JSON document encoding/json decodes, MsgPack
// writes msgpack/v5's sorted-key bytes for it.
func FuzzAppendGeneric(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `null`, `{"b":1,"a":[true,false,null,"x",{"z":1.5e300}]}`, `"str"`, `[[[[[]]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var v any
		if json.Unmarshal(doc, &v) != nil {
			return
		}
		checkGeneric(t, v)
	})
}
