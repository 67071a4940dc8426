package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kuracache/kura/codec"
	"github.com/kuracache/kura/codecfit"
	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/internal/redact"
	"github.com/kuracache/kura/store/storeurl"
)

func newCodecsCmd() *cobra.Command {
	var (
		url        string
		prefix     string
		samples    int
		asJSON     bool
		htmlPath   string
		dictOut    string
		publish    bool
		publishURL string
		dictSizes  []string
		minTime    time.Duration
		quiet      bool
	)
	cmd := &cobra.Command{
		Use:   "codecs [FILE|DIR|-]... [--url URL [--prefix P]]",
		Short: "Find the codec and compression dictionary that fit your own values",
		Long: `codecs measures every codec kura offers on your values and recommends one.

Values come from JSON, JSON Lines or NDJSON files, every file of a directory,
stdin ("-"), or a live Redis, Redis Cluster or memcached (--url, sampled with
SCAN or lru_crawler metadump, optionally only keys with --prefix: one
dictionary per kind of value). Half of the values train the dictionaries; all
figures are measured on the other half, which the dictionaries never saw.

For each candidate (no compression, S2 (kura's default, Snappy-compatible),
S2 better, zstd at levels 1, 3 and 7, S2 and zstd with dictionaries of 4, 16
and 64 KiB, and the compact envelope with and without an S2 dictionary) it
reports the bytes stored (total, per-value percentiles, against
JSON and against msgpack+snappy), encode and decode CPU per value and MB/s
on this machine, allocations, and the network bytes per 1,000 reads. The
recommendation says why; --html writes a report with the bytes-versus-CPU
chart and its Pareto frontier.

With a dictionary recommended, --dict-out writes it to a file and --publish
puts it under its reserved key on every server of --url (or --publish-url),
where readers built with a dictstore.Registry find it.`,
		Example: `  kura codecs articles.jsonl
  kura codecs ./samples/ --html report.html
  cat values.ndjson | kura codecs -
  kura codecs --url redis://127.0.0.1:6379 --prefix article: --samples 2000 --dict-out articles.dict
  kura codecs --url memcached://10.0.0.1:11211,10.0.0.2:11211 --prefix user: --publish --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			progress := func(msg string) {
				if !quiet {
					fmt.Fprintln(errOut, "codecs:", msg)
				}
			}
			// A URL may come first, as in every command; never take it for
			// a file name (an error would print it, password and all).
			raw, rest, err := takeURL(url, args, false)
			if err != nil {
				return err
			}
			url, args = raw, rest
			for _, a := range args {
				if strings.Contains(a, "://") {
					return fmt.Errorf("give one URL, first or with --url; %q is another", redact.URL(a))
				}
			}
			if len(args) == 0 && url == "" {
				return errors.New("no values: give files, a directory, - for stdin, or --url for a live server")
			}
			if publish && url == "" && publishURL == "" {
				return errors.New("--publish needs --url or --publish-url (where to publish)")
			}
			if publishURL != "" {
				// Checked before the work: a bad target used to pass
				// unnoticed (exit 0) when no dictionary was recommended.
				if !publish {
					return errors.New("--publish-url names where --publish puts the dictionary; add --publish")
				}
				if _, err := storeurl.ParseServer(publishURL); err != nil {
					return fmt.Errorf("--publish-url: %w", err)
				}
			}
			switch {
			case samples < 1 || samples > 10_000_000:
				// 0 and negative numbers used to sample the default 1000.
				return fmt.Errorf("--samples \"%d\": want the number of values to sample, from 1 to 10,000,000", samples)
			case minTime < 0 || minTime > time.Hour:
				return fmt.Errorf("--min-time \"%s\": want a duration from 0 to 1h, such as 200ms", minTime)
			}
			sizes, err := parseSizes(dictSizes)
			if err != nil {
				return err
			}
			var values []codecfit.Value
			for _, a := range args {
				var vs []codecfit.Value
				if a == "-" {
					vs, err = codecfit.Read(cmd.InOrStdin(), "stdin")
				} else {
					vs, err = codecfit.LoadPath(a)
				}
				if err != nil {
					return err
				}
				progress(fmt.Sprintf("read %d values from %s", len(vs), a))
				values = append(values, vs...)
			}
			if url != "" {
				st, target, err := openStore(ctx, url)
				if err != nil {
					return err
				}
				defer st.Close()
				reg, err := dictstore.New(dictstore.Options{Store: st})
				if err != nil {
					return err
				}
				cd, err := codec.New(codec.Options{DictionarySource: reg})
				if err != nil {
					return err
				}
				progress(fmt.Sprintf("sampling %d values from %s", samples, target.Redacted()))
				vs, ss, err := codecfit.SampleStore(ctx, st, codecfit.SampleOptions{Prefix: prefix, N: samples, Codec: cd})
				if err != nil {
					return fmt.Errorf("sample %s: %w", target.Redacted(), err)
				}
				progress(fmt.Sprintf("listed %d keys, read %d values (%d kura, %d JSON, %d other), skipped %d",
					ss.Listed, ss.Read, ss.Kura, ss.JSON, ss.Raw, ss.Skipped))
				values = append(values, vs...)
			}
			rep, err := codecfit.Analyze(values, codecfit.Options{DictSizes: sizes, MinTime: minTime, Progress: progress})
			if errors.Is(err, codecfit.ErrTooFewValues) {
				// Say where the values came from and what to do, not the
				// engine's name ("codecfit: need at least 4 values").
				where, more := "in the files given", "give more values"
				if url != "" {
					where, more = "sampled", "sample more keys or widen --prefix"
					if prefix != "" {
						where = fmt.Sprintf("under --prefix %q", prefix)
					}
				}
				n := fmt.Sprintf("%d values", len(values))
				if len(values) == 1 {
					n = "1 value"
				}
				return fmt.Errorf("only %s %s; kura codecs needs at least 4 (half train the dictionaries, half are measured): %s", n, where, more)
			}
			if err != nil {
				return err
			}
			if htmlPath != "" {
				if err := writeFile(htmlPath, func(w io.Writer) error { return codecfit.WriteHTML(w, rep) }); err != nil {
					return err
				}
				progress("wrote " + htmlPath)
			}
			dict := rep.Dictionary(rep.Recommended)
			if (dictOut != "" || publish) && dict == nil {
				progress("no dictionary recommended: nothing to write or publish")
			}
			if dict != nil && dictOut != "" {
				// A dictionary embeds text of the sampled values: 0600.
				if err := writePrivate(dictOut, dict); err != nil {
					return err
				}
				progress(fmt.Sprintf("wrote dictionary %08x (%d bytes) to %s", codec.DictionaryID(dict), len(dict), dictOut))
			}
			if dict != nil && publish {
				target := publishURL
				if target == "" {
					target = url
				}
				st, pt, err := openStore(ctx, target)
				if err != nil {
					return err
				}
				defer st.Close()
				reg, err := dictstore.New(dictstore.Options{Store: st})
				if err != nil {
					return err
				}
				id, err := reg.Publish(ctx, dict)
				if err != nil {
					return err
				}
				progress(fmt.Sprintf("published dictionary %08x under %s on every server of %s", id, reg.Key(id), pt.Redacted()))
			}
			if asJSON {
				return writeJSON(out, func(w io.Writer) error { return codecfit.WriteJSON(w, rep) })
			}
			return codecfit.WriteText(out, rep)
		},
	}
	f := cmd.Flags()
	addURLFlag(f, &url, "sample values from a live cache: redis://[user:password@]host:port[/db], rediss://... (TLS), redis://h1:p1,h2:p2 (Cluster), redis+ring://h1:p1,h2:p2 (sharded standalone Redis), redis+sentinel://s1:26379[,s2:26379]/MASTERSET (Sentinel) or memcached://h1:p1[,h2:p2]")
	f.StringVar(&prefix, "prefix", "", "with --url, only keys starting with this prefix (one kind of value)")
	f.IntVar(&samples, "samples", 1000, "with --url, the number of values sampled")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (schema kura.codecs/v1)")
	f.StringVar(&htmlPath, "html", "", "write an HTML report with the bytes-vs-CPU chart to this file")
	f.StringVar(&dictOut, "dict-out", "", "write the recommended dictionary to this file")
	f.BoolVar(&publish, "publish", false, "publish the recommended dictionary on every server of --url (or --publish-url)")
	f.StringVar(&publishURL, "publish-url", "", "where --publish puts the dictionary, if not --url")
	f.StringSliceVar(&dictSizes, "dict-sizes", []string{"4KiB", "16KiB", "64KiB"}, "dictionary sizes to train (KiB = 1,024 B, K and KB = 1,000 B; at most 16MiB)")
	f.DurationVar(&minTime, "min-time", 200*time.Millisecond, "how long each encode and decode measurement runs at least")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	return cmd
}

func parseSizes(ss []string) ([]int, error) {
	var out []int
	for _, s := range ss {
		n, err := parseSize(s)
		if err != nil || n < 8 || n > 16<<20 { // the trainers refuse a dictionary under 8 bytes
			return nil, fmt.Errorf("--dict-sizes %q: want sizes from 8B to 16MiB, such as 16KiB", s)
		}
		out = append(out, int(n))
	}
	return out, nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
