package readcheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/history"
	"github.com/kuracache/kura/internal/harness/proctest"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
	"github.com/kuracache/kura/store/move"
)

func TestMain(m *testing.M) {
	os.Exit(proctest.Main(m, proctest.Workers{"hist": histWorker}))
}

// soak reports whether the full sizes run (KURA_SOAK=1).
func soak() bool { return os.Getenv("KURA_SOAK") == "1" }

// sizes of a run: small under make test, full under make soak.
func sizes() (procs, readers, keys int, dur time.Duration) {
	if soak() {
		return 4, 4, 8, 20 * time.Second
	}
	return 3, 6, 2, 3 * time.Second
}

// combos lists every combination that exists on backend (see
// BENCHMARKS.md, "Read path histories", for those that do not and why).
func combos(backend string) []combo {
	var out []combo
	switch backend {
	case "memstore": // no leases, no nodes for the health wrapper
		for _, l1 := range []string{"", "staleness"} {
			out = append(out, combo{Backend: backend, L1: l1})
		}
		return out
	case "redis", "cluster":
		// The L1 either relies on Tracking's reports or, without
		// Tracking, is bounded by MaxStaleness.
		for _, leases := range []bool{true, false} {
			for _, l1 := range []string{"", "tracking", "staleness"} {
				for _, h := range []bool{false, true} {
					out = append(out, combo{Backend: backend, Leases: leases, L1: l1, Health: h})
					if leases {
						out = append(out, combo{Backend: backend, Leases: leases, L1: l1, Health: h, Early: time.Second})
					}
				}
			}
		}
	case "ring":
		// Sharded standalone Redis (store/redisring): the read path over
		// per-shard leases, per-shard tracking and the per-shard breaker;
		// early refresh and the MaxStaleness L1 add nothing per shard that
		// "redis" does not check.
		for _, leases := range []bool{true, false} {
			for _, l1 := range []string{"", "tracking"} {
				for _, h := range []bool{false, true} {
					out = append(out, combo{Backend: backend, Leases: leases, L1: l1, Health: h})
				}
			}
		}
	case "memcached":
		for _, leases := range []bool{true, false} {
			for _, l1 := range []string{"", "staleness"} {
				for _, h := range []bool{false, true} {
					out = append(out, combo{Backend: backend, Leases: leases, L1: l1, Health: h})
					if leases {
						out = append(out,
							combo{Backend: backend, Leases: leases, L1: l1, Health: h, SWR: time.Second},
							combo{Backend: backend, Leases: leases, L1: l1, Health: h, Early: time.Second})
					}
				}
			}
		}
	}
	return out
}

// faults are the injected faults: each must make the checker report a
// violation on the combination it runs in. The store-level fault runs
// beside the other combinations; a pipeline fault (process-wide) runs in
// processes of its own.
func faults(backend, pipelineFault string) []combo {
	switch {
	case backend == "memstore":
		return nil
	case pipelineFault != "":
		// join-after-invalidate shows only when a caller arrives while a
		// load that an Invalidate overtook is still running. Hot readers
		// that never pause all sit in the same load and come back
		// together, so on Redis such late callers were rare (0–9 stale
		// reads in about 2,000). A 20 ms load keeps each overtaken load
		// open (the writer invalidates far more often), and readers that
		// pause at random arrive all through it.
		return []combo{{Backend: backend, Leases: true, Hot: true, Fault: pipelineFault,
			LoaderDelay: joinFaultWindow, ReaderPause: joinFaultWindow}}
	}
	// A slower loader: more loads are overtaken by an Invalidate. On the
	// cluster, spread over many keys, that was still rare (0-2 stale
	// reads of about 150 under load): there the fault runs on the hot
	// key, whose every load an Invalidate overtakes, with readers that
	// pause at random so that some arrive after each overtaken fill.
	if backend == "cluster" {
		return []combo{{Backend: backend, Leases: true, Hot: true, Fault: "unleased-fill",
			LoaderDelay: joinFaultWindow, ReaderPause: joinFaultWindow}}
	}
	return []combo{{Backend: backend, Leases: true, Fault: "unleased-fill", LoaderDelay: 20 * time.Millisecond}}
}

// joinFaultWindow is how long a load of the join-after-invalidate fault
// takes, and the longest pause of its readers.
const joinFaultWindow = 20 * time.Millisecond

// outcome is the check of one combination.
type outcome struct {
	combo   combo
	procs   int
	res     history.Result
	calls   map[string]int64
	bypass  map[string]int64
	sample  []string
	errors  int64
	move    move.Stats // summed over the processes of a move backend
	errShow string
}

var (
	summaryMu sync.Mutex
	summary   []outcome
)

