// Package units reads and prints byte sizes the one way every kura
// command and report does: K, KB = 1,000 bytes and KiB = 1,024 in input;
// decimal units with three significant digits in output (1.3 MB), as the
// cloud providers print them; and it groups the digits of large figures
// (1,234,567). It is a leaf: it imports nothing of kura.
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrSize is returned, wrapped, for a size ParseBytes cannot read.
var ErrSize = errors.New("kura: bad size")

// Byte-size units ParseBytes accepts: decimal (KB = 1000) as cloud
// providers print them, binary (KiB = 1024) as Redis does.
var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"t", 1e12},
	{"b", 1},
}

// MaxBytes bounds sizes: an exabyte is beyond any cache.
const MaxBytes = 1e18

// ParseBytes reads a size such as "1.3MB", "120GB", "512KiB" or "4096".
// KB, MB, GB and TB are decimal (1 MB = 1,000,000 bytes); KiB, MiB, GiB
// and TiB are binary.
func ParseBytes(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, fmt.Errorf("%w: empty size", ErrSize)
	}
	mult := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: %q is not a size (write it like 1.3MB, 120GB, 512KiB or 4096)", ErrSize, s)
	}
	v *= mult
	if v < 0 {
		return 0, fmt.Errorf("%w: size %q is negative", ErrSize, s)
	}
	if v > MaxBytes {
		return 0, fmt.Errorf("%w: size %q is more than an exabyte", ErrSize, s)
	}
	return v, nil
}

// FormatBytes prints a size with a decimal unit and three significant
// digits: 1.3 MB, 120 GB, 812 B.
func FormatBytes(v float64) string {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB", "EB"}
	i := 0
	for v >= 999.5 && i < len(units)-1 {
		v /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", v)
	}
	return trimZeros(strconv.FormatFloat(v, 'f', sigDecimals(v), 64)) + " " + units[i]
}

// FormatGiB prints bytes in GiB, the unit the providers publish memory in.
func FormatGiB(v float64) string {
	g := v / (1 << 30)
	return trimZeros(strconv.FormatFloat(g, 'f', sigDecimals(g), 64)) + " GiB"
}

// FormatBound prints a power-of-two bucket bound in the largest binary
// unit it is at least one of, truncated to a whole number: 64 B, 1 KiB,
// 16 MiB (a histogram's axis, where the bounds are powers of two).
func FormatBound(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// Count prints a whole count with its digits grouped: 1,234,567.
func Count(n int64) string { return Group(strconv.FormatInt(n, 10)) }

func sigDecimals(v float64) int {
	switch {
	case v >= 100:
		return 0
	case v >= 10:
		return 1
	default:
		return 2
	}
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Group writes a comma between each three digits of the integer part of
// a formatted decimal number: "-1234567.50" becomes "-1,234,567.50". The
// caller chooses the rounding (fmt's %.2f for money, math.Round for a
// count); Group only groups.
func Group(num string) string {
	sign, rest := "", num
	if strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
		sign, rest = rest[:1], rest[1:]
	}
	intPart, frac, hasFrac := strings.Cut(rest, ".")
	var b strings.Builder
	b.WriteString(sign)
	for i := range len(intPart) {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(intPart[i])
	}
	if hasFrac {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}
