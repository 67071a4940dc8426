// Command kura measures, sizes and demonstrates Redis and Memcached caches.
//
// Every subcommand is a thin shell over an importable package: the load
// engine is github.com/kuracache/kura/loadgen, the cache itself is
// github.com/kuracache/kura.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	if cmd, err := root.ExecuteContextC(ctx); err != nil {
		// One line, no stack trace: the message says what to do.
		fmt.Fprintln(os.Stderr, mainErrorLine(cmd, err, os.Args[1:]))
		if errors.Is(err, context.Canceled) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "kura",
		Short: "Measure, size and demonstrate Redis and Memcached caches",
		Long: `kura is the read-through cache layer for Redis and Memcached, with the tools
to measure and size it. The library is github.com/kuracache/kura; this
command holds the tools around it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	// Every command words a bad flag the same way.
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newPlanCmd())
	root.AddCommand(newDemoCmd())
	root.AddCommand(newBenchCmd())
	root.AddCommand(newInspectCmd())
	root.AddCommand(newScanCmd())
	root.AddCommand(newUICmd())
	root.AddCommand(newCodecsCmd())
	root.AddCommand(newCDCCmd())
	return root
}

// version is the module version kura was built from ("go install
// github.com/kuracache/kura/cmd/kura@v1.2.3" reports v1.2.3), with the VCS
// revision when it was built from a checkout.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		v += " " + rev[:min(12, len(rev))] + dirty
	}
	return v + " " + info.GoVersion
}
