package codec_test

import (
	"fmt"
	"strings"

	"github.com/kuracache/kura/codec"
)

// staticSource is a DictionarySource over dictionaries the program holds;
// in production dictstore.Registry finds them on the cache servers.
type staticSource map[uint32][]byte

func (s staticSource) Dictionary(id uint32) ([]byte, error) {
	if d, ok := s[id]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w %d", codec.ErrUnknownDictionary, id)
}

// A writer compresses with a dictionary (here raw content; in practice one
// trained by TrainContentDictionary or `kura codecs`); a reader that never
// saw it finds it by the id in the value's header, checks it, and decodes.
func ExampleCodec_SetDictionary() {
	// Raw content as a dictionary: serialized values like the ones to
	// come (dictionaries work on the serialized, msgpack, form).
	var dict []byte
	for _, cat := range []string{"markets", "banking", "insurance"} {
		dict, _ = codec.MsgPack().Marshal(dict, map[string]any{"status": "published", "category": cat, "title": strings.Repeat("x", 8)})
	}
	writer, _ := codec.New(codec.Options{Compressor: codec.Zstd(3), MinCompressSize: -1, MinSavings: -1})
	id, _ := writer.SetDictionary(dict)

	value := map[string]any{"status": "published", "category": "markets", "title": "Rates hold"}
	b, h, _ := writer.Encode(nil, value)

	reader, _ := codec.New(codec.Options{DictionarySource: staticSource{id: dict}})
	var out map[string]any
	if _, err := reader.Decode(b, &out); err != nil {
		fmt.Println(err)
	}
	fmt.Println(h.Dict == id, out["title"])
	// Output: true Rates hold
}
