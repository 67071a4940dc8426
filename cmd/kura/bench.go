package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kuracache/kura/loadgen"
	"github.com/kuracache/kura/store/storeurl"
)

// benchFlags holds the flags shared by `bench` and `bench sweep`.
type benchFlags struct {
	cfg      loadgen.Config
	url      string
	command  string
	dist     string
	jsonOut  bool
	hdrFile  string
	quiet    bool
	dataSize string
	threads  int
	// maxErrorRate is --max-error-rate.
	maxErrorRate float64
	// noSave is --no-save: the result is not kept in the results directory.
	noSave bool
}

const benchLong = `bench drives a Redis, Redis Cluster, sharded Redis or memcached server and reports
throughput, hits and misses, bytes on the wire as Gbps, latency percentiles
from an HdrHistogram, and what the server itself paid: CPU seconds per 1,000
operations and network bytes, read from INFO / stats before and after.

The target is the first argument (default redis://127.0.0.1:6379):
  redis://[user:password@]host:port[/db]   rediss:// for TLS
  redis://host:port,host:port              Redis Cluster (seeds; slots are followed)
  redis+ring://host:port,host:port[?ring=] standalone Redis shards, each key sent where
                                           kura's redisring store puts it (docs/rings.md)
  redis+sentinel://[:password@]sentinel:port[,...]/masterset[?sentinel_password=]
                                           the primary the sentinels name (asked once
                                           at the start; rediss+sentinel:// for TLS)
  memcached://host:port[,host:port...]     memcached (meta protocol; --protocol text)
Anything after the target is a Redis command template: __key__ and __data__
are replaced by a key and a value, as in redis-benchmark-go.

Without --rate the loop is closed, like redis-benchmark and memtier: latency
is measured from the actual send, so a stalled server is under-counted
(coordinated omission). With --rate the loop is open and latency is measured
from each request's intended send time: the numbers a user would see.

Coming from redis-benchmark:
  redis-benchmark           kura bench
  -h HOST -p PORT / -u URI  redis://HOST:PORT (first argument) or -u URL / --url URL
  -a PASSWORD --user USER   -a PASSWORD --user USER, or redis://USER:PASSWORD@HOST:PORT
  -c 50                     -c 50 / --connections 50
  -P 16                     -P 16 / --pipeline 16
  -d 100                    -d 100 / --data-size 100 (also 100-1000, 100:8,1000:2)
  -n 100000                 -n 100000 / --requests 100000 (or --duration 10s)
  -t get / -t set           -t get / --command get (one command per run: get, set, hset,
                            mget, mset, or mixed with --ratio 1:10)
  -r 100000                 -r 100000 / --keys 100000
  --cluster                 --cluster (or just name a cluster node: it is detected)
  --threads N               --threads N (default: all CPUs; 1 leaves a core to a local server)
  -q / --csv                --json`

const benchExample = `  # GET with 50 connections for 10 s; write the key space first so GETs hit
  kura bench redis://127.0.0.1:6379 -t get --prefill

  # redis-benchmark -t set -c 50 -P 16 -d 100 -n 1000000
  kura bench -t set -c 50 -P 16 -d 100 -n 1000000

  # HSET throughput, with redis-benchmark-go's template syntax
  kura bench redis://10.0.224.3:6379 -c 1024 hset __key__ f1 __data__

  # memtier-style SET:GET 1:10, zipf keys, mixed value sizes, 60 s TTL
  kura bench --ratio 1:10 --distribution zipf -d 100:8,10000:2 --ttl 60s

  # open loop at 20,000 ops/s: latencies corrected for coordinated omission
  kura bench --rate 20000 -c 32 --duration 30s --hdr latency.hgrm

  # Redis Cluster, ACL user over TLS, JSON for scripts
  kura bench rediss://app:secret@node1:6379,node2:6379 --json > result.json

  # memcached pool, meta protocol; --protocol text for the classic protocol
  kura bench memcached://10.0.0.5:11211,10.0.0.6:11211 -t mget --multi-keys 20`

