package demo

import (
	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/internal/harness/corpus"
)

// trainedCodecs trains an S2 and a zstd dictionary on n articles of
// another seed than the demo reads (yesterday's values, as `kura codecs`
// trains them) and returns a kura codec for each.
func trainedCodecs(seed int64, n int) ([]namedCodec, error) {
	var samples [][]byte
	for _, a := range corpus.Articles(seed+1000, n) {
		b, err := codec.MsgPack().Marshal(nil, a)
		if err != nil {
			return nil, err
		}
		samples = append(samples, b)
	}
	s2d, _, err := codec.TrainS2Dictionary(samples, 32<<10)
	if err != nil {
		return nil, err
	}
	s2c, err := codec.New(codec.Options{})
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
	return []namedCodec{{"kura S2 + dictionary", s2c, true}, {"kura zstd + dictionary", zc, true}}, nil
}
