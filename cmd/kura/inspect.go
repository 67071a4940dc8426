package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kuracache/kura/dictstore"
	"github.com/kuracache/kura/inspect"
	"github.com/kuracache/kura/internal/vis"
	"github.com/kuracache/kura/store/storeurl"
)

func newInspectCmd() *cobra.Command {
	var (
		asJSON   bool
		rawValue bool
		mask     []string
		url      string
		full     bool
	)
	cmd := &cobra.Command{
		Use:   "inspect URL KEY...",
		Short: "Decode what is stored under cache keys, for a person",
		Long: `inspect reads each key from a live Redis, Redis Cluster, sharded Redis or
memcached and shows what is stored there: the kura envelope header (format
version, serializer, compressor, dictionary), stored and uncompressed sizes,
the TTL left, the server's own size for the key, and the value decoded as JSON.
A value compressed with a dictionary is decoded with the dictionary its writer
published in the cache (checked against the digest the value carries); a
missing or forged one is named, never guessed. Values kura did not write are
recognised where possible (JSON, text, Snappy, zlib, gzip, go-redis/cache) or
described as unknown bytes. A key holding a Redis hash, list, set, sorted set
or stream is shown with its type, encoding, length and first elements; a key
that cannot be read is reported and the others are still shown.

inspect reads at most 1MiB of a value (a longer one shows its first bytes)
and prints at most 64KiB of a decoded value; --full reads and prints it whole.

URL is redis://[user:password@]host:port[/db], rediss://... (TLS),
redis://host1:port1,host2:port2 (Cluster), redis+ring://host1:port1,host2:port2
(sharded standalone Redis), redis+sentinel://sentinel1:26379,sentinel2:26379/MASTERSET
(the primary Redis Sentinel names), or memcached://host1:port1,host2:port2.`,
		Example: `  kura inspect redis://127.0.0.1:6379 article:1 article:2
  kura inspect memcached://10.0.0.1:11211,10.0.0.2:11211 user:42 --mask email,phone
  kura inspect redis://127.0.0.1:6379 article:1 --json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			raw, keys, err := takeURL(url, args, true)
			switch {
			case err != nil:
				return err
			case raw == "":
				return errors.New("no cache and no key: give the cache's URL and the keys to decode, such as kura inspect redis://127.0.0.1:6379 article:1")
			}
			if _, err := storeurl.ParseServer(raw); err != nil {
				return err
			}
			if len(keys) == 0 {
				return fmt.Errorf("no key to decode: name one or more after the URL, such as kura inspect %s article:1", storeurl.Redact(raw))
			}
			if slices.Contains(keys, "") {
				return errors.New(`an empty key ("") names nothing a cache can hold; give the key to decode`)
			}
			st, _, err := openStore(ctx, raw)
			if err != nil {
				return err
			}
			defer st.Close()
			opts := inspect.Options{Mask: mask}
			if !full {
				opts.MaxStored, opts.MaxDecoded = inspectMaxStored, 4*inspectMaxStored
			}
			// Structs stored as arrays (the compact envelope) are shown
			// with the field names of their published schemas, and values
			// compressed with a dictionary are decoded with the one their
			// writer published (checked against the digest they carry).
			if reg, err := dictstore.New(dictstore.Options{Store: st}); err == nil {
				opts.Schemas, opts.Dictionaries = reg, reg
			}
			out := cmd.OutOrStdout()
			printMax := inspectMaxPrint
			if full {
				printMax = math.MaxInt
			}
			var reports []inspect.Report
			var missing, failed []string
			var firstErr error
			for _, key := range keys {
				r, err := inspect.Key(ctx, st, key, opts)
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					// One key that cannot be read never hides the others:
					// it is reported with its error, and the command fails
					// at the end.
					r = inspect.Report{Key: key, Error: err.Error()}
					failed = append(failed, strconv.Quote(key))
					if firstErr == nil {
						firstErr = err
					}
				} else if !r.Found {
					missing = append(missing, strconv.Quote(key))
				}
				reports = append(reports, r)
			}
			if asJSON {
				if err := writeJSON(out, func(w io.Writer) error {
					enc := json.NewEncoder(w)
					enc.SetIndent("", "  ")
					return enc.Encode(reports)
				}); err != nil {
					return err
				}
			} else {
				for i, r := range reports {
					if i > 0 {
						fmt.Fprintln(out)
					}
					printReport(out, r, rawValue, printMax)
				}
			}
			if len(failed) > 0 {
				if len(keys) == 1 {
					return fmt.Errorf("key %s: %w", failed[0], firstErr)
				}
				return fmt.Errorf("%d of %d keys could not be read (%s): %w", len(failed), len(keys), strings.Join(failed, ", "), firstErr)
			}
			if len(missing) > 0 {
				// Like ls or grep: a key that is not there is a failure a
				// script can see.
				if len(keys) == 1 {
					return fmt.Errorf("key %s not found", missing[0])
				}
				return fmt.Errorf("%d of %d keys not found: %s", len(missing), len(keys), strings.Join(missing, ", "))
			}
			return nil
		},
	}
	addURLFlag(cmd.Flags(), &url, urlHelp)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the reports as JSON")
	cmd.Flags().BoolVar(&rawValue, "raw", false, "print the decoded value compact, on one line, instead of indented")
	cmd.Flags().BoolVar(&full, "full", false, "read and print whole values (default: the first 1MiB read, 64KiB of decoded text printed)")
	cmd.Flags().StringSliceVar(&mask, "mask", nil, "field names whose values are shown as *** (personal data)")
	return cmd
}

// What kura inspect reads and prints of a value without --full.
const (
	inspectMaxStored = 1 << 20
	inspectMaxPrint  = 64 << 10
)

func printReport(w io.Writer, r inspect.Report, raw bool, max int) {
	// Keys, notes and values are whatever the cache holds: shown with
	// controls and bidirectional characters escaped, never obeyed.
	fmt.Fprintf(w, "key      %s\n", vis.Escape(r.Key))
	if r.Error != "" {
		fmt.Fprintf(w, "error    %s\n", vis.Escape(r.Error))
		return
	}
	if !r.Found {
		fmt.Fprintln(w, "         (no such key)")
		return
	}
	if r.Type != "" {
		t := r.Type
		if r.Encoding != "" {
			t += ", encoding " + r.Encoding
		}
		if r.Type != "string" {
			t += fmt.Sprintf(", %d %s", r.Length, plural(r.Length, "element"))
		}
		fmt.Fprintf(w, "type     %s\n", vis.Escape(t))
	}
	if h := r.Kura; h != nil {
		fmt.Fprintf(w, "format   kura v%d, %s", h.Version, h.Kind)
		if h.Serializer != "" {
			fmt.Fprintf(w, ", %s", h.Serializer)
		}
		if h.Compressor != "" && h.Compressor != "none" {
			fmt.Fprintf(w, " + %s", h.Compressor)
		}
		if h.Dictionary != 0 {
			fmt.Fprintf(w, " (dictionary %d)", h.Dictionary)
		}
		fmt.Fprintf(w, ", %d-byte header\n", h.HeaderLen)
		var fields []string
		if h.Written != nil {
			fields = append(fields, "written "+h.Written.Format("2006-01-02 15:04:05.000 UTC"))
		}
		if h.TTLSeconds > 0 {
			fields = append(fields, fmt.Sprintf("writer's TTL %s", time.Duration(h.TTLSeconds*float64(time.Second))))
		}
		if h.CostSeconds > 0 {
			fields = append(fields, fmt.Sprintf("loader took %s", time.Duration(h.CostSeconds*float64(time.Second))))
		}
		if h.Schema != "" {
			fields = append(fields, "schema "+h.Schema)
		}
		if h.Lease {
			fields = append(fields, "lease token (not shown)")
		}
		if len(fields) > 0 {
			fmt.Fprintf(w, "fields   %s\n", strings.Join(fields, ", "))
		}
	} else if r.Format != "redis-collection" {
		fmt.Fprintf(w, "format   %s\n", r.Format)
	}
	size := fmt.Sprintf("%d B stored", r.StoredBytes)
	if r.RawBytes > 0 && r.RawBytes != r.StoredBytes {
		size += fmt.Sprintf(", %d B uncompressed (%.0f%%)", r.RawBytes, 100*float64(r.StoredBytes)/float64(r.RawBytes))
	}
	if r.ServerBytes > 0 {
		size += fmt.Sprintf(", %d B on the server", r.ServerBytes)
	}
	fmt.Fprintf(w, "size     %s\n", size)
	switch {
	case r.NoTTL:
		fmt.Fprintln(w, "ttl      none (never expires)")
	case r.TTLSeconds != nil:
		fmt.Fprintf(w, "ttl      %.1fs\n", *r.TTLSeconds)
	}
	if r.Node != "" {
		fmt.Fprintf(w, "node     %s\n", vis.Escape(r.Node))
	}
	if r.Note != "" {
		fmt.Fprintf(w, "note     %s\n", vis.Escape(r.Note))
	}
	if len(r.MaskUnmatched) > 0 {
		fmt.Fprintf(w, "mask     no field named %s in this value (names match case-insensitively)\n", vis.Escape(strings.Join(r.MaskUnmatched, ", ")))
	}
	if r.Truncated && len(r.Prefix) > 0 {
		fmt.Fprintf(w, "prefix   %s\n", vis.EscapeBytes(r.Prefix))
	}
	if len(r.Value) > 0 {
		var v string
		var cut bool
		if raw {
			v = string(r.Value[:min(len(r.Value), max)])
			cut = len(r.Value) > max
		} else {
			v, cut = inspect.Indent(r.Value, "         ", "  ", max)
		}
		lines := strings.Split(v, "\n")
		for i, l := range lines {
			lines[i] = vis.EscapeJSON(l)
		}
		fmt.Fprintf(w, "value    %s\n", strings.Join(lines, "\n"))
		if cut {
			fmt.Fprintf(w, "         ... cut at %d bytes of text (--full prints it all)\n", max)
		}
	}
}

// plural returns word, with an s unless n is 1.
func plural[N int | int64](n N, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
