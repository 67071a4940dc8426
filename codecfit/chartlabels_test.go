package codecfit

import (
	"bytes"
	"testing"

	"github.com/kuracache/kura/internal/harness/vistest"
)

// crowded is a report whose candidates sit close together, as `kura
// codecs` draws them on a real corpus: zstd levels with and without
// dictionaries a few bytes and a fraction of a microsecond apart. Before
// the labels were placed by vis.PlaceLabels, each name was drawn at a
// fixed offset from its point and neighbours' names overprinted.
func crowded() *Report {
	r := &Report{Values: 240, TrainValues: 120, TestValues: 120, JSONBytes: 120 * 2000, RawP50: 1900,
		Recommended: "zstd-3+dict-16KiB", Machine: "2 cores"}
	add := func(name string, bytes int64, enc, dec float64, pareto, ref bool) {
		r.Results = append(r.Results, Result{Name: name, Bytes: bytes * 120, EncodeNs: enc, DecodeNs: dec, Pareto: pareto, Reference: ref})
	}
	add("json", 2000, 900, 1100, false, true)
	add("msgpack+snappy", 1010, 1500, 900, false, true)
	add("s2", 1000, 1400, 800, true, false)
	add("s2+dict-16KiB", 720, 1600, 900, true, false)
	add("zstd-1", 700, 2600, 1500, true, false)
	add("zstd-3", 690, 2700, 1500, true, false)
	add("zstd-1+dict-16KiB", 560, 2900, 1600, true, false)
	add("zstd-3+dict-16KiB", 550, 3000, 1600, true, false)
	add("zstd-3+dict-64KiB", 545, 3050, 1650, true, false)
	add("zstd-6+dict-64KiB", 540, 3300, 1700, true, false)
	add("brotli-ish", 1005, 1450, 850, false, false)
	return r
}

// TestChartLabelsDoNotOverprint: in headless Chromium, at 1280 and 390
// px, no name on the bytes-vs-CPU chart overlaps another text of the
// chart, and none is cut off; the recommended candidate is named.
func TestChartLabelsDoNotOverprint(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, crowded()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte(`class="label" `)) || !bytes.Contains(b.Bytes(), []byte(`>zstd-3&#43;dict-16KiB</text>`)) {
		t.Fatalf("the recommended candidate is not named on the chart")
	}
	vistest.CheckLayout(t, b.String(), 1280, 390)
}
