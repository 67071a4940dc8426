package loadgen

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// Run drives the target described by cfg and returns what it measured.
//
// Errors before the measured phase (a bad Config, an unreachable server,
// refused credentials, a target that is not the cluster it claims to be)
// are returned as errors worded for a person. Errors during the run
// (error replies, lost connections) are counted in the Result, which is
// also returned when ctx is cancelled part way (Result.Interrupted).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	s, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	top, err := discover(ctx, s)
	if err != nil {
		return nil, err
	}
	if top.cluster && (s.Command == CmdMGet || s.Command == CmdMSet) {
		return nil, cfgErr("%s on Redis Cluster needs every key of a request in one hash slot, and kura's keys are spread over all slots; use --command get/set with --pipeline %d instead", s.Command, s.MultiKeys)
	}
	res := &Result{}
	if s.Prefill {
		start := time.Now()
		if err := prefill(ctx, s, top); err != nil {
			return nil, fmt.Errorf("prefill: %w", err)
		}
		res.PrefillKeys = s.Keys
		res.PrefillSeconds = round(time.Since(start).Seconds(), 3)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := run(ctx, s, top, res)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// prefill writes every key once with pipelined SETs (HSETs for hash
// workloads), in key order.
func prefill(ctx context.Context, s *settings, top *topology) error {
	p := *s
	p.Command, p.Template, p.Ratio = CmdSet, nil, ""
	if s.Command == CmdHSet || (s.Command == CmdTemplate && strings.HasPrefix(strings.ToLower(s.Template[0]), "h")) {
		p.Command = CmdHSet
	}
	p.Distribution = Sequential
	p.Requests = s.Keys
	p.Duration = 0
	p.Rate = 0
	p.Pipeline = 64
	p.Connections = min(s.Connections, 8)
	p.Progress = nil
	res := &Result{}
	out, err := run(ctx, &p, top, res)
	if err != nil {
		return err
	}
	if out.Errors > 0 {
		return fmt.Errorf("%d of %d writes failed: %s", out.Errors, out.Ops, strings.Join(out.ErrorSamples, "; "))
	}
	return nil
}

// run is one measured phase.
func run(ctx context.Context, s *settings, top *topology, res *Result) (*Result, error) {
	r := &runner{s: s, top: top, conns: map[*conn]struct{}{}, endAt: s.Duration}
	if top.cluster {
		r.cs = &clusterState{s: s, cur: top}
	}
	if s.target.Kind == KindMemcached {
		r.proto = newMCProto(s)
	} else {
		r.proto = newRedisProto(s)
	}
	if s.Rate > 0 {
		r.interval = float64(time.Second) * float64(s.Connections) / s.Rate
	}
	nShards := min(s.Connections, 16)
	r.shards = make([]*shard, nShards)
	for i := range r.shards {
		r.shards[i] = &shard{hist: newHist()}
	}
	values := newValuePool(s, uint64(time.Now().UnixNano()))
	workers := make([]*worker, s.Connections)
	for i := range workers {
		workers[i] = newWorker(r, i, values)
	}
	defer func() {
		for _, w := range workers {
			w.closeAll()
		}
	}()
	// Connect everything before the clock starts, so that dial time is not
	// counted and a wrong address fails here, once, clearly.
	var wg sync.WaitGroup
	var dialErr error
	var dialMu sync.Mutex
	sem := make(chan struct{}, 64)
	for _, w := range workers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := w.connect(ctx); err != nil {
				dialMu.Lock()
				dialErr = cmp.Or(dialErr, err)
				dialMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if dialErr != nil {
		return nil, dialErr
	}

	// The server's own counters, before and after, on connections of their
	// own.
	ctl, err := openControl(ctx, s, top)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range ctl {
			c.close()
		}
	}()
	before := readCounters(s, ctl)
	cpu0 := processCPU()

	tot := &totals{hist: newHist()}
	iv := newHist()
	r.base = time.Now()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopWatch := context.AfterFunc(ctx, func() {
		r.stop.Store(true)
		r.unblock()
	})
	defer stopWatch()

	done := make(chan struct{})
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(runCtx)
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := r.base
loop:
	for {
		select {
		case <-done:
			break loop
		case now := <-tick.C:
			ops, errs, lastErr := tot.drain(r.shards, iv)
			if s.Progress != nil {
				dt := now.Sub(last).Seconds()
				s.Progress(Interval{
					Elapsed: now.Sub(r.base), Ops: ops, Errors: errs,
					OpsPerSec: float64(ops) / dt,
					P50:       time.Duration(iv.ValueAtQuantile(50)) * time.Microsecond,
					P99:       time.Duration(iv.ValueAtQuantile(99)) * time.Microsecond,
					LastError: lastErr,
				})
			}
			last = now
		}
	}
	elapsed := time.Since(r.base)
	tot.drain(r.shards, iv)
	cpu1 := processCPU()
	var after []serverCounters
	if ctx.Err() == nil {
		after = readCounters(s, ctl)
	}
	for _, w := range workers {
		w.closeAll()
	}

	res.build(s, top, r, tot, elapsed, cpu1-cpu0)
	res.Interrupted = ctx.Err() != nil
	if before != nil && after != nil {
		res.Server = serverReport(s, top, before, after, res.Ops, elapsed)
	}
	return res, nil
}

func openControl(ctx context.Context, s *settings, top *topology) ([]*conn, error) {
	var cs []*conn
	for _, a := range top.addrs {
		c, err := dial(ctx, s, a)
		if err != nil {
			for _, c := range cs {
				c.close()
			}
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// readCounters reads every node's counters; nil when one cannot be read
// (a managed server may refuse INFO): the report then has no server part.
func readCounters(s *settings, ctl []*conn) []serverCounters {
	out := make([]serverCounters, len(ctl))
	for i, c := range ctl {
		var err error
		if s.target.Kind == KindMemcached {
			out[i], err = c.mcCounters()
		} else {
			out[i], err = c.redisCounters()
		}
		if err != nil {
			return nil
		}
	}
	return out
}

func serverReport(s *settings, top *topology, before, after []serverCounters, ops int64, elapsed time.Duration) *ServerReport {
	sr := &ServerReport{Nodes: len(top.addrs), Commands: map[string]int64{}}
	for i := range after {
		d := after[i].sub(before[i])
		if s.target.Kind == KindRedis {
			// The "before" INFO itself is counted by the "after" reading.
			if d.calls["info"]--; d.calls["info"] <= 0 {
				delete(d.calls, "info")
			}
		}
		var nodeOps int64
		for k, v := range d.calls {
			sr.Commands[k] += v
			if !strings.HasPrefix(k, "get_") {
				nodeOps += v
			}
		}
		sr.CPUSeconds += d.cpu
		sr.NetInBytes += d.netIn
		sr.NetOutBytes += d.netOut
		sr.PerNode = append(sr.PerNode, NodeReport{Addr: top.addrs[i], Commands: nodeOps, CPUSeconds: round(d.cpu, 3)})
	}
	secs := elapsed.Seconds()
	sr.CPUSeconds = round(sr.CPUSeconds, 3)
	if ops > 0 {
		sr.CPUSecondsPer1kOps = round(sr.CPUSeconds/float64(ops)*1000, 6)
	}
	if secs > 0 {
		sr.CPUCores = round(sr.CPUSeconds/secs, 2)
		sr.NetInGbps = round(float64(sr.NetInBytes)*8/secs/1e9, 4)
		sr.NetOutGbps = round(float64(sr.NetOutBytes)*8/secs/1e9, 4)
	}
	return sr
}

// round rounds x to d decimals, so that JSON and text carry the same
// numbers.
func round(x float64, d int) float64 {
	p := math.Pow10(d)
	return math.Round(x*p) / p
}
