package loadgen

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/kuracache/kura/internal/vis"
)

// Result is what a run measured. Every number is rounded once, when the
// Result is built, so the JSON form and the text form carry the same
// values.
type Result struct {
	// Target is the target URL without its password.
	Target string `json:"target"`
	// Topology is "standalone", "cluster", "pool" (memcached) or "ring"
	// (redis+ring://: standalone Redis shards).
	Topology string `json:"topology"`
	// Nodes is the number of servers that took load (cluster masters).
	Nodes int `json:"nodes"`
	// Protocol is "resp", "meta" or "text".
	Protocol string `json:"protocol"`
	// Workload describes commands, keys and values in one line.
	Workload    string `json:"workload"`
	Command     string `json:"command"`
	Connections int    `json:"connections"`
	Pipeline    int    `json:"pipeline"`
	// OpenLoop is set for --rate runs; TargetRate is that rate.
	OpenLoop   bool    `json:"open_loop"`
	TargetRate float64 `json:"target_rate,omitempty"`
	// CoordinatedOmissionCorrected is true when latencies were measured
	// from intended send times (open loop).
	CoordinatedOmissionCorrected bool `json:"coordinated_omission_corrected"`
	// Interrupted is set when the run was cancelled before its end.
	Interrupted bool `json:"interrupted,omitempty"`

	PrefillKeys    int64   `json:"prefill_keys,omitempty"`
	PrefillSeconds float64 `json:"prefill_seconds,omitempty"`

	DurationSeconds float64 `json:"duration_seconds"`
	Ops             int64   `json:"ops"`
	Errors          int64   `json:"errors"`
	// OpsPerSec counts successful operations only: failures are not
	// throughput.
	OpsPerSec float64 `json:"ops_per_sec"`
	// Hits and Misses count keys read (an MGET of 10 keys counts 10).
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	// BytesOut and BytesIn are what the client wrote and read.
	BytesOut int64   `json:"bytes_out"`
	BytesIn  int64   `json:"bytes_in"`
	OutGbps  float64 `json:"out_gbps"`
	InGbps   float64 `json:"in_gbps"`

	Latency Latency `json:"latency_ms"`
	// Abandoned counts the requests given up on (a timeout, a lost
	// connection), counted in Errors and, at the moment they were given
	// up, in Latency.
	Abandoned int64 `json:"abandoned,omitempty"`
	// ErrorSamples holds up to five distinct error messages.
	ErrorSamples []string `json:"error_samples,omitempty"`

	// Server is what the server itself counted; nil when its counters
	// could not be read.
	Server *ServerReport `json:"server,omitempty"`
	// Client is this process's CPU during the measured phase.
	Client ClientReport `json:"client"`

	hist *hdrhistogram.Histogram
}

