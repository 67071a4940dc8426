// Command benchreport is `make bench-report`: it runs the headline
// benchmarks at small sizes, writes docs/benchmarks/results.json, draws
// docs/benchmarks/charts/*.svg and rewrites BENCHMARKS.md's generated
// blocks from the results.
//
//	go run ./internal/harness/benchreport/cmd/benchreport                 # everything (under 10 minutes on 2 quiet cores)
//	go run ./internal/harness/benchreport/cmd/benchreport -only rings,loadgen   # rerun these sections, keep the others
//	go run ./internal/harness/benchreport/cmd/benchreport -render         # charts and page from the results file, no run
//	go run ./internal/harness/benchreport/cmd/benchreport -full           # full sizes (make soak) to docs/benchmarks/results-full.json
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/kuracache/kura/internal/harness/benchreport"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	only := flag.String("only", "", "comma-separated section ids to rerun (the others are kept from the results file)")
	render := flag.Bool("render", false, "only redraw the charts and rewrite the page from the results file")
	full := flag.Bool("full", false, "full sizes (make soak): results to "+benchreport.FullResultsPath+", the page and charts untouched")
	flag.Parse()
	if err := run(*root, *only, *render, *full); err != nil {
		fmt.Fprintln(os.Stderr, "bench-report:", err)
		os.Exit(1)
	}
}

func run(root, only string, render, full bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	prev, err := benchreport.Load(root + "/" + benchreport.ResultsPath)
	if render {
		if err != nil {
			return err
		}
		return benchreport.WriteAll(root, prev)
	}
	o := benchreport.Options{Root: root, Log: os.Stderr, Full: full}
	if full {
		res, err := benchreport.Run(ctx, o)
		if err != nil {
			return err
		}
		return res.Save(root + "/" + benchreport.FullResultsPath)
	}
	if only != "" {
		o.Only = strings.Split(only, ",")
		if err == nil {
			o.Previous = prev
		}
	}
	res, err := benchreport.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := benchreport.WriteAll(root, res); err != nil {
		return err
	}
	failed := 0
	for _, s := range res.Sections {
		if s.Error != "" {
			failed++
		}
	}
	fmt.Fprintf(os.Stderr, "bench-report: %d sections in %.0f s at %s; %s, %s and %s/ written\n", len(res.Sections), res.Seconds, res.Commit,
		benchreport.PagePath, benchreport.ResultsPath, benchreport.ChartDir)
	if failed > 0 {
		return fmt.Errorf("%d sections failed (see the page)", failed)
	}
	return nil
}