func newBenchCmd() *cobra.Command {
	var bf benchFlags
	cmd := &cobra.Command{
		Use:     "bench [TARGET] [COMMAND ARGS...]",
		Short:   "Load-test Redis, Redis Cluster or memcached and report what the server paid",
		Long:    benchLong,
		Example: benchExample,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// "kura bench sweeep" would send SWEEEP to the server as a
			// command template and fail every operation.
			if len(args) > 0 {
				cmd.SuggestionsMinimumDistance = 2
				if alt := cmd.SuggestionsFor(args[0]); len(alt) > 0 {
					return fmt.Errorf("unknown command %q; did you mean kura bench %s? (a Redis command template starts with a Redis command, such as hset __key__ f1 __data__)", args[0], alt[0])
				}
			}
			cfg, err := bf.config(cmd, args)
			if err != nil {
				return err
			}
			cfg.Resolver = resolverOf(cmd.Context())
			if err := checkWritable(bf.hdrFile); err != nil {
				return err
			}
			if !bf.quiet {
				cfg.Progress = progressPrinter(cmd.ErrOrStderr(), "")
			}
			res, err := loadgen.Run(cmd.Context(), cfg)
			if err != nil {
				return benchError(err)
			}
			if err := bf.output(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if !bf.noSave && !res.Interrupted {
				saveResult(cmd.ErrOrStderr(), "bench", res, bf.quiet)
			}
			if res.Interrupted {
				return context.Canceled // partial result printed; main exits 130
			}
			return bf.checkErrors(res)
		},
	}
	bf.register(cmd.Flags(), false)
	cmd.SetFlagErrorFunc(flagError)
	cmd.AddCommand(newBenchSweepCmd())
	return cmd
}

// register binds the flags; in a sweep, --connections, --pipeline and
// --data-size take comma-separated lists and are registered by the sweep.
func (bf *benchFlags) register(f *pflag.FlagSet, sweep bool) {
	c := &bf.cfg
	addURLFlag(f, &bf.url, urlHelp+" (default redis://127.0.0.1:6379)")
	deprecatedAlias(f, "url", "uri")
	f.StringVar(&c.User, "user", "", "Redis ACL user (overrides the URL)")
	f.StringVarP(&c.Password, "password", "a", "", "Redis password (overrides the URL)")
	f.BoolVar(&c.Cluster, "cluster", false, "require Redis Cluster mode (it is detected without this flag)")
	f.BoolVar(&c.InsecureTLS, "insecure", false, "rediss://: do not verify the server certificate")
	f.StringVar(&c.TLSCAFile, "tls-ca", "", "rediss://: PEM file of CA certificates to trust")
	f.StringVar(&c.Protocol, "protocol", "", "memcached protocol: meta (default) or text")
	f.StringVarP(&bf.command, "command", "t", "", "get, set, hset, mget, mset or mixed (default get; mixed with --ratio)")
	f.StringVar(&c.Ratio, "ratio", "", "SET:GET ratio for the mixed workload, like memtier (default 1:10)")
	f.IntVar(&c.MultiKeys, "multi-keys", 10, "keys per mget/mset")
	f.Int64VarP(&c.Keys, "keys", "r", 100000, "key space size (keys are PREFIX + 12 digits)")
	f.StringVar(&c.KeyPrefix, "key-prefix", "key:", "key prefix")
	f.StringVar(&bf.dist, "distribution", "uniform", "key distribution: uniform, zipf or sequential")
	f.Float64Var(&c.ZipfExponent, "zipf-exponent", 0.99, "Zipf exponent s for --distribution zipf")
	f.StringVar(&c.DataContent, "data-content", "random", "value bytes: random (incompressible) or text (compressible, like JSON)")
	f.DurationVar(&c.TTL, "ttl", 0, "expiry for every write, such as 60s (default none)")
	f.BoolVar(&c.Prefill, "prefill", false, "write every key once before the run so reads hit")
	f.DurationVar(&c.Duration, "duration", 0, "length of the run (default 10s, or until --requests)")
	f.Int64VarP(&c.Requests, "requests", "n", 0, "stop after this many operations")
	f.Float64Var(&c.Rate, "rate", 0, "open loop: target ops/s over all connections (latency corrected for coordinated omission)")
	f.DurationVar(&c.Timeout, "timeout", 10*time.Second, "dial and reply timeout per connection")
	f.BoolVar(&bf.jsonOut, "json", false, "print the result as JSON on stdout instead of text")
	f.BoolVarP(&bf.quiet, "quiet", "q", false, "no progress line on stderr")
	f.IntVar(&bf.threads, "threads", 0, "CPUs for the load generator (GOMAXPROCS), like redis-benchmark --threads; 0 = all")
	f.Float64Var(&bf.maxErrorRate, "max-error-rate", 0.01, "exit non-zero when more than this fraction of operations failed (0 = any failure, 1 = never)")
	if !sweep {
		f.StringVar(&bf.hdrFile, "hdr", "", "write the latency histogram to this file (HdrHistogram .hgrm, ms)")
		f.IntVarP(&c.Connections, "connections", "c", 50, "connections (each one to every cluster master / memcached server)")
		f.IntVarP(&c.Pipeline, "pipeline", "P", 1, "requests in flight per connection")
		f.StringVarP(&bf.dataSize, "data-size", "d", "100", "value bytes: 100, a range 100-1000, or weights 100:8,1000:2")
		f.BoolVar(&bf.noSave, "no-save", false, "do not save the JSON result to the results directory (kura ui lists it)")
	}
}

