package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kuracache/kura/internal/demo"
)

func newDemoCmd() *cobra.Command {
	var cfg demo.Config
	var skip001 bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show, on this machine, the cache problems kura solves",
		Long: `demo reproduces real cache problems on private servers and shows kura's answer.

Network bytes and value size (a Go service that swapped Gob for msgpack+snappy
and cut Redis network bytes to about a third): it generates realistic Japanese and
English news articles (10-20 KB of JSON each), reads them through a kura Cache
with seven codecs side by side (JSON, encoding/gob, msgpack, msgpack+snappy as
that service wrote it, kura's default, and kura with an S2 or zstd dictionary
trained on other articles) and prints bytes stored per value, bytes the server
sent, Fetch throughput and latency.

Without --redis it starts a private redis-server from PATH on a free loopback
port and stops it afterwards; without redis-server it uses the in-process
store and says so.

Writing misses back to memcached (a game backend writing a user's missed
records back one key at a time): 5,000 inventory records written to three private memcached
servers one Set at a time, then as one SetMany (quiet meta commands, one
round trip per server), then read back with one FetchMany.`,
		Example: `  kura demo
  kura demo --redis redis://127.0.0.1:6379 --records 2000 --reads 50000
  kura demo --memory`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Progress = cmd.ErrOrStderr()
			res, err := demo.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			res.Print(cmd.OutOrStdout())
			if skip001 {
				return nil
			}
			wb, err := demo.RunWriteBack(cmd.Context(), 3, 5000, cmd.ErrOrStderr())
			if err != nil {
				return fmt.Errorf("memcached write-back: %w", err)
			}
			wb.Print(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.RedisURL, "redis", "", "Redis URL to use (redis://[user:pass@]host:port); default: a private redis-server")
	f.BoolVar(&cfg.InMemory, "memory", false, "use the in-process store instead of Redis")
	f.IntVar(&cfg.Records, "records", 1000, "number of articles")
	f.IntVar(&cfg.Reads, "reads", 20000, "Fetches per codec")
	f.IntVar(&cfg.Concurrency, "concurrency", 16, "reading goroutines")
	f.BoolVar(&skip001, "skip-memcached", false, "skip the memcached write-back scenario")
	f.Int64Var(&cfg.Seed, "random-seed", 1, "random seed for the generated articles and the read order (same seed, same data)")
	f.Int64Var(&cfg.Seed, "seed", 1, "deprecated: use --random-seed")
	_ = f.MarkHidden("seed")
	return cmd
}
