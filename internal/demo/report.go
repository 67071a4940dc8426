package demo

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Print writes the demo's table.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "\nNetwork bytes and value size: JSON vs gob vs msgpack+snappy vs kura (with and without a trained dictionary), %d articles (mean %.0f B as JSON), store: %s\n\n", r.Records, r.JSONBytes, r.Store)
	var base *CodecResult
	for i := range r.Codecs {
		if r.Codecs[i].Codec == "json" {
			base = &r.Codecs[i]
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "codec\tbytes/value\tvs JSON\twire bytes\tvs JSON\tFetch/s\tvs JSON\tp50\tp99\t")
	for _, c := range r.Codecs {
		ratio := func(a, b float64) string {
			if base == nil || b == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2fx", a/b)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t\n",
			c.Codec, c.StoredBytes, ratio(c.StoredBytes, base.StoredBytes),
			human(c.WireBytes), ratio(float64(c.WireBytes), float64(base.WireBytes)),
			c.OpsPerSec, ratio(c.OpsPerSec, base.OpsPerSec),
			round(c.P50), round(c.P99))
	}
	tw.Flush()
	src := "the server's own total_net_output_bytes"
	if len(r.Codecs) > 0 && !r.Codecs[0].WireFromServer {
		src = "value bytes read (no server counter for this store)"
	}
	fmt.Fprintf(w, "\nwire bytes: sent by the server for %d Fetches per codec, from %s.\n", r.readCount(), src)
	fmt.Fprintln(w, "In production, a Go service saw 14,602 B JSON -> 7,789 B msgpack+snappy (0.53x) and Redis network bytes down to about 1/3.")
}

func (r *Result) readCount() int {
	if len(r.Codecs) == 0 {
		return 0
	}
	return r.Codecs[0].Reads
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func round(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}
