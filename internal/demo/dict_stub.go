//go:build !kura_codecs

package demo

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/corpus"
)

// trainedCodecs trains a zstd dictionary on n articles of another seed
// than the demo reads, as a user would train on yesterday's values.
func trainedCodecs(seed int64, n int) ([]namedCodec, error) {
	var samples [][]byte
	for i := range n {
		a := corpus.NewArticle(seed+1000, i)
		b, err := msgpack.Marshal(&a)
		if err != nil {
			return nil, err
		}
		samples = append(samples, b)
	}
	const id = 7
	d, err := codec.TrainDictionary(samples, id, 0)
	if err != nil {
		return nil, err
	}
	c, err := codec.New(codec.Options{Compressor: codec.Zstd(0), Dictionaries: map[uint32][]byte{id: d}, Dictionary: id})
	if err != nil {
		return nil, err
	}
	return []namedCodec{{"kura + trained dictionary", c, true}}, nil
}