// TestHistories records histories on every combination and checks each.
func TestHistories(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test on real servers")
	}
	db := servertest.Redis(t, servers.RedisConfig{})
	r := servertest.Redis(t, servers.RedisConfig{})
	cl := servertest.RedisCluster(t)
	pool := servertest.MemcachedPool(t, 3, servers.MemcachedConfig{})
	mc := servertest.Addrs(pool)
	_, shards := servertest.RedisShards(t, 3, servers.RedisConfig{})
	addrs := map[string][]string{"redis": {r.URL()}, "cluster": {cl.URL()}, "ring": shards, "memcached": mc, "memstore": nil}
	t.Cleanup(func() { printSummary(t) })
	// One group of processes at a time: the machine is small and shared.
	for _, backend := range []string{"redis", "cluster", "ring", "memcached", "memstore"} {
		t.Run(backend, func(t *testing.T) {
			run(t, addrs, db.Addr, append(combos(backend), faults(backend, "")...), "")
		})
	}
	// The reproduction (one hot key, 20 readers per process, a
	// writer without pauses), on every backend with leases, in processes
	// of its own so that nothing else slows it down.
	var hot, joined []combo
	for _, b := range []string{"redis", "cluster", "memcached"} {
		hot = append(hot, combo{Backend: b, Leases: true, Hot: true})
	}
	for _, b := range []string{"redis", "memcached"} {
		joined = append(joined, faults(b, "join-after-invalidate")...)
	}
	t.Run("hot-key", func(t *testing.T) { run(t, addrs, db.Addr, hot, "") })
	// The pipeline's own fault (process-wide), in processes of its own.
	t.Run("join-after-invalidate", func(t *testing.T) { run(t, addrs, db.Addr, joined, "join-after-invalidate") })
}

func run(t *testing.T, addrs map[string][]string, db string, cs []combo, fault string) {
	procs, _, _, _ := sizes()
	if cs[0].Backend == "memstore" {
		procs = 1 // the store lives in the process: one process shares it
	}
	run2(t, addrs, db, cs, fault, nil, procs)
}

// run2 is run with procs processes and, if set, mod changing the
// arguments.
func run2(t *testing.T, addrs map[string][]string, db string, cs []combo, fault string, mod func(*args), procs int) {
	outs := record(t, addrs, db, cs, fault, mod, procs)
	logFaults(t, outs)
	for _, o := range outs {
		judge(t, o)
	}
	summaryMu.Lock()
	summary = append(summary, outs...)
	summaryMu.Unlock()
}

// logFaults says how strongly each injected fault showed in a run: how
// many of the reads after an Invalidate it made stale.
func logFaults(t *testing.T, outs []outcome) {
	t.Helper()
	for _, o := range outs {
		if o.combo.Fault != "" {
			t.Logf("%s: %d of %d reads after an Invalidate stale", o.combo.Name(), o.res.Stale, o.res.AfterInvalidate)
		}
	}
}

// record runs one group of processes over cs and checks each
// combination's history, without judging the outcomes.
func record(t *testing.T, addrs map[string][]string, db string, cs []combo, fault string, mod func(*args), procs int) []outcome {
	t.Helper()
	_, readers, keys, dur := sizes()
	if (cs[0].Backend == "memstore" || cs[0].Hot && cs[0].Fault == "") && !soak() {
		dur /= 2 // fast operations: half the time gives thousands
	}
	a := args{Fault: fault, Addrs: addrs, DB: db, Run: "rc" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36), Combos: cs, MinWrites: 10,
		Duration: dur, Readers: readers, Keys: keys, LoaderDelay: 5 * time.Millisecond, WriterPause: 2 * time.Millisecond, Dir: t.TempDir()}
	if mod != nil {
		mod(&a)
	}
	g := proctest.Start(t, "hist", procs, a, proctest.Options{Timeout: a.Duration + 90*time.Second})
	if err := g.Go(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.WaitReport(context.Background(), func(r proctest.Report) bool {
		var rep report
		return r.Decode(&rep) == nil && rep.Written
	}); err != nil {
		t.Errorf("waiting for the writes: %v", err)
	}
	g.Stop()
	results := g.WaitOK(t)
	all, err := proctest.Decode[report](results)
	if err != nil {
		t.Fatal(err)
	}
	var reps []report
	for _, rep := range all {
		if !rep.Written {
			reps = append(reps, rep)
		}
	}
	for i := range reps {
		b, err := os.ReadFile(reps[i].OpsFile)
		if err == nil {
			err = json.Unmarshal(b, &reps[i].Ops)
		}
		if err != nil {
			t.Fatalf("%s: the history of a child: %v", reps[i].Combo, err)
		}
	}
	byCombo := map[string][]report{}
	for _, rep := range reps {
		byCombo[rep.Combo] = append(byCombo[rep.Combo], rep)
	}
	checkStart := time.Now()
	defer func() {
		t.Logf("checked %d combinations in %v", len(cs), time.Since(checkStart).Round(time.Millisecond))
	}()
	var wg sync.WaitGroup
	outs := make([]outcome, len(cs))
	for i, c := range cs {
		wg.Go(func() { outs[i] = check(c, byCombo[c.Name()]) })
	}
	wg.Wait()
	return outs
}

