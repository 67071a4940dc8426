package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// CodecsSchema is the version of `kura codecs --json` output ReadCodecs
// reads.
const CodecsSchema = "kura.codecs/v1"

// CodecSizes is what `kura codecs --json` measured on the user's values:
// the stored bytes of the same test values under every candidate codec.
type CodecSizes struct {
	// Bytes maps a candidate ("json", "msgpack+snappy", "s2",
	// "zstd-3+dict-16KiB", ...) to the test values' stored bytes.
	Bytes map[string]float64
	// Recommended is the candidate kura codecs recommends.
	Recommended string
}

type codecsReport struct {
	Schema    string  `json:"schema"`
	JSONBytes float64 `json:"json_bytes"`
	Results   []struct {
		Name  string  `json:"name"`
		Bytes float64 `json:"bytes"`
	} `json:"results"`
	Recommended string `json:"recommended"`
}

// ReadCodecs reads the JSON that `kura codecs --json` printed (schema
// kura.codecs/v1).
func ReadCodecs(r io.Reader) (*CodecSizes, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBenchBytes+1))
	if err != nil {
		return nil, fmt.Errorf("codecs result: %w", err)
	}
	if len(data) > maxBenchBytes {
		return nil, fmt.Errorf("%w: codecs result larger than %d bytes", ErrInput, maxBenchBytes)
	}
	var cr codecsReport
	if err := json.Unmarshal(data, &cr); err != nil {
		return nil, fmt.Errorf("%w: codecs result is not the JSON of kura codecs --json: %v", ErrInput, err)
	}
	if cr.Schema != CodecsSchema {
		return nil, fmt.Errorf("%w: codecs result has schema %q; this kura reads %q", ErrInput, cr.Schema, CodecsSchema)
	}
	c := &CodecSizes{Bytes: map[string]float64{}, Recommended: cr.Recommended}
	usable := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) && v <= maxBytes }
	if usable(cr.JSONBytes) {
		c.Bytes["json"] = cr.JSONBytes
	}
	for _, res := range cr.Results {
		if res.Name != "" && usable(res.Bytes) {
			c.Bytes[res.Name] = res.Bytes
		}
	}
	if len(c.Bytes) < 2 {
		return nil, fmt.Errorf("%w: codecs result holds fewer than two measured codecs", ErrInput)
	}
	return c, nil
}

// Ratio is the codec what-if from one candidate to another: stored bytes
// under to over stored bytes under from, on the same values.
func (c *CodecSizes) Ratio(from, to string) (float64, error) {
	f, ok1 := c.Bytes[from]
	t, ok2 := c.Bytes[to]
	if !ok1 || !ok2 {
		missing := from
		if ok1 {
			missing = to
		}
		return 0, fmt.Errorf("%w: kura codecs measured no %q (it has %s)", ErrInput, missing, c.names())
	}
	return t / f, nil
}

func (c *CodecSizes) names() string {
	var n []string
	for k := range c.Bytes {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}
