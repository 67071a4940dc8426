package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/redact"
	"github.com/kuracache/kura/loadgen"
	"github.com/kuracache/kura/store/storeurl"
)

func newBenchSweepCmd() *cobra.Command {
	var bf benchFlags
	var conns, pipes, sizes, threads, htmlFile, server string
	cmd := &cobra.Command{
		Use:   "sweep [TARGET] [COMMAND ARGS...]",
		Short: "Run bench once per value of one parameter and chart the results",
		Long: `sweep runs one bench step per value of one parameter, one after another,
prints throughput and p99 per step and writes an HTML report with charts
(throughput per step, latency per step, latency percentile curves).

Exactly one of these takes a comma-separated list:
  --connections 1,8,64,256   --pipeline 1,4,16,64   --data-size 100,1000,10000
  --io-threads 1,2,4         (kura starts a private server per step from PATH:
                              redis-server io-threads, or memcached -t with
                              --server memcached; give no target)

Every other bench flag applies to every step. --io-threads measures how
throughput scales with server threads (HSET at 1, 2 and 6 threads is the
experiment behind sizing a Redis fleet) in one command; on
one machine client and server share the CPUs, so extra server threads help
only while cores are free.`,
		Example: `  kura bench sweep redis://127.0.0.1:6379 --connections 1,8,64,256 -t get --prefill
  kura bench sweep --io-threads 1,2,4 -c 64 --duration 5s hset __key__ f1 __data__
  kura bench sweep memcached://127.0.0.1:11211 --pipeline 1,4,16 --html mc.html
  kura bench sweep --data-size 100,10000,1000000 -t set -c 8 --duration 5s`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := bf.config(cmd, args)
			if err != nil {
				return err
			}
			cfg.Resolver = resolverOf(cmd.Context())
			sc := loadgen.SweepConfig{Base: cfg}
			var swept []string
			for _, p := range []struct{ name, val string }{
				{loadgen.SweepConnections, conns}, {loadgen.SweepPipeline, pipes},
				{loadgen.SweepDataSize, sizes}, {loadgen.SweepIOThreads, threads},
			} {
				vals := loadgen.ParseList(p.val)
				switch {
				case len(vals) > 1 || (p.name == loadgen.SweepIOThreads && len(vals) == 1):
					swept = append(swept, "--"+p.name)
					sc.Param, sc.Values = p.name, vals
				case len(vals) == 1:
					if err := loadgen.SetParam(&sc.Base, p.name, vals[0]); err != nil {
						return benchError(err)
					}
				}
			}
			if len(swept) == 0 {
				return fmt.Errorf("bench sweep: give one list to sweep, such as --connections 1,8,64,256 or --io-threads 1,2,4")
			}
			if len(swept) > 1 {
				return fmt.Errorf("bench sweep: sweep one parameter at a time, not %s", strings.Join(swept, " and "))
			}
			if sc.Param == loadgen.SweepIOThreads {
				switch server {
				case "redis", "memcached":
				default:
					return fmt.Errorf("bench sweep: --server must be redis or memcached, got %q", server)
				}
				sc.StartServer = servers.Threaded(server)
			}
			// The default report goes to a new private file in the temporary
			// directory (a fixed name there could be a planted link).
			autoHTML := htmlFile == defaultSweepHTML() && !cmd.Flags().Changed("html")
			if autoHTML {
				htmlFile = "auto"
			} else if err := checkWritable(htmlFile); err != nil {
				return err
			}
			errw := cmd.ErrOrStderr()
			if !bf.quiet {
				done := 0
				sc.OnStep = func(st loadgen.Step) {
					done++
					fmt.Fprintf(errw, "step %s=%s: %.1f ops/s, p99 %.3f ms, errors %d\n", sc.Param, st.Value, st.Result.OpsPerSec, st.Result.Latency.P99, st.Result.Errors)
				}
				sc.Base.Progress = func(iv loadgen.Interval) {
					v := sc.Values[min(done, len(sc.Values)-1)]
					progressPrinter(errw, sc.Param+"="+v+" ")(iv)
				}
			}
			res, err := loadgen.Sweep(cmd.Context(), sc)
			if res != nil && len(res.Steps) > 0 {
				res.Command = "kura " + strings.Join(redactArgs(os.Args[1:]), " ")
				if werr := writeSweep(cmd, &bf, res, htmlFile); werr != nil && err == nil {
					err = werr
				}
			}
			if err != nil {
				return benchError(err)
			}
			return nil
		},
	}
	bf.register(cmd.Flags(), true)
	cmd.SetFlagErrorFunc(flagError)
	f := cmd.Flags()
	f.StringVarP(&conns, "connections", "c", "50", "connections, or a list to sweep: 1,8,64,256")
	f.StringVarP(&pipes, "pipeline", "P", "1", "pipeline depth, or a list to sweep: 1,4,16")
	f.StringVarP(&sizes, "data-size", "d", "100", "value size, or a list to sweep: 100,1000,10000 (ranges allowed, weights not)")
	f.StringVar(&threads, "io-threads", "", "server threads to sweep on a private server kura starts: 1,2,4")
	f.StringVar(&server, "server", "redis", "with --io-threads: which server to start, redis or memcached")
	f.StringVar(&htmlFile, "html", defaultSweepHTML(), "write the HTML report to this file (outside any checkout by default)")
	return cmd
}

func writeSweep(cmd *cobra.Command, bf *benchFlags, res *loadgen.SweepResult, htmlFile string) error {
	out := cmd.OutOrStdout()
	if bf.jsonOut {
		if err := writeJSON(out, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}); err != nil {
			return err
		}
	} else if err := res.WriteText(out); err != nil {
		return err
	}
	if htmlFile == "" {
		return nil
	}
	var f *os.File
	var err error
	if htmlFile == "auto" {
		f, err = createPrivateTemp("kura-sweep-*.html")
		if err == nil {
			htmlFile = f.Name()
		}
	} else {
		f, err = createPrivate(htmlFile)
	}
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	err = res.WriteHTML(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if !bf.jsonOut {
		fmt.Fprintf(cmd.ErrOrStderr(), "report: %s\n", htmlFile)
	}
	return nil
}

// defaultSweepHTML names, in --help, where the report goes by default:
// outside the working directory, so a sweep run from a checkout never
// dirties it, in a new private file (kura-sweep-RANDOM.html, 0600).
func defaultSweepHTML() string { return filepath.Join(os.TempDir(), "kura-sweep-*.html") }

// redactArgs masks secrets in a command line before it is shown or written
// to a report: passwords in URLs and the values of -a/--password.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	maskNext := false
	for i, a := range args {
		switch {
		case maskNext:
			out[i], maskNext = redact.Mask, false
		case a == "--password":
			out[i], maskNext = a, true
		case strings.HasPrefix(a, "--password="):
			out[i] = "--password=" + redact.Mask
		case isShortPassword(a):
			// -a, -aPW, -qa PW, -qaPW
			val, next, _ := shortPassword(a)
			out[i], maskNext = a[:len(a)-len(val)], next
			if val != "" {
				out[i] += redact.Mask
			}
		default:
			out[i] = redact.URL(a)
			if strings.Contains(a, "://") {
				out[i] = storeurl.Redact(a)
			}
			for _, p := range []string{"--url=", "--uri=", "-u="} {
				if u, ok := strings.CutPrefix(a, p); ok {
					out[i] = p + storeurl.Redact(u)
				}
			}
		}
	}
	return out
}

func isShortPassword(a string) bool { _, _, ok := shortPassword(a); return ok }