func check(c combo, reps []report) outcome {
	o := outcome{combo: c, procs: len(reps), calls: map[string]int64{}, bypass: map[string]int64{}}
	var ops []history.Op
	for _, rep := range reps {
		ops = append(ops, rep.Ops...)
		for m, n := range rep.Calls {
			o.calls[m] += n
		}
		for m, n := range rep.Bypassed {
			o.bypass[m] += n
		}
		o.sample = append(o.sample, rep.Sample...)
		o.errors += rep.Errors
		if m := rep.Move; m != nil {
			o.move.WarmHits += m.WarmHits
			o.move.Copies += m.Copies
			o.move.CopiesRefused += m.CopiesRefused
			o.move.Fallbacks += m.Fallbacks
			if m.Phase > o.move.Phase {
				o.move.Phase = m.Phase
			}
		}
		if o.errShow == "" {
			o.errShow = rep.ErrShown
		}
	}
	if dir := os.Getenv("KURA_READCHECK_DUMP"); dir != "" { // for looking at a history by hand
		if b, err := json.Marshal(ops); err == nil {
			_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(c.Name(), "/", "_")+".json"), b, 0o644)
		}
	}
	o.res = history.Check(ops, c.property(), 60*time.Second)
	return o
}

// judge fails the test for a broken guarantee, a call that went around a
// wrapper, or a run too small to show anything; an injected fault must
// be caught.
func judge(t *testing.T, o outcome) {
	t.Helper()
	name := o.combo.Name()
	if o.procs == 0 {
		t.Errorf("%s: no process reported", name)
		return
	}
	if o.res.Reads == 0 || o.res.AfterInvalidate == 0 {
		t.Errorf("%s: %d reads, %d after an Invalidate: the run checked nothing (errors: %d, first: %s)", name, o.res.Reads, o.res.AfterInvalidate, o.errors, o.errShow)
	}
	if o.combo.Fault != "" {
		if o.res.OK() {
			t.Errorf("%s: the injected fault was not caught: %d reads after an Invalidate, %d stale", name, o.res.AfterInvalidate, o.res.Stale)
		}
		return
	}
	if !o.res.OK() {
		t.Errorf("%s: %d reads and loads break the guarantee %q (%d of %d reads after an Invalidate were served a value loaded before it):\n%s",
			name, o.res.Broken, o.combo.property(), o.res.Stale, o.res.AfterInvalidate, strings.Join(o.res.Failures, "\n"))
	}
	if n := sum(o.bypass); n > 0 {
		t.Errorf("%s: %d store calls went around a wrapper (%v), e.g. %s", name, n, o.bypass, strings.Join(o.sample, "; "))
	}
	for _, need := range needed(o.combo) {
		if sumOf(o.calls, need...) == 0 {
			t.Errorf("%s: no %s call passed through the wrappers (calls: %v)", name, strings.Join(need, " or "), o.calls)
		}
	}
}

// needed lists the store calls each combination must make through the
// wrappers, so that "nothing went around them" is not vacuous.
func needed(c combo) [][]string {
	var out [][]string
	read := []string{"Get", "GetMany"}
	switch {
	case c.L1 == "tracking":
		read = []string{"GetTracked", "GetManyTracked"}
	case c.Leases: // the lease read is the read (and fills an L1 bounded by MaxStaleness)
		read = []string{"LeaseGet"}
	}
	out = append(out, read)
	if c.Leases {
		out = append(out, []string{"LeaseGet"}, []string{"Fill"}, []string{"Invalidate"})
	} else {
		out = append(out, []string{"Set", "SetMany"}, []string{"Delete", "DeleteMany"})
	}
	return out
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func sumOf(m map[string]int64, keys ...string) int64 {
	var n int64
	for _, k := range keys {
		n += m[k]
	}
	return n
}

// printSummary logs the table BENCHMARKS.md copies: per combination, the
// processes, operations and reads checked, and the verdict.
func printSummary(t *testing.T) {
	summaryMu.Lock()
	defer summaryMu.Unlock()
	sort.Slice(summary, func(i, j int) bool { return summary[i].combo.Name() < summary[j].combo.Name() })
	var b strings.Builder
	b.WriteString("\n| combination | processes | operations | reads | reads and loads checked | reads after an Invalidate | of them pre-invalidation values | reads breaking the model | store calls through the wrappers | went around a wrapper | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, o := range summary {
		verdict := "pass"
		switch {
		case o.combo.Fault != "" && !o.res.OK():
			verdict = "fault caught"
		case o.combo.Fault != "":
			verdict = "FAULT MISSED"
		case !o.res.OK():
			verdict = "VIOLATION"
		case sum(o.bypass) > 0:
			verdict = "WENT AROUND A WRAPPER"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", o.combo.Name(), o.procs, o.res.Ops, o.res.Reads, o.res.Partitions,
			o.res.AfterInvalidate, o.res.Stale, o.res.Broken, sum(o.calls), sum(o.bypass), verdict)
	}
	t.Log(b.String())
	if f := os.Getenv("KURA_READCHECK_TABLE"); f != "" {
		_ = os.WriteFile(f, []byte(b.String()), 0o644)
	}
}