// config maps flags and arguments onto a loadgen.Config.
func (bf *benchFlags) config(cmd *cobra.Command, args []string) (loadgen.Config, error) {
	c := bf.cfg
	target, args, err := takeURL(bf.url, args, false)
	if err != nil {
		return c, err
	}
	if target != "" {
		// The same parser and the same words as every other command.
		if _, err := storeurl.ParseServer(target); err != nil {
			return c, err
		}
		c.Target = target
	}
	if len(args) > 0 {
		if strings.Contains(args[0], "@") {
			// No command is named so; a URL with credentials is, and
			// running it as a command would print it.
			return c, errors.New("the first argument holds an \"@\", so it is no command; if it is a URL, it needs its scheme: redis://…, rediss://… or memcached://… (not shown: it may hold a password)")
		}
		if looksLikeAddr(args[0]) {
			return c, fmt.Errorf("%q looks like an address; write it as a URL: redis://%s or memcached://%s", args[0], args[0], args[0])
		}
		c.Template = args
	}
	if err := bf.checkBounds(cmd); err != nil {
		return c, err
	}
	if bf.threads > 0 {
		// The process is the load generator: its CPU budget is the user's
		// call, as redis-benchmark --threads and memtier --threads are.
		runtime.GOMAXPROCS(bf.threads)
	}
	c.Command = loadgen.Command(bf.command)
	c.Distribution = loadgen.Distribution(bf.dist)
	if bf.dataSize != "" {
		c.DataSize = bf.dataSize
	}
	if c.Duration == 0 && c.Requests == 0 {
		c.Duration = 10 * time.Second
	}
	if cmd.Flags().Changed("zipf-exponent") && bf.dist != string(loadgen.Zipf) {
		return c, fmt.Errorf("--zipf-exponent needs --distribution zipf")
	}
	return c, nil
}

