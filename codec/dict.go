package codec

import (
	"errors"
	"fmt"
)

// TrainDictionary builds a zstd dictionary of at most maxSize bytes (0:
// 64 KiB) from sample payloads, with id embedded, ready for
// Options.Dictionaries[id]. Samples should be serialized payloads (the
// Serializer's Marshal output) of the values the cache will hold; a few
// hundred are plenty. Training is slow (seconds); do it offline, ship the
// dictionary, and never change the bytes behind an id once values using it
// may be stored: pick a new id instead.
func TrainDictionary(samples [][]byte, id uint32, maxSize int) ([]byte, error) {
	if id == 0 {
		return nil, errors.New("kura: codec: TrainDictionary: id 0 means \"no dictionary\"")
	}
	if len(samples) == 0 {
		return nil, errors.New("kura: codec: TrainDictionary: no samples")
	}
	if maxSize <= 0 {
		maxSize = 64 << 10
	}
	d, err := buildZstdDict(samples, id, maxSize)
	if err != nil {
		return nil, fmt.Errorf("kura: codec: TrainDictionary: %w", err)
	}
	return d, nil
}
