//go:build !kura_scan

package demo

import (
	"context"

	"github.com/kuracache/kura/store"
)

// bigKey is one value kura scan called out as big.
type bigKey struct {
	key         string
	bytes       int64
	readSeconds float64
	readsPerSec float64
}

func scanBigValues(context.Context, store.Store, string, float64) ([]bigKey, int64, error) {
	return nil, 0, errScanNotBuilt
}
