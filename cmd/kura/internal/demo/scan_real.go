package demo

import (
	"context"

	"github.com/kuracache/kura/scan"
	"github.com/kuracache/kura/store"
)

// bigKey is one value kura scan called out as big.
type bigKey struct {
	key         string
	bytes       int64
	readSeconds float64
	readsPerSec float64
}

// scanBigValues walks the server behind st as `kura scan` does and returns
// the values it calls out as big (costed at bandwidthBits), and the number
// of keys it walked.
func scanBigValues(ctx context.Context, st store.Store, target string, bandwidthBits float64) ([]bigKey, int64, error) {
	rep, err := scan.Run(ctx, st, scan.Options{Target: target, Bandwidth: bandwidthBits})
	if err != nil {
		return nil, 0, err
	}
	var out []bigKey
	for _, k := range rep.BigValues.Keys {
		out = append(out, bigKey{key: k.Key, bytes: k.ValueBytes, readSeconds: k.ReadSeconds, readsPerSec: k.ReadsPerSecond})
	}
	return out, rep.Keys, nil
}
