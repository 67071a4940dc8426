package benchreport

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Sizes of the change stream's section: cdcRounds rounds of draining a
// backlog of cdcRows rows (two slots at one LSN, pg_recvlogical and kura
// cdc, alternating which goes first; about 10 s a round on 2 cores), then
// cdcLagRuns runs of cdcLagSeconds at 1,000 commits/s, one PostgreSQL
// each.
const (
	cdcRows       = 200_000
	cdcRounds     = 3
	cdcLagRuns    = 2
	cdcLagSeconds = 5
)

// runCDC runs cdc's TestBenchThroughput and TestBenchLag
// (KURA_CDC_BENCH=1) with KURA_CDC_BENCH_JSON and reads their figures.
func runCDC(e *env) (map[string][]float64, error) {
	if _, err := exec.LookPath("pg_recvlogical"); err != nil {
		return nil, fmt.Errorf("pg_recvlogical is not installed (make servers): %w", err)
	}
	bin, err := e.testBinary("./cdc")
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "kura-cdc-bench-*.json")
	if err != nil {
		return nil, err
	}
	f.Close()
	defer os.Remove(f.Name())
	run := func(test string, ids map[string]string, env ...string) (map[string][]float64, error) {
		if err := os.WriteFile(f.Name(), nil, 0o644); err != nil {
			return nil, err
		}
		if _, err := e.retry("./cdc "+test, func() *exec.Cmd {
			cmd := exec.CommandContext(e.ctx, bin, "-test.run", "^"+test+"$", "-test.count", "1")
			cmd.Dir = filepath.Join(e.root, "cdc")
			cmd.Env = append(append(os.Environ(), "KURA_REQUIRE_SERVERS=1", "KURA_CDC_BENCH=1", "KURA_CDC_BENCH_JSON="+f.Name()), env...)
			return cmd
		}); err != nil {
			return nil, err
		}
		return readFigures(f.Name(), "cdc "+test, ids)
	}
	samples, err := run("TestBenchThroughput", map[string]string{"kura cdc rows/s": "kura", "pg_recvlogical rows/s": "pg-recvlogical"},
		"KURA_CDC_BENCH_ROWS="+strconv.Itoa(cdcRows), "KURA_CDC_BENCH_ROUNDS="+strconv.Itoa(e.scale(cdcRounds)))
	if err != nil {
		return nil, err
	}
	for range e.scale(cdcLagRuns) {
		lag, err := run("TestBenchLag", map[string]string{"commit -> applied p50 ms": "commit-p50", "commit -> applied p99 ms": "commit-p99"}, "KURA_CDC_BENCH_SECONDS="+strconv.Itoa(cdcLagSeconds))
		if err != nil {
			return nil, err
		}
		for id, xs := range lag {
			samples[id] = append(samples[id], xs...)
		}
	}
	return samples, nil
}
