package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kuracache/kura/cmd/kura/internal/demo"
)

func newDemoCmd() *cobra.Command {
	var (
		only     []string
		asJSON   bool
		htmlFile string
		quick    bool
		seed     int64
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Reproduce six real cache problems on this machine and show kura's answer",
		Long: `demo reproduces, on this machine, six cache problems teams have met in
production, each against a real PostgreSQL and real cache servers, and measures
kura's answer next to the problem:

  bytes   Network bytes and value size: articles read through Fetch from
          PostgreSQL via Redis as JSON, gob, msgpack, msgpack+snappy, kura's
          default and kura with trained S2 and zstd dictionaries.
  login   Login with a cold cache: a user's items through three memcached behind
          an emulated 0.5 ms round trip; per-key write-back vs kura's Index.
  nodes   How many nodes: a bench sweep of thread counts on a private
          redis-server, with an honest note on what a 2-core machine can show.
  health  Health checks under load: a PING before every request through the
          shared pool vs kura's per-node monitor, on a saturated server and
          then a stalled one.
  huge    One huge value on a small link: a 1.3 MB value over a link limited to
          a small node's baseline bandwidth; the size guard; kura inspect.
  stale   A write the cache never heard of: prices changed in plain SQL,
          served stale without cdc; with kura cdc, the lag and the staleness
          inspector's count.

It starts a private PostgreSQL (initdb), redis-server and three memcached on
loopback ports and stops them at the end (` + "`make servers`" + ` installs them). A
scenario whose server cannot start is skipped with the reason; no server is
replaced by an in-process stand-in. One loader is: in health, a request the
cache cannot answer is served by an in-process function (no database), as
the card says. A scenario whose kura capability is not built yet says so.

Progress goes to stderr, one table per scenario to stdout, and an HTML report
(charts, the commands that reproduce each number, the machine) to --html.`,
		Example: `  kura demo
  kura demo --only login
  kura demo --only bytes,huge --html /tmp/report.html
  kura demo --json > demo.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var names []string
			for _, o := range only {
				for _, n := range strings.Split(o, ",") {
					if n = strings.TrimSpace(n); n != "" {
						names = append(names, n)
					}
				}
			}
			if cmd.Flags().Changed("only") && len(names) == 0 {
				// --only "" used to run every scenario.
				return fmt.Errorf("--only names no scenario; give one or more of: %s", strings.Join(demo.Names(), ", "))
			}
			cfg := demo.Config{Only: names, Seed: seed, Progress: cmd.ErrOrStderr(),
				Command: "kura " + strings.Join(redactArgs(os.Args[1:]), " ")}
			if quick {
				cfg.Size = demo.SmallSize()
			}
			rep, err := demo.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if htmlFile != "" {
				if err := writeFileWith(htmlFile, rep.WriteHTML); err != nil {
					return fmt.Errorf("writing the HTML report: %w", err)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return rep.WriteJSON(out)
			}
			if err := rep.WriteText(out); err != nil {
				return err
			}
			if htmlFile != "" {
				fmt.Fprintf(out, "HTML report: %s\n", htmlFile)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&only, "only", nil, "run only these scenarios: "+strings.Join(demo.Names(), ", "))
	f.BoolVar(&asJSON, "json", false, "print the results as JSON on stdout instead of tables")
	f.StringVar(&htmlFile, "html", defaultDemoHTML(), "write the HTML report to this file, outside any checkout by default; --html= for none")
	f.BoolVar(&quick, "quick", false, "reduced sizes (what the tests run): seconds per scenario, noisier numbers")
	f.Int64Var(&seed, "random-seed", 1, "random seed of the data set (same seed, same data)")
	return cmd
}

func defaultDemoHTML() string { return filepath.Join(os.TempDir(), "kura-demo.html") }

// writeFileWith writes a file through write, replacing it only when write
// succeeded.
func writeFileWith(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kura-demo-*.html")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