func looksLikeAddr(s string) bool {
	host, port, ok := strings.Cut(s, ":")
	if !ok || host == "" || port == "" {
		return false
	}
	for _, r := range port {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func (bf *benchFlags) output(w io.Writer, res *loadgen.Result) error {
	if bf.hdrFile != "" {
		f, err := os.Create(bf.hdrFile)
		if err != nil {
			return fmt.Errorf("--hdr: %w", err)
		}
		err = res.WriteHDR(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("--hdr: %w", err)
		}
	}
	if bf.jsonOut {
		return writeJSON(w, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		})
	}
	return res.WriteText(w)
}

// flagError says what a flag takes, in words, and where the flags are
// listed.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if m := badFlagValue.FindStringSubmatch(msg); m != nil {
		want := "a valid value"
		if fl := cmd.Flags().Lookup(strings.TrimPrefix(m[2], "--")); fl != nil {
			switch t := fl.Value.Type(); {
			case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
				want = "a whole number"
			case strings.HasPrefix(t, "float"):
				want = "a number"
			case t == "duration":
				want = "a duration such as 500ms, 10s or 1m30s"
			case t == "bool":
				want = "true or false"
			}
		}
		msg = fmt.Sprintf("%s %q: want %s", m[2], m[1], want)
	} else if m := needsArg.FindStringSubmatch(msg); m != nil {
		// pflag: "flag needs an argument: 'u' in -u" or "... --listen".
		msg = flagName(cmd, m[1], m[2]) + ": needs a value"
	} else if m := unknownFlag.FindStringSubmatch(msg); m != nil {
		msg = "unknown flag " + m[1] + m[2]
		if m[1] != "" {
			msg = "unknown flag -" + m[1]
		}
	}
	return fmt.Errorf("%s (see %s --help)", msg, cmd.CommandPath())
}

// needsArg and unknownFlag match pflag's messages for a flag given
// without its value and for a flag no command has: the shorthand letter,
// or the long name.
var (
	needsArg    = regexp.MustCompile(`^flag needs an argument: (?:'(.)' in -.*|(--\S+))$`)
	unknownFlag = regexp.MustCompile(`^unknown (?:shorthand )?flag: (?:'(.)' in -.*|(--\S+))$`)
)

// flagName names a flag as every message does: --name, or -x (--name)
// for a shorthand.
func flagName(cmd *cobra.Command, short, long string) string {
	if short == "" {
		return long
	}
	if fl := cmd.Flags().ShorthandLookup(short); fl != nil {
		return "-" + short + " (--" + fl.Name + ")"
	}
	return "-" + short
}

