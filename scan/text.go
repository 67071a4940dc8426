package scan

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kuracache/kura/internal/units"
	"github.com/kuracache/kura/internal/vis"
)

// WriteText writes the report for a person: totals, the biggest keys, the
// size histogram, the patterns with their savings, and the big values.
// It shows key names, never values.
func WriteText(w io.Writer, r *Report) error {
	var sb strings.Builder
	writeText(&sb, r)
	var out strings.Builder
	for _, line := range strings.SplitAfter(sb.String(), "\n") {
		nl := strings.HasSuffix(line, "\n")
		out.WriteString(strings.TrimRight(line, " \n"))
		if nl {
			out.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, out.String())
	return err
}

func writeText(w io.Writer, r *Report) {
	ew := w
	servers := fmt.Sprintf("%d servers", len(r.Servers))
	if len(r.Servers) == 1 {
		servers = "1 server"
	}
	keys := units.Count(r.Keys) + " keys"
	if r.Keys == 1 {
		keys = "1 key"
	}
	fmt.Fprintf(ew, "%s (%s, %s): %s", vis.Escape(r.Target), r.Kind, servers, keys)
	if r.ElapsedSeconds > 0 {
		fmt.Fprintf(ew, " in %s", round(time.Duration(r.ElapsedSeconds*float64(time.Second))))
	}
	fmt.Fprintf(ew, "; %s in values", Bytes(r.ValueBytes))
	if r.MemoryBytes > 0 {
		fmt.Fprintf(ew, ", %s server memory", Bytes(r.MemoryBytes))
	}
	fmt.Fprintln(ew)
	if !r.Complete {
		fmt.Fprintln(ew, "INCOMPLETE: the walk stopped early; the figures cover what was seen.")
	}
	for _, e := range r.Errors {
		fmt.Fprintf(ew, "error: %s\n", vis.Escape(e))
	}
	if r.Keys == 0 {
		fmt.Fprintln(ew, "\nNo keys.")
		return
	}

	fmt.Fprintf(ew, "\nBiggest keys\n")
	tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  key\ttype\tttl\tlength\tvalue\tmemory")
	for _, k := range r.Biggest {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", vis.Escape(k.Key), vis.Escape(k.Type), ttl(k.TTLSeconds), units.Count(k.Length), Bytes(k.ValueBytes), orDash(k.MemoryBytes))
	}
	tw.Flush()

	fmt.Fprintf(ew, "\nValue sizes\n")
	var maxKeys int64
	first, last := -1, -1
	for i, b := range r.Histogram {
		if b.Keys > 0 {
			if first < 0 {
				first = i
			}
			last = i
			maxKeys = max(maxKeys, b.Keys)
		}
	}
	tw = tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	if first < 0 {
		// A report whose keys have no size (one read back from JSON that
		// a person edited) prints without the histogram.
		first, last = 0, -1
	}
	for _, b := range r.Histogram[first : last+1] {
		label := "<= " + units.FormatBound(b.LE)
		if b.LE < 0 {
			label = "> " + units.FormatBound(r.Histogram[len(r.Histogram)-2].LE)
		}
		bar := strings.Repeat("#", int(math.Ceil(30*float64(b.Keys)/float64(maxKeys))))
		if b.Keys == 0 {
			bar = ""
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t %s\n", label, keysWord(b.Keys), Bytes(b.ValueBytes), bar)
	}
	tw.Flush()

	fmt.Fprintf(ew, "\nKey patterns\n")
	tw = tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  pattern\tkeys\tvalues\tmean\tmemory\tshare\tttl\ts2 saves\tzstd saves")
	for _, p := range r.Patterns {
		s2, zs := "-", "-"
		if p.Savings != nil {
			for _, e := range p.Savings.Estimates {
				v := FormatSaving(e.SavedBytes, e.SavedFraction)
				switch e.Codec {
				case "s2":
					s2 = v
				case "zstd":
					zs = v
				}
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%s\n", vis.Escape(p.Pattern), units.Count(p.Keys), Bytes(p.ValueBytes),
			Bytes(int64(math.Round(p.MeanBytes))), orDash(p.MemoryBytes), 100*p.MemoryShare, ttlSpread(p), s2, zs)
	}
	tw.Flush()
	fmt.Fprintf(ew, "  (savings: up to %d values per pattern encoded as kura would store them; kura values and values\n   already compressed count as they are)\n", r.Options.Samples)

	bv := r.BigValues
	fmt.Fprintf(ew, "\nValues of %s or more: %s", Bytes(bv.ThresholdBytes), units.Count(bv.Count))
	if bv.Count == 0 {
		fmt.Fprintln(ew)
		return
	}
	fmt.Fprintf(ew, " (one read on a %s link)\n", Bits(bv.BandwidthBits))
	tw = tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	for i, k := range bv.Keys {
		if i == 20 {
			fmt.Fprintf(tw, "  ... and %s more (see --json)\n", units.Count(bv.Count-20))
			break
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s per read\t%.0f reads/s fill the link\n", vis.Escape(k.Key), Bytes(k.ValueBytes), round(time.Duration(k.ReadSeconds*float64(time.Second))), k.ReadsPerSecond)
	}
	tw.Flush()
}

// Bytes formats a byte count as every kura command does
// (internal/units: decimal units, three significant digits: 1.3 MB).
func Bytes(n int64) string { return units.FormatBytes(float64(n)) }

// Bits formats a link speed in bits per second.
func Bits(b float64) string {
	switch {
	case b >= 1e9:
		return trim(b/1e9) + " Gbit/s"
	case b >= 1e6:
		return trim(b/1e6) + " Mbit/s"
	case b >= 1e3:
		return trim(b/1e3) + " kbit/s"
	}
	return trim(b) + " bit/s"
}

func trim(f float64) string {
	if f >= 100 {
		return fmt.Sprintf("%.0f", f)
	}
	s := fmt.Sprintf("%.1f", f)
	return strings.TrimSuffix(s, ".0")
}

func orDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return Bytes(n)
}

func ttl(s float64) string { return FormatTTL(s) }

// FormatTTL shows a TTL in seconds the way a person says it (45s, 12m30s,
// 1h, 2h5m, 3d4h); a negative TTL is "none".
func FormatTTL(s float64) string {
	if s < 0 {
		return "none"
	}
	return human(time.Duration(s * float64(time.Second)))
}

// human shows a TTL the way a person says it: 45s, 12m30s, 1h, 2h5m, 3d4h.
func human(d time.Duration) string {
	sec := int64(d.Round(time.Second) / time.Second)
	var parts []string
	for _, u := range []struct {
		n    int64
		name string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}} {
		if sec >= u.n {
			parts = append(parts, fmt.Sprintf("%d%s", sec/u.n, u.name))
			sec %= u.n
		}
		if len(parts) == 2 {
			break
		}
	}
	if len(parts) == 0 {
		return "0s"
	}
	return strings.Join(parts, "")
}

func ttlSpread(p Pattern) string {
	withTTL := p.Keys - p.TTL.NoTTL
	switch {
	case withTTL == 0:
		return "none"
	case p.TTL.NoTTL > 0:
		return fmt.Sprintf("%s..%s, %s none", ttl(p.TTL.MinSeconds), ttl(p.TTL.MaxSeconds), units.Count(p.TTL.NoTTL))
	case ttl(p.TTL.MinSeconds) == ttl(p.TTL.MaxSeconds):
		return ttl(p.TTL.MinSeconds)
	}
	return ttl(p.TTL.MinSeconds) + ".." + ttl(p.TTL.MaxSeconds)
}

// round shows a duration at a precision a person reads: ms below a
// second, 0.1 s below a minute, whole minutes above an hour.
func round(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

// FormatSaving formats an estimated saving: a codec that stores more than it
// was given costs, and says so, rather than saving "-90000 B (-9%)".
func FormatSaving(bytes int64, frac float64) string {
	if bytes < 0 {
		return fmt.Sprintf("costs %s (+%.0f%%)", Bytes(-bytes), -100*frac)
	}
	return fmt.Sprintf("%s (%.0f%%)", Bytes(bytes), 100*frac)
}

// keysWord is "1 key", "2 keys".
func keysWord(n int64) string {
	if n == 1 {
		return "1 key"
	}
	return units.Count(n) + " keys"
}
