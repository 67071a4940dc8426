package loadgen

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/kuracache/kura/internal/wire"
)

// Latencies are recorded in microseconds from 1 µs to one hour with three
// significant digits.
const (
	histMin     = 1
	histMax     = int64(time.Hour / time.Microsecond)
	histSigFigs = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histSigFigs) }

// shard collects results from a few workers under one lock, taken once per
// batch. The reporter drains shards every second.
type shard struct {
	mu     sync.Mutex
	hist   *hdrhistogram.Histogram
	ops    int64
	errs   int64
	hits   int64
	misses int64
	// abandoned counts requests given up on (a timeout, a lost
	// connection); they are in the latency figures.
	abandoned int64
	samples   []string
}

// record adds one latency in nanoseconds.
func (sh *shard) record(ns int64) {
	us := (ns + 500) / 1000
	if us < histMin {
		us = histMin
	} else if us > histMax {
		us = histMax
	}
	_ = sh.hist.RecordValue(us)
}

// maxSamples is how many distinct error messages a run keeps.
const maxSamples = 5

func (sh *shard) sample(msg string) {
	if msg == "" || len(sh.samples) >= maxSamples {
		return
	}
	for _, m := range sh.samples {
		if m == msg {
			return
		}
	}
	sh.samples = append(sh.samples, msg)
}

func (sh *shard) addError(msg string) {
	sh.mu.Lock()
	sh.sample(msg)
	sh.mu.Unlock()
}

// Interval is the progress of a run over the last second or so.
type Interval struct {
	// Elapsed is the time since the measured run started.
	Elapsed time.Duration
	// Ops and Errors completed in the interval.
	Ops, Errors int64
	// OpsPerSec over the interval.
	OpsPerSec float64
	// P50 and P99 latency over the interval.
	P50, P99 time.Duration
	// LastError is an error message seen in the interval, if any.
	LastError string
}

// totals accumulates what the reporter drained from the shards.
type totals struct {
	hist                    *hdrhistogram.Histogram
	ops, errs, hits, misses int64
	abandoned               int64
	samples                 []string
}

// drain moves every shard's numbers into t and returns the interval's.
func (t *totals) drain(shards []*shard, iv *hdrhistogram.Histogram) (ops, errs int64, lastErr string) {
	iv.Reset()
	for _, sh := range shards {
		sh.mu.Lock()
		iv.Merge(sh.hist)
		sh.hist.Reset()
		ops += sh.ops
		errs += sh.errs
		t.hits += sh.hits
		t.misses += sh.misses
		t.abandoned += sh.abandoned
		for _, m := range sh.samples {
			lastErr = m
			t.addSample(m)
		}
		sh.ops, sh.errs, sh.hits, sh.misses, sh.abandoned, sh.samples = 0, 0, 0, 0, 0, sh.samples[:0]
		sh.mu.Unlock()
	}
	t.hist.Merge(iv)
	t.ops += ops
	t.errs += errs
	return ops, errs, lastErr
}

func (t *totals) addSample(m string) {
	if len(t.samples) >= maxSamples {
		return
	}
	for _, x := range t.samples {
		if x == m {
			return
		}
	}
	t.samples = append(t.samples, m)
}

// serverCounters is one reading of a server's own counters.
type serverCounters struct {
	cpu           float64 // user + system seconds
	netIn, netOut int64
	calls         map[string]int64 // per command
}

func (a serverCounters) sub(b serverCounters) serverCounters {
	d := serverCounters{cpu: a.cpu - b.cpu, netIn: a.netIn - b.netIn, netOut: a.netOut - b.netOut, calls: map[string]int64{}}
	for k, v := range a.calls {
		if x := v - b.calls[k]; x != 0 {
			d.calls[k] = x
		}
	}
	return d
}

func parseFloat(s string) float64 {
	f, _ := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return f
}

func parseInt(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n
}

// redisCounters reads INFO all (stats, cpu and commandstats).
func (c *conn) redisCounters() (serverCounters, error) {
	v, err := c.redisDo("INFO", "all")
	if err != nil {
		return serverCounters{}, err
	}
	text, _ := v.(string)
	info := wire.ParseInfo(text)
	return serverCounters{
		cpu:   parseFloat(info["used_cpu_user"]) + parseFloat(info["used_cpu_sys"]),
		netIn: parseInt(info["total_net_input_bytes"]), netOut: parseInt(info["total_net_output_bytes"]),
		calls: wire.CommandCalls(info),
	}, nil
}

// mcCounters reads memcached's stats: rusage, bytes and command counts
// (cmd_get counts keys, so an MGET of 10 keys counts 10).
func (c *conn) mcCounters() (serverCounters, error) {
	m, err := c.memcachedStats()
	if err != nil {
		return serverCounters{}, err
	}
	return serverCounters{
		cpu:   parseFloat(m["rusage_user"]) + parseFloat(m["rusage_system"]),
		netIn: parseInt(m["bytes_read"]), netOut: parseInt(m["bytes_written"]),
		calls: map[string]int64{
			"get": parseInt(m["cmd_get"]), "set": parseInt(m["cmd_set"]),
			"get_hits": parseInt(m["get_hits"]), "get_misses": parseInt(m["get_misses"]),
		},
	}, nil
}