// badFlagValue matches pflag's message for a value its type cannot parse.
var badFlagValue = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-[^,]+, )?(--[^"]+)" flag`)

// checkWritable fails before a long run, not after, when an output file
// cannot be created.
func checkWritable(path string) error {
	if path == "" {
		return nil
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if os.IsNotExist(statErr) {
		// Leave nothing behind if the run fails before writing it.
		return os.Remove(path)
	}
	return nil
}

// progressPrinter prints one line per interval to w.
func progressPrinter(w io.Writer, prefix string) func(loadgen.Interval) {
	return func(iv loadgen.Interval) {
		line := fmt.Sprintf("%s[%4.0fs] %10.0f ops/s  p50 %8.3f ms  p99 %8.3f ms  errors %d",
			prefix, iv.Elapsed.Seconds(), iv.OpsPerSec,
			float64(iv.P50.Microseconds())/1000, float64(iv.P99.Microseconds())/1000, iv.Errors)
		if iv.Errors > 0 && iv.LastError != "" {
			line += "  (" + iv.LastError + ")"
		}
		fmt.Fprintln(w, line)
	}
}

// benchError keeps library errors to one line; ErrConfig's prefix is for
// programs, a person wants the sentence after it.
func benchError(err error) error {
	if errors.Is(err, context.Canceled) {
		return err // main exits 130
	}
	msg := err.Error()
	var ce *loadgen.ConfigError
	if errors.As(err, &ce) {
		msg = ce.Reason // the flag and what to do, without the library's prefix
	}
	return fmt.Errorf("bench: %s", strings.ReplaceAll(msg, "\n", " "))
}

// maxThreads bounds --threads: GOMAXPROCS far above the machine's CPUs
// only adds OS threads (100,000 of them ended the process).
const maxThreads = 1024

// checkBounds refuses numeric flags outside what a run can use, and an
// explicit 0 where 0 has no meaning (it used to become the default
// silently: -c 0 ran 50 connections).
func (bf *benchFlags) checkBounds(cmd *cobra.Command) error {
	f, c := cmd.Flags(), bf.cfg
	zero := func(name string) error {
		return fmt.Errorf("--%s \"0\": want a positive value (0 has no meaning here), or leave the flag out for the default", name)
	}
	// In a sweep, --connections, --pipeline and --data-size are lists the
	// sweep checks itself.
	changed := func(name string) bool {
		fl := f.Lookup(name)
		return fl != nil && f.Changed(name) && fl.Value.Type() != "string" && fl.Value.Type() != "stringSlice"
	}
	for name, v := range map[string]int64{
		"connections": int64(c.Connections), "pipeline": int64(c.Pipeline), "keys": c.Keys,
		"multi-keys": int64(c.MultiKeys), "requests": c.Requests,
	} {
		if changed(name) && v == 0 {
			return zero(name)
		}
	}
	if changed("duration") && c.Duration == 0 {
		return zero("duration")
	}
	if changed("timeout") && c.Timeout == 0 {
		return zero("timeout")
	}
	if changed("rate") && c.Rate == 0 {
		// It used to run a closed loop, the opposite of what --rate asks.
		return fmt.Errorf("--rate \"0\": want the target ops/s (0 has no meaning here), or leave --rate out for a closed loop")
	}
	if changed("zipf-exponent") && c.ZipfExponent == 0 {
		return fmt.Errorf("--zipf-exponent 0 is a uniform distribution; use --distribution uniform")
	}
	switch {
	case bf.threads < 0 || bf.threads > maxThreads:
		return fmt.Errorf("--threads must be between 0 (all CPUs) and %d, got %d", maxThreads, bf.threads)
	case c.Requests > 1e12:
		return fmt.Errorf("--requests %d is more than a run can send; use at most 10^12", c.Requests)
	case c.Duration > 7*24*time.Hour:
		return fmt.Errorf("--duration %s is longer than a week; use a shorter run", c.Duration)
	case c.Timeout > time.Hour:
		return fmt.Errorf("--timeout %s is longer than an hour", c.Timeout)
	case c.Rate > 1e9:
		return fmt.Errorf("--rate %g is above 10^9 ops/s, which no client reaches", c.Rate)
	case c.Rate > 0 && c.Rate < 1 && c.Duration == 0 && c.Requests == 0:
		return fmt.Errorf("--rate %g sends an operation less than once a second; give --duration or --requests so the run is long enough to mean something", c.Rate)
	case bf.maxErrorRate < 0 || bf.maxErrorRate > 1:
		return fmt.Errorf("--max-error-rate must be a fraction between 0 and 1, got %g", bf.maxErrorRate)
	}
	return nil
}

// checkErrors fails a run whose failures pass --max-error-rate, after its
// result was printed.
func (bf *benchFlags) checkErrors(res *loadgen.Result) error {
	if res.Ops == 0 {
		return fmt.Errorf("bench: no operation completed")
	}
	rate := float64(res.Errors) / float64(res.Ops)
	if res.Errors > 0 && rate > bf.maxErrorRate {
		first := ""
		if len(res.ErrorSamples) > 0 {
			first = "; first error: " + res.ErrorSamples[0]
		}
		return fmt.Errorf("bench: %d of %d operations failed (%.1f%%), above --max-error-rate %g%s", res.Errors, res.Ops, 100*rate, bf.maxErrorRate, first)
	}
	return nil
}
