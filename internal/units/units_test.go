package units

import (
	"errors"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]float64{"16K": 16000, "16KB": 16000, "16KiB": 16384, "1.3MB": 1.3e6, "1.5 mib": 1.5 * (1 << 20), "4096": 4096, "2G": 2e9} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1KB", "1e30", "NaN", "12XB"} {
		if _, err := ParseBytes(bad); !errors.Is(err, ErrSize) {
			t.Errorf("ParseBytes(%q) = %v, want ErrSize", bad, err)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for in, want := range map[float64]string{812: "812 B", 1300000: "1.3 MB", 22.6: "23 B", 179_000: "179 KB", 4437: "4.44 KB", 120e9: "120 GB"} {
		if got := FormatBytes(in); got != want {
			t.Errorf("FormatBytes(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestGroup(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "999": "999", "1000": "1,000", "-123456": "-123,456", "1234567.50": "1,234,567.50", "-0.25": "-0.25", "100000.00": "100,000.00"} {
		if got := Group(in); got != want {
			t.Errorf("Group(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFormatBound(t *testing.T) {
	for in, want := range map[int64]string{0: "0 B", 64: "64 B", 1023: "1023 B", 1024: "1 KiB", 3 << 10: "3 KiB", 1 << 20: "1 MiB", 16<<20 + 5: "16 MiB", 4 << 30: "4096 MiB"} {
		if got := FormatBound(in); got != want {
			t.Errorf("FormatBound(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestCount(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -123456: "-123,456", -1234: "-1,234"} {
		if got := Count(in); got != want {
			t.Errorf("Count(%d) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseBytes: any string is a size within bounds or ErrSize.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1.3MB", "512KiB", "4096", "-1", "1e400", "KB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseBytes(s)
		if err != nil {
			if !errors.Is(err, ErrSize) {
				t.Fatalf("ParseBytes(%q): %v is not ErrSize", s, err)
			}
			return
		}
		if v < 0 || v > MaxBytes || v != v {
			t.Fatalf("ParseBytes(%q) = %v", s, v)
		}
		_ = FormatBytes(v)
	})
}
