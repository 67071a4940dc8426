package demo

import (
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/corpus"
)

// trainedCodecs trains an S2 and a zstd dictionary on n articles of
// another seed than the demo reads (yesterday's values, as `kura codecs`
// trains them) and returns a kura codec for each: the compact envelope
// with an S2 dictionary (what `kura codecs` recommends on these articles:
// the fewest bytes at no more CPU than msgpack+snappy) and zstd with a
// dictionary (fewer bytes still, more CPU).
func trainedCodecs(seed int64, n int) ([]namedCodec, error) {
	var samples, arrays [][]byte
	for _, a := range corpus.Articles(seed+1000, n) {
		b, err := codec.MsgPack().Marshal(nil, a)
		if err != nil {
			return nil, err
		}
		samples = append(samples, b)
		// Compact writes a struct as the array of its field values: the
		// dictionary learns those bytes.
		if b, err = codec.MsgPackArray().Marshal(nil, a); err != nil {
			return nil, err
		}
		arrays = append(arrays, b)
	}
	s2d, _, err := codec.TrainS2Dictionary(arrays, 32<<10)
	if err != nil {
		return nil, err
	}
	s2c, err := codec.New(codec.Options{Compact: true})
	if err != nil {
		return nil, err
	}
	if _, err := s2c.SetDictionary(s2d); err != nil {
		return nil, err
	}
	zd, _, err := codec.TrainContentDictionary(samples, 32<<10)
	if err != nil {
		return nil, err
	}
	zc, err := codec.New(codec.Options{Compressor: codec.Zstd(1)})
	if err != nil {
		return nil, err
	}
	if _, err := zc.SetDictionary(zd); err != nil {
		return nil, err
	}
	return []namedCodec{{compactS2Dict, s2c, true}, {"kura zstd + dictionary", zc, true}}, nil
}

// compactS2Dict names the demo's row of the codec `kura codecs`
// recommends for articles.
const compactS2Dict = "kura compact + S2 dictionary"