// Latency summarises the histogram, in milliseconds.
type Latency struct {
	Avg  float64 `json:"avg"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// ServerReport is the difference between the server's counters after and
// before the run, summed over all nodes.
type ServerReport struct {
	Nodes int `json:"nodes"`
	// CPUSeconds is user + system CPU the server used during the run.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUSecondsPer1kOps is what 1,000 operations cost the server.
	CPUSecondsPer1kOps float64 `json:"cpu_seconds_per_1k_ops"`
	// CPUCores is CPUSeconds over the run's duration: near 1 for a
	// single-threaded server means it was saturated.
	CPUCores    float64 `json:"cpu_cores"`
	NetInBytes  int64   `json:"net_in_bytes"`
	NetOutBytes int64   `json:"net_out_bytes"`
	NetInGbps   float64 `json:"net_in_gbps"`
	NetOutGbps  float64 `json:"net_out_gbps"`
	// Commands counts calls per command (Redis commandstats; memcached
	// get, set, get_hits, get_misses), without kura's own INFO.
	Commands map[string]int64 `json:"commands"`
	PerNode  []NodeReport     `json:"per_node"`
}

// NodeReport is one node's share of the load.
type NodeReport struct {
	Addr       string  `json:"addr"`
	Commands   int64   `json:"commands"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

// ClientReport is the load generator's own cost.
type ClientReport struct {
	CPUSeconds         float64 `json:"cpu_seconds"`
	CPUSecondsPer1kOps float64 `json:"cpu_seconds_per_1k_ops"`
}

// Histogram returns the latency histogram in microseconds.
func (r *Result) Histogram() *hdrhistogram.Histogram { return r.hist }

func ms(us int64) float64 { return round(float64(us)/1000, 3) }

func (r *Result) build(s *settings, top *topology, rn *runner, t *totals, elapsed time.Duration, clientCPU float64) {
	r.Target = s.target.String()
	r.Nodes = len(top.addrs)
	switch {
	case top.cluster:
		r.Topology = "cluster"
	case s.target.Ring != nil:
		r.Topology = "ring"
	case s.target.Kind == KindMemcached:
		r.Topology = "pool"
		if len(top.addrs) == 1 {
			r.Topology = "standalone"
		}
	default:
		r.Topology = "standalone"
	}
	r.Protocol = "resp"
	if s.target.Kind == KindMemcached {
		r.Protocol = s.Protocol
	}
	r.Command = string(s.Command)
	r.Workload = describe(s)
	r.Connections, r.Pipeline = s.Connections, s.Pipeline
	r.OpenLoop = s.Rate > 0
	r.TargetRate = s.Rate
	r.CoordinatedOmissionCorrected = r.OpenLoop
	secs := elapsed.Seconds()
	r.DurationSeconds = round(secs, 3)
	r.Ops, r.Errors, r.Hits, r.Misses = t.ops, t.errs, t.hits, t.misses
	r.ErrorSamples = t.samples
	r.Abandoned = t.abandoned
	r.BytesIn, r.BytesOut = rn.bytesIn, rn.bytesOut
	if secs > 0 {
		r.OpsPerSec = round(float64(r.Ops-r.Errors)/secs, 1) // failures are not throughput
		r.OutGbps = round(float64(r.BytesOut)*8/secs/1e9, 4)
		r.InGbps = round(float64(r.BytesIn)*8/secs/1e9, 4)
	}
	h := t.hist
	r.hist = h
	if h.TotalCount() > 0 {
		r.Latency = Latency{
			Avg: round(h.Mean()/1000, 3), P50: ms(h.ValueAtQuantile(50)), P95: ms(h.ValueAtQuantile(95)),
			P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()),
		}
	}
	r.Client.CPUSeconds = round(clientCPU, 3)
	if r.Ops > 0 {
		r.Client.CPUSecondsPer1kOps = round(clientCPU/float64(r.Ops)*1000, 6)
	}
}

func describe(s *settings) string {
	var b strings.Builder
	switch s.Command {
	case CmdMixed:
		fmt.Fprintf(&b, "SET:GET %d:%d", s.setRatio, s.getRatio)
	case CmdTemplate:
		b.WriteString(strings.Join(s.Template, " "))
	case CmdMGet, CmdMSet:
		fmt.Fprintf(&b, "%s of %d keys", s.Command, s.MultiKeys)
	default:
		b.WriteString(string(s.Command))
	}
	fmt.Fprintf(&b, "; %d keys %s", s.Keys, s.Distribution)
	if s.Distribution == Zipf {
		fmt.Fprintf(&b, " (s=%g)", s.ZipfExponent)
	}
	fmt.Fprintf(&b, "; values %s B %s", s.DataSize, s.DataContent)
	if s.TTL > 0 {
		fmt.Fprintf(&b, ", TTL %s", s.TTL)
	}
	return b.String()
}

