package debezium

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc"
	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/store"
	"github.com/kuracache/kura/store/storeurl"
)

// childEnv carries a childConfig (JSON) to a test binary that TestMain runs as a cdc process
// over a KafkaSource, until SIGTERM or SIGKILL.
const childEnv = "KURA_DEBEZIUM_CHILD"

type childConfig struct {
	Brokers  []string `json:"brokers"`
	Group    string   `json:"group"`
	Topic    string   `json:"topic"`
	ClientID string   `json:"client_id"`
	Table    string   `json:"table"`
	Template string   `json:"template"`
	Targets  []string `json:"targets"` // store URLs
}

func child(conf string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var c childConfig
	if err := json.Unmarshal([]byte(conf), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rule, err := cdc.Template(c.Table, c.Template)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	m, err := cdc.NewMapping(rule)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg := testConfig(c.Brokers[0], c.Group, c.Topic)
	cfg.ClientOptions = []kgo.Opt{kgo.ClientID(c.ClientID)}
	src, err := NewSource(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts := cdc.Options{Source: src, Mapping: m, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	for _, u := range c.Targets {
		s, err := storeurl.Open(ctx, u)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer s.Close()
		opts.Targets = append(opts.Targets, cdc.Target{Name: strings.SplitN(u, ":", 2)[0], Store: s})
	}
	if err := cdc.Run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type childProc struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{}
}

func startChild(t *testing.T, c childConfig) *childProc {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &childProc{id: c.ClientID, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.kill)
	return p
}

func (p *childProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// assignment returns, per member client id, the partitions of topic it owns in group.
func assignment(ctx context.Context, adm *kadm.Client, group, topic string) (map[string][]int32, error) {
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	g, ok := gs[group]
	if !ok {
		return nil, fmt.Errorf("group %s not described", group)
	}
	if g.Err != nil {
		return nil, g.Err
	}
	out := map[string][]int32{}
	for _, m := range g.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		for _, tp := range a.Topics {
			if tp.Topic == topic {
				ps := append([]int32(nil), tp.Partitions...)
				sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
				out[m.ClientID] = append(out[m.ClientID], ps...)
			}
		}
	}
	return out, nil
}

// TestKillNineAndBrokerRestartLoseNothing: plain-SQL writers on PostgreSQL, Debezium into a
// two-partition topic, two cdc processes in one consumer group (session.timeout.ms 1.5 s)
// invalidating Redis and memcached while Go readers fill them through kura (leases on). One
// process is kill -9'd mid-run: its partition moves to the live one. A new process joins; the
// broker is killed and restarted on its log directory. At the end every cached value equals
// the database's or is absent.
func TestKillNineAndBrokerRestartLoseNothing(t *testing.T) {
	const rows = 200
	p := startPath(t, "dbzkill", rows, 2)
	caches := cdctest.StartCaches(t)
	ctx := context.Background()
	base := childConfig{Brokers: []string{p.B.Addr}, Group: "g-kill", Topic: p.Topic, Table: p.Table,
		Template: p.Name + ":{id}", Targets: []string{"redis://" + caches.Redis.Addr, "memcached://" + caches.Memcached.Addr}}
	with := func(id string) childConfig { c := base; c.ClientID = id; return c }

	var views []*kura.Keyed[int64, int64]
	for name, st := range map[string]store.Store{"redis": caches.RS, "memcached": caches.MS} {
		c, err := kura.New[int64](st, kura.Options{Name: name, Leases: kura.LeasesRequired, LeaseWait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		v, err := kura.NewKeyed[int64, int64](c, kura.KeyedOptions[int64]{Prefix: p.Name + ":"})
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, v)
	}

	adminCl, err := p.B.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)
	// waitAssigned waits until the group's assignment satisfies ok, and returns it.
	waitAssigned := func(what string, limit time.Duration, ok func(map[string][]int32) bool) map[string][]int32 {
		t.Helper()
		deadline := time.Now().Add(limit)
		var last map[string][]int32
		var lastErr error
		for time.Now().Before(deadline) {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			last, lastErr = assignment(actx, adm, base.Group, p.Topic)
			cancel()
			if lastErr == nil && ok(last) {
				return last
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: not within %v (assignment %v, error %v)", what, limit, last, lastErr)
		return nil
	}
	each := func(n int) func(map[string][]int32) bool {
		return func(a map[string][]int32) bool {
			if len(a) != n {
				return false
			}
			for _, ps := range a {
				if len(ps) != 2/n {
					return false
				}
			}
			return true
		}
	}

	procs := map[string]*childProc{"a": startChild(t, with("a")), "b": startChild(t, with("b"))}
	wctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var writes, reads atomic.Int64
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				if _, err := p.update(wctx, 1+rand.Int64N(rows)); err == nil {
					writes.Add(1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	for rd := 0; rd < 4; rd++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			view := views[rd%2]
			for wctx.Err() == nil {
				if _, err := view.Fetch(wctx, 1+rand.Int64N(rows), p.load); err == nil {
					reads.Add(1)
				}
			}
		}()
	}
	defer func() { stopLoad(); wg.Wait() }()

	before := waitAssigned("both processes own a partition", 90*time.Second, each(2))
	time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
	killed := time.Now()
	procs["a"].kill()
	after := waitAssigned("the live process owns both partitions after the kill -9", 30*time.Second, func(a map[string][]int32) bool {
		return len(a) == 1 && len(a["b"]) == 2
	})
	rebalance := time.Since(killed)
	t.Logf("kill -9 of a (owned %v): b owns %v after %v", before["a"], after["b"], rebalance.Round(time.Millisecond))

	procs["c"] = startChild(t, with("c"))
	waitAssigned("the new process takes a partition", 60*time.Second, each(2))
	time.Sleep(time.Second)
	p.B.Kill()
	time.Sleep(2 * time.Second) // writes go on; Debezium's producer waits for the broker
	t0 := time.Now()
	if err := p.B.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker restarted after SIGKILL, answering after %v", time.Since(t0).Round(time.Millisecond))
	waitAssigned("both processes own a partition after the broker restart", 120*time.Second, each(2))
	time.Sleep(2 * time.Second)
	stopLoad()
	wg.Wait()

	// Markers: after the load, rows 1-10 are cached, then updated; once all ten are gone from
	// both caches and the group has nothing left to read, every earlier event of their
	// partitions (Kafka keeps each partition's order) was applied too.
	for id := int64(1); id <= 10; id++ {
		for _, v := range views {
			if _, err := v.Fetch(ctx, id, p.load); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.update(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 3*time.Minute, "the markers invalidated and the group's lag 0", func() bool {
		for id := int64(1); id <= 10; id++ {
			for _, v := range views {
				if _, err := v.Get(ctx, id); !errors.Is(err, kura.ErrNotFound) {
					return false
				}
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		lags, err := adm.Lag(lctx, base.Group)
		if err != nil {
			return false
		}
		l, ok := lags[base.Group]
		return ok && l.Error() == nil && l.Lag.Total() == 0
	})

	stale := cdctest.Stale(t, views, rows, p.load)
	t.Logf("%d plain-SQL writes, %d reads; rebalance after the kill -9 took %v", writes.Load(), reads.Load(), rebalance.Round(time.Millisecond))
	if len(stale) > 0 {
		t.Fatalf("%d stale entries after the run:\n%s", len(stale), strings.Join(stale, "\n"))
	}
	if p.Eng.Exited() {
		t.Errorf("the Debezium engine exited during the run:\n%s", p.Eng.Log())
	}
}
