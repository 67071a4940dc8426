package benchreport

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Sizes of the Ruby section: a cold login of rubyKeys records through the
// delay proxy (rubyRounds rounds of every side: the per-key writes and
// Rails' fetch_multi cost a round trip a record, about 3-5 s a round),
// and the warm read_multi's calls per side, split into rubyRounds rounds.
const (
	rubyKeys   = 1000
	rubyRounds = 3
	rubyReads  = 300
)

// rubyIDs maps rb/bench/bench.rb's RESULTS_JSON names to the section's
// row ids.
var rubyIDs = map[string]string{
	"login proxy: kura fetch_multi (leases)":       "login",
	"login proxy: Rails MemCacheStore#fetch_multi": "memcachestore",
	"login proxy: kura per-key writes":             "perkey",
	"read: kura Cache#read_multi, memcached":       "read-mc",
	"read: MemCacheStore#read_multi (dalli)":       "memcachestore-read",
	"read: kura Cache#read_multi, Redis":           "read-redis",
	"read: RedisCacheStore#read_multi":             "rediscachestore",
	"bytes: kura as a Cache writes it (Hash)":      "bytes-kura",
	"bytes: Rails default (Hash)":                  "bytes-rails",
}

// runRuby runs rb/bench/bench.rb's bytes, login (through the delay
// proxy only) and read parts with RESULTS_JSON, after building the Go
// delay proxy it starts (internal/harness/rbinterop).
func runRuby(e *env) (map[string][]float64, error) {
	if _, err := exec.LookPath("ruby"); err != nil {
		return nil, fmt.Errorf("ruby is not installed (make servers): %w", err)
	}
	rb := filepath.Join(e.root, "rb")
	helper := filepath.Join(rb, ".build", "rbinterop")
	t0 := time.Now()
	cmd := exec.CommandContext(e.ctx, "go", "build", "-o", helper, "./internal/harness/rbinterop")
	cmd.Dir = e.root
	out, err := cmd.CombinedOutput()
	e.build += time.Since(t0)
	if err != nil {
		return nil, fmt.Errorf("go build ./internal/harness/rbinterop: %v\n%s", err, tail(out))
	}
	f, err := os.CreateTemp("", "kura-ruby-bench-*.json")
	if err != nil {
		return nil, err
	}
	f.Close()
	defer os.Remove(f.Name())
	rounds := strconv.Itoa(e.scale(rubyRounds))
	env := []string{"KURA_REQUIRE_SERVERS=1", "KURA_RB_PREBUILT=1", "KURA_BENCH=bytes,login,read", "KURA_BENCH_PROXY_ONLY=1",
		"KURA_BENCH_KEYS=" + strconv.Itoa(rubyKeys), "KURA_BENCH_LOGIN_ROUNDS=" + rounds, "KURA_BENCH_RAILS_ROUNDS=" + rounds,
		"KURA_BENCH_PERKEY_ROUNDS=" + rounds, "KURA_BENCH_READS=" + strconv.Itoa(e.scale(rubyReads)), "KURA_BENCH_READ_ROUNDS=" + rounds,
		"RESULTS_JSON=" + f.Name()}
	if _, err := e.retry("rb/bench/bench.rb", func() *exec.Cmd {
		cmd := exec.CommandContext(e.ctx, "ruby", "-Ilib", "-Itest", "bench/bench.rb")
		cmd.Dir = rb
		cmd.Env = append(os.Environ(), env...)
		return cmd
	}); err != nil {
		return nil, err
	}
	return readFigures(f.Name(), "rb/bench/bench.rb", rubyIDs)
}

// readFigures reads an external benchmark's {"name": [per round]} file
// and returns the samples by row id (ids maps names to row ids; names it
// does not list are sides the page does not show). Every id must have
// samples: a renamed side must not drop out of the page unnoticed.
func readFigures(path, what string, ids map[string]string) (map[string][]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var figures map[string][]float64
	if err := json.Unmarshal(b, &figures); err != nil {
		return nil, fmt.Errorf("%s's results: %w", what, err)
	}
	samples := map[string][]float64{}
	for name, id := range ids {
		samples[id] = figures[name]
		if len(samples[id]) == 0 {
			return nil, fmt.Errorf("%s has no rounds for %q", what, name)
		}
	}
	return samples, nil
}
