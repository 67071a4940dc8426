package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kuracache/kura/internal/units"
	"github.com/kuracache/kura/scan"
)

func newScanCmd() *cobra.Command {
	var (
		opts      scan.Options
		big       string
		bandwidth string
		asJSON    bool
		quiet     bool
		noSave    bool
		url       string
	)
	cmd := &cobra.Command{
		Use:   "scan URL",
		Short: "Find the big keys of a live cache, and what compression would save per key pattern",
		Long: `scan walks a live Redis, Redis Cluster or memcached without hurting it (Redis
SCAN with COUNT on every master; memcached lru_crawler metadump and mg without
values; at most --rate commands per second to each server) and reports:

  - the biggest keys, with type, TTL, length, value bytes and (Redis) MEMORY USAGE;
  - the distribution of value sizes;
  - per key pattern (user:*:items, detected automatically): keys, bytes, TTL
    spread, share of memory, and what kura's codecs (S2, zstd) would save,
    estimated from a random sample of values per pattern;
  - values of --big or more, with what one read of them costs on a --bandwidth link.

Progress goes to stderr. The JSON report (--json; schema in docs/scan.md) is
also saved to the results directory that kura ui reads ($KURA_RESULTS_DIR,
else $XDG_STATE_HOME/kura/results, else ~/.local/state/kura/results) unless
--no-save. Values are read only for the sample, and never printed.`,
		Example: `  kura scan redis://127.0.0.1:6379
  kura scan redis://10.0.0.1:6379,10.0.0.2:6379 --rate 5000 --json > scan.json
  kura scan memcached://10.0.0.1:11211,10.0.0.2:11211 --big 100KB --bandwidth 250Mbit
  kura scan redis://127.0.0.1:6379 --separator / --samples 1000`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, rest, err := takeURL(url, args, true)
			switch {
			case err != nil:
				return err
			case raw == "":
				return errors.New("no cache named: give its URL, such as kura scan redis://127.0.0.1:6379")
			case len(rest) > 0:
				return fmt.Errorf("scan takes one URL; %q is one argument too many", rest[0])
			}
			if opts.Big, err = parseSize(big); err != nil {
				return fmt.Errorf("--big %q: want a size such as 1.3MB, 120GB, 512KiB or 4096", big)
			}
			if opts.Big <= 0 {
				return fmt.Errorf("--big %q: want a size above zero", big)
			}
			if opts.Bandwidth, err = parseBandwidth(bandwidth); err != nil {
				return fmt.Errorf("--bandwidth %q: want a link speed in bits per second, such as 1Gbit, 250Mbit or 100mbps", bandwidth)
			}
			if opts.Count <= 0 {
				return fmt.Errorf("--count \"%d\": want a whole number above zero", opts.Count)
			}
			if opts.Top <= 0 {
				return fmt.Errorf("--top \"%d\": want a whole number above zero", opts.Top)
			}
			if opts.Rate < 0 {
				return fmt.Errorf("--rate \"%d\": want 0 (no limit) or above", opts.Rate)
			}
			if opts.Rate == 0 {
				opts.Rate = -1
			}
			if opts.Samples == 0 || opts.Samples < -1 {
				return fmt.Errorf("--samples \"%d\": want a whole number above zero, or -1 for every value", opts.Samples)
			}
			ctx := cmd.Context()
			st, target, err := openStore(ctx, raw)
			if err != nil {
				return err
			}
			defer st.Close()
			opts.Target = target.Redacted()
			stderr := cmd.ErrOrStderr()
			if !quiet {
				opts.Progress = scanProgress(stderr)
			}
			rep, err := scan.Run(ctx, st, opts)
			if rep == nil {
				return err
			}
			if !noSave {
				saveResult(stderr, "scan", rep, quiet)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if werr := writeJSON(out, func(w io.Writer) error {
					enc := json.NewEncoder(w)
					enc.SetIndent("", "  ")
					return enc.Encode(rep)
				}); werr != nil {
					return werr
				}
			} else if werr := scan.WriteText(out, rep); werr != nil {
				return werr
			}
			if err != nil {
				return err
			}
			if !rep.Complete {
				return errors.New("scan incomplete: " + strings.Join(rep.Errors, "; "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	addURLFlag(f, &url, urlHelp)
	f.IntVar(&opts.Count, "count", scan.DefaultCount, "SCAN COUNT hint, and keys per pipeline")
	f.IntVar(&opts.Rate, "rate", scan.DefaultRate, "most commands per second sent to each server (0: no limit)")
	f.IntVar(&opts.Samples, "samples", scan.DefaultSamples, "values read per pattern for the savings estimate (-1: every value)")
	f.StringVar(&opts.Separator, "separator", "", `key part separator for patterns (default: the first of ":" "/" "|" "." in each key)`)
	f.StringVar(&big, "big", "100KB", "call out values of this size or more (KB and K = 1,000 B, KiB = 1,024 B; MB, MiB, GB, GiB)")
	f.StringVar(&bandwidth, "bandwidth", "1Gbit", "link speed for the cost of reading a big value (bit/s; kbit, Mbit, Gbit)")
	f.IntVar(&opts.Top, "top", scan.DefaultTop, "how many of the biggest keys to list")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (schema kura.scan/v1, docs/scan.md)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress line")
	f.BoolVar(&noSave, "no-save", false, "do not save the report to the results directory")
	return cmd
}

// scanProgress returns a scan progress callback that rewrites one line
// on a terminal and prints a line per update elsewhere.
func scanProgress(w io.Writer) func(scan.Progress) {
	tty := isTerminal(w)
	return func(p scan.Progress) {
		rate := 0.0
		if s := p.Elapsed.Seconds(); s > 0 {
			rate = float64(p.Keys) / s
		}
		line := fmt.Sprintf("scan: %s keys, %.0f keys/s, %d/%d servers done, %s", units.Count(p.Keys), rate, p.ServersDone, p.Servers, p.Phase)
		if p.Phase == "sample" {
			line += " (reading sampled values)"
		}
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", line)
			if p.Phase == "done" {
				fmt.Fprintln(w)
			}
			return
		}
		fmt.Fprintln(w, line)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// parseBandwidth reads "1Gbit", "250Mbit", "10mbps", "1e9".
func parseBandwidth(s string) (float64, error) {
	num, unit := splitUnit(s)
	u := strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(unit), "/s"), "ps")
	u = strings.TrimSuffix(u, "bit")
	u = strings.TrimSuffix(u, "b")
	mult := map[string]float64{"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[u]
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || f <= 0 || f*mult > 1e13 {
		return 0, fmt.Errorf("%q is not a link speed in bits per second (examples: 1Gbit, 250Mbit, 100mbps)", s)
	}
	return f * mult, nil
}

func splitUnit(s string) (num, unit string) {
	s = strings.TrimSpace(s)
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') && s[i-1] != '.' {
		i--
	}
	return s[:i], strings.TrimSpace(s[i:])
}
