package scan

import (
	"bytes"
	"strings"
	"testing"
)

// TestOneKeyIsSingular: a cache of one key on one server reads "1 key"
// and "1 server", never "1 keys" (a new user's first scan of the quick
// start's Redis holds a handful of keys).
func TestOneKeyIsSingular(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, &Report{Target: "redis://127.0.0.1:6379", Kind: "redis", Keys: 1, Servers: []ServerReport{{}}}); err != nil {
		t.Fatal(err)
	}
	if line, _, _ := strings.Cut(b.String(), "\n"); !strings.Contains(line, "(redis, 1 server): 1 key;") {
		t.Errorf("first line %q", line)
	}
}

// TestNegativeSavingAndOneKeyBucket: a codec that stores more than it was
// given reads "costs 90 kB (+9%)", not "-90000 B (-9%)", and a histogram
// bucket of one key reads "1 key", not "1 keys".
func TestNegativeSavingAndOneKeyBucket(t *testing.T) {
	r := &Report{Target: "redis://127.0.0.1:6379", Kind: "redis", Keys: 2, ValueBytes: 1_000_000, Servers: []ServerReport{{}},
		Histogram: []Bucket{{LE: 1024, Keys: 1, ValueBytes: 10}, {LE: -1, Keys: 1, ValueBytes: 999_990}},
		Patterns: []Pattern{{Pattern: "report:*", Keys: 2, ValueBytes: 1_000_000, Savings: &Savings{Sampled: 2,
			Estimates: []Estimate{{Codec: "s2", SavedBytes: -90_000, SavedFraction: -0.09}, {Codec: "zstd", SavedBytes: 500_000, SavedFraction: 0.5}}}}},
	}
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "-90") || !strings.Contains(out, "costs 90") || !strings.Contains(out, "(+9%)") {
		t.Errorf("a negative saving:\n%s", out)
	}
	if strings.Contains(out, "1 keys") || !strings.Contains(out, "1 key ") {
		t.Errorf("a bucket of one key:\n%s", out)
	}
}
