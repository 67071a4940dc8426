package plan

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kuracache/kura/internal/units"
)

// ErrInput is returned, wrapped, for a workload or flag value the planner
// cannot use.
var ErrInput = errors.New("kura: bad planning input")

// maxBytes bounds sizes: an exabyte is beyond any cache.
const maxBytes = units.MaxBytes

// ParseBytes reads a size such as "1.3MB", "120GB", "512KiB" or "4096".
// KB, MB, GB and TB (and K, M, G, T) are decimal (1 MB = 1,000,000
// bytes); KiB, MiB, GiB and TiB are binary. It is the one size parser of
// every kura command (internal/units).
func ParseBytes(s string) (float64, error) {
	v, err := units.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %s", ErrInput, strings.TrimPrefix(err.Error(), units.ErrSize.Error()+": "))
	}
	return v, nil
}

// FormatBytes prints a size with a decimal unit and three significant
// digits: 1.3 MB, 120 GB, 812 B (internal/units, the one formatter).
func FormatBytes(v float64) string { return units.FormatBytes(v) }

// FormatGiB prints bytes in GiB, the unit the providers publish memory in.
func FormatGiB(v float64) string { return units.FormatGiB(v) }