// WriteText writes the human summary.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	mode := "closed loop"
	if r.OpenLoop {
		mode = "open loop at " + strconv.FormatFloat(r.TargetRate, 'f', -1, 64) + " ops/s"
		if r.TargetRate >= 1 {
			mode = fmt.Sprintf("open loop at %.0f ops/s", r.TargetRate)
		}
	}
	fmt.Fprintf(&b, "target       %s (%s, %s, %s)\n", vis.Escape(r.Target), vis.Escape(r.Topology), r.nodes(), vis.Escape(r.Protocol))
	fmt.Fprintf(&b, "workload     %s\n", vis.Escape(r.Workload))
	fmt.Fprintf(&b, "load         %d connections, pipeline %d, %s\n", r.Connections, r.Pipeline, mode)
	if r.PrefillKeys > 0 {
		fmt.Fprintf(&b, "prefill      %d keys in %.3f s\n", r.PrefillKeys, r.PrefillSeconds)
	}
	if r.Interrupted {
		b.WriteString("interrupted  the run was stopped early; numbers cover the part that ran\n")
	}
	fmt.Fprintf(&b, "duration     %.3f s\n", r.DurationSeconds)
	fmt.Fprintf(&b, "ops          %d\n", r.Ops)
	fmt.Fprintf(&b, "errors       %d\n", r.Errors)
	for _, e := range r.ErrorSamples {
		fmt.Fprintf(&b, "  error      %s\n", vis.Escape(e)) // a server's words
	}
	fmt.Fprintf(&b, "throughput   %.1f ops/s (successful operations only)\n", r.OpsPerSec)
	if r.Abandoned > 0 {
		fmt.Fprintf(&b, "  note       latency includes the %d requests that timed out or lost their connection, at the moment they were given up\n", r.Abandoned)
	}
	if r.OpenLoop && r.OpsPerSec < 0.95*r.TargetRate && !r.Interrupted {
		fmt.Fprintf(&b, "  warning    below the target rate: the server or this client could not keep up; latencies include the queueing\n")
	}
	if r.Hits+r.Misses > 0 {
		fmt.Fprintf(&b, "hits         %d\n", r.Hits)
		fmt.Fprintf(&b, "misses       %d\n", r.Misses)
		if r.Hits == 0 {
			b.WriteString("  note       every read missed; add --prefill to write the key space first\n")
		}
	}
	fmt.Fprintf(&b, "bytes out    %d (%.4f Gbps)\n", r.BytesOut, r.OutGbps)
	fmt.Fprintf(&b, "bytes in     %d (%.4f Gbps)\n", r.BytesIn, r.InGbps)
	l := r.Latency
	fmt.Fprintf(&b, "latency ms   avg %.3f  p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n",
		l.Avg, l.P50, l.P95, l.P99, l.P999, l.Max)
	if r.CoordinatedOmissionCorrected {
		b.WriteString("             coordinated omission corrected: measured from each request's intended send time\n")
	} else {
		b.WriteString("             closed loop: measured from each request's actual send, so a stall is under-counted\n" +
			"             (coordinated omission); use --rate for corrected latencies\n")
	}
	if s := r.Server; s != nil {
		fmt.Fprintf(&b, "server cpu   %.3f s (%.2f cores), %.6f s per 1,000 ops\n", s.CPUSeconds, s.CPUCores, s.CPUSecondsPer1kOps)
		fmt.Fprintf(&b, "server net   in %d B (%.4f Gbps), out %d B (%.4f Gbps)\n", s.NetInBytes, s.NetInGbps, s.NetOutBytes, s.NetOutGbps)
		keys := make([]string, 0, len(s.Commands))
		for k := range s.Commands {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%d", vis.Escape(k), s.Commands[k])
		}
		fmt.Fprintf(&b, "server cmds  %s\n", strings.Join(parts, " "))
		if len(s.PerNode) > 1 {
			for _, n := range s.PerNode {
				fmt.Fprintf(&b, "  node       %s commands=%d cpu=%.3f s\n", vis.Escape(n.Addr), n.Commands, n.CPUSeconds)
			}
		}
	} else {
		b.WriteString("server       counters not available (INFO/stats refused)\n")
	}
	fmt.Fprintf(&b, "client cpu   %.3f s, %.6f s per 1,000 ops\n", r.Client.CPUSeconds, r.Client.CPUSecondsPer1kOps)
	_, err := io.WriteString(w, b.String())
	return err
}

// PercentilePoint is one point of a latency percentile curve.
type PercentilePoint struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

// Percentiles returns the latency at percentiles from 0 up to the highest
// the sample count supports, five points per halving of the remaining
// tail, as HdrHistogram's percentile distribution does.
func (r *Result) Percentiles() []PercentilePoint {
	h := r.hist
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	var pts []PercentilePoint
	n := float64(h.TotalCount())
	for i := 0; ; i++ {
		p := 100 * (1 - math.Pow(0.5, float64(i)/5))
		if 1/(1-p/100) > n {
			break
		}
		pts = append(pts, PercentilePoint{Percentile: p, Ms: ms(h.ValueAtQuantile(p))})
		if i > 200 {
			break
		}
	}
	return append(pts, PercentilePoint{Percentile: 100, Ms: ms(h.Max())})
}

// WriteHDR writes the histogram as an HdrHistogram percentile
// distribution (.hgrm, values in milliseconds), the format the
// HdrHistogram plotter and wrk2 use.
func (r *Result) WriteHDR(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)")
	n := float64(0)
	if r.hist != nil {
		n = float64(r.hist.TotalCount())
	}
	for _, p := range r.Percentiles() {
		q := p.Percentile / 100
		inv := "inf"
		if q < 1 {
			inv = fmt.Sprintf("%.2f", 1/(1-q))
		}
		fmt.Fprintf(&b, "%12.3f %2.12f %10d %14s\n", p.Ms, q, int64(math.Round(q*n)), inv)
	}
	if r.hist != nil {
		fmt.Fprintf(&b, "#[Mean    = %12.3f, StdDeviation   = %12.3f]\n", r.hist.Mean()/1000, r.hist.StdDev()/1000)
		fmt.Fprintf(&b, "#[Max     = %12.3f, Total count    = %12d]\n", ms(r.hist.Max()), r.hist.TotalCount())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// nodes is "1 node" or "N nodes".
func (r *Result) nodes() string {
	if r.Nodes == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", r.Nodes)
}
