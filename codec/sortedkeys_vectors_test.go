package codec

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// sortedKeysFile holds documents and the MessagePack MsgPack writes for
// them (map keys in UTF-8 byte order): the Node package's writer must
// produce the same bytes (js/test/format.test.mjs), so that a dictionary
// trained on either side's values matches the other's.
const sortedKeysFile = "../testdata/format/sorted-keys.json"

type sortedKeysVector struct {
	Name string `json:"name"`
	// JSON is the document as text, keys in the order a writer meets
	// them (not sorted).
	JSON string `json:"json"`
	// Hex is MsgPack's serialization of the document decoded into `any`.
	Hex string `json:"hex"`
}

type sortedKeysVectors struct {
	Comment string             `json:"comment"`
	Vectors []sortedKeysVector `json:"vectors"`
}

// sortedKeysDocs are the documents of sorted-keys.json. Numbers are not
// whole: a generic Go value from encoding/json holds float64 (msgpack
// float 64), while a JavaScript writer stores a whole number as a msgpack
// integer.
var sortedKeysDocs = []sortedKeysVector{
	{Name: "byte-order", JSON: `{"b":0.5,"a":true,"10":"ten","9":null,"2":[1.5,"x"],"":"empty","B":false,"é":"e-acute","` + "\ue000" + `":"private use","ｱ":"half-width katakana","😀":"emoji","a\u0000":"nul"}`},
	{Name: "nested", JSON: `{"z":{"y":{"b":1.25,"a":-2.5},"x":[{"d":"d","c":"c"},{}]},"a":[],"m":{"k":{"j":{"i":"deep"}}}}`},
	{Name: "map16", JSON: `{"k19":"a","k7":"b","k18":"c","k6":"d","k17":"e","k5":"f","k16":"g","k4":"h","k15":"i","k3":"j","k14":"k","k2":"l","k13":"m","k1":"n","k12":"o","k0":"p","k11":"q","k10":"r","k9":"s","k8":"t"}`},
}

func TestSortedKeysVectors(t *testing.T) {
	var vs sortedKeysVectors
	if *update {
		vs.Comment = "MsgPack's bytes for documents decoded into any: map keys in UTF-8 byte order. A Node writer produces the same (js/test/format.test.mjs). Regenerate with: go test ./codec -run TestSortedKeysVectors -update"
		for _, d := range sortedKeysDocs {
			var v any
			if err := json.Unmarshal([]byte(d.JSON), &v); err != nil {
				t.Fatal(err)
			}
			p, err := MsgPack().Marshal(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			d.Hex = hex.EncodeToString(p)
			vs.Vectors = append(vs.Vectors, d)
		}
		b, err := json.MarshalIndent(vs, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sortedKeysFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(sortedKeysFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs.Vectors) != len(sortedKeysDocs) {
		t.Fatalf("%d vectors in %s, want %d (regenerate with -update)", len(vs.Vectors), sortedKeysFile, len(sortedKeysDocs))
	}
	for _, vec := range vs.Vectors {
		var v any
		if err := json.Unmarshal([]byte(vec.JSON), &v); err != nil {
			t.Fatalf("%s: %v", vec.Name, err)
		}
		got, err := MsgPack().Marshal(nil, v)
		if err != nil {
			t.Fatalf("%s: %v", vec.Name, err)
		}
		if hex.EncodeToString(got) != vec.Hex {
			t.Errorf("%s: MsgPack writes\n%x\nthe vector holds\n%s", vec.Name, got, vec.Hex)
		}
		// msgpack/v5 with sorted keys (the path for values that are not
		// plain generic ones) writes the same.
		if lib := sortedMsgPack(t, v); hex.EncodeToString(lib) != vec.Hex {
			t.Errorf("%s: msgpack/v5 sorted writes %x", vec.Name, lib)
		}
	}
}
