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
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		// One line, no stack trace: the message says what to do.
		fmt.Fprintln(os.Stderr, "kura:", err)
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
	}
	root.AddCommand(newDemoCmd())
	root.AddCommand(newBenchCmd())
	root.AddCommand(newInspectCmd())
	return root
}
