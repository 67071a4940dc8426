package proctest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/proctest"
	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// TestMain names the children this test binary can run.
func TestMain(m *testing.M) {
	os.Exit(proctest.Main(m, proctest.Workers{
		"incr":  incrWorker,
		"loop":  loopWorker,
		"hang":  hangWorker,
		"fail":  failWorker,
		"panic": panicWorker,
		"echo":  echoWorker,
	}))
}

// incrArgs are the arguments of the incr and loop workers.
type incrArgs struct {
	Addr       string
	Key        string
	Goroutines int
	Each       int // INCRs per goroutine (incr only)
}

// incrReport is what they report.
type incrReport struct {
	Child  int
	Incrs  int
	Errors int
	Final  bool
}

// redisConn is one raw RESP connection sending INCR.
type redisConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRedis(addr string) (*redisConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &redisConn{c: c, r: bufio.NewReader(c)}, nil
}

func (rc *redisConn) incr(key string) (int64, error) {
	_ = rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(rc.c, "*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n", len(key), key); err != nil {
		return 0, err
	}
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(line, ":") {
		return 0, fmt.Errorf("INCR answered %q", strings.TrimSpace(line))
	}
	return strconv.ParseInt(strings.TrimSpace(line[1:]), 10, 64)
}

// dialAll opens one connection per goroutine before the barrier, so the
// measured work starts together.
func dialAll(a incrArgs) ([]*redisConn, error) {
	conns := make([]*redisConn, a.Goroutines)
	for i := range conns {
		c, err := dialRedis(a.Addr)
		if err != nil {
			return nil, err
		}
		conns[i] = c
	}
	return conns, nil
}

// incrWorker: Goroutines goroutines each send Each INCRs, then report.
func incrWorker(ctx context.Context, c *proctest.Child) error {
	var a incrArgs
	if err := c.Args(&a); err != nil {
		return err
	}
	conns, err := dialAll(a)
	if err != nil {
		return err
	}
	if err := c.Ready(ctx); err != nil {
		return err
	}
	var mu sync.Mutex
	rep := incrReport{Child: c.Index, Final: true}
	var wg sync.WaitGroup
	for _, rc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rc.c.Close()
			for i := 0; i < a.Each && ctx.Err() == nil; i++ {
				_, err := rc.incr(a.Key)
				mu.Lock()
				if err != nil {
					rep.Errors++
				} else {
					rep.Incrs++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return c.Report(rep)
}

// loopWorker INCRs until its context ends, reporting progress every 100
// INCRs and its total at the end.
func loopWorker(ctx context.Context, c *proctest.Child) error {
	var a incrArgs
	if err := c.Args(&a); err != nil {
		return err
	}
	conns, err := dialAll(a)
	if err != nil {
		return err
	}
	if err := c.Ready(ctx); err != nil {
		return err
	}
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for _, rc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rc.c.Close()
			for ctx.Err() == nil {
				if _, err := rc.incr(a.Key); err != nil {
					return
				}
				mu.Lock()
				total++
				n := total
				mu.Unlock()
				if n%100 == 0 {
					_ = c.Report(incrReport{Child: c.Index, Incrs: n})
				}
			}
		}()
	}
	wg.Wait()
	return c.Report(incrReport{Child: c.Index, Incrs: total, Final: true})
}

// hangWorker ignores its context: only a kill ends it.
func hangWorker(ctx context.Context, c *proctest.Child) error {
	if err := c.Ready(ctx); err != nil {
		return err
	}
	_ = c.Report("hanging")
	time.Sleep(time.Hour)
	return nil
}

func failWorker(ctx context.Context, c *proctest.Child) error {
	fmt.Println("a stray print goes to stderr")
	return fmt.Errorf("child %d failed on purpose", c.Index)
}

func panicWorker(ctx context.Context, c *proctest.Child) error {
	panic("worker panicked on purpose")
}

// echoWorker reports its arguments, its index and N.
func echoWorker(ctx context.Context, c *proctest.Child) error {
	var s string
	if err := c.Args(&s); err != nil {
		return err
	}
	return c.Report(fmt.Sprintf("%s/%d/%d", s, c.Index, c.N))
}

func redisGet(t *testing.T, r *servers.Redis, key string) int {
	t.Helper()
	s, err := r.Do(context.Background(), "GET", key)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(s)
	return n
}

// gone reports whether no process has this pid any more.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// TestIncrFromProcesses: 4 processes x 50 goroutines INCR one counter in
// a real redis-server; the total matches both the children's reports and
// the expected count.
func TestIncrFromProcesses(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	const procs, goroutines, each = 4, 50, 20
	g := proctest.Start(t, "incr", procs, incrArgs{Addr: r.Addr, Key: "counter", Goroutines: goroutines, Each: each}, proctest.Options{})
	if err := g.Go(); err != nil {
		t.Fatal(err)
	}
	res := g.WaitOK(t)
	reps, err := proctest.Decode[incrReport](res)
	if err != nil {
		t.Fatal(err)
	}
	sum, children := 0, map[int]bool{}
	for _, rep := range reps {
		if rep.Errors != 0 {
			t.Errorf("child %d saw %d errors", rep.Child, rep.Errors)
		}
		sum += rep.Incrs
		children[rep.Child] = true
	}
	if len(reps) != procs || len(children) != procs {
		t.Fatalf("%d reports from %d children, want %d", len(reps), len(children), procs)
	}
	if got := redisGet(t, r, "counter"); got != procs*goroutines*each || sum != got {
		t.Fatalf("counter %d, reported %d, want %d", got, sum, procs*goroutines*each)
	}
	for _, rr := range res {
		if !gone(rr.Pid) {
			t.Errorf("child %d (pid %d) still exists after Wait", rr.Child, rr.Pid)
		}
	}
}

// TestKillMidRun: one child is SIGKILLed while it INCRs; the others run on
// until Stop, report and exit cleanly; no process is left.
func TestKillMidRun(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	const victim = 2
	g := proctest.Start(t, "loop", 4, incrArgs{Addr: r.Addr, Key: "c", Goroutines: 4}, proctest.Options{})
	if err := g.Go(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	last, err := g.WaitReport(ctx, func(rep proctest.Report) bool { return rep.Child == victim })
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Kill(victim); err != nil {
		t.Fatal(err)
	}
	if !gone(g.Pid(victim)) {
		t.Fatal("killed child still exists")
	}
	if err := g.Kill(victim); !errors.Is(err, proctest.ErrNotRunning) {
		t.Fatalf("second Kill = %v, want ErrNotRunning", err)
	}
	// The survivors keep working after the kill.
	for i := 0; i < 4; i++ {
		if i == victim {
			continue
		}
		if _, err := g.WaitReport(ctx, func(rep proctest.Report) bool {
			var v incrReport
			return rep.Child == i && rep.Decode(&v) == nil && v.Incrs >= 200
		}); err != nil {
			t.Fatal(err)
		}
	}
	g.Stop()
	res := g.WaitOK(t)
	var lastVictim incrReport
	if err := last.Decode(&lastVictim); err != nil {
		t.Fatal(err)
	}
	sum := lastVictim.Incrs
	for _, rr := range res {
		if rr.Child == victim {
			if !rr.Killed || rr.Done || rr.ExitCode != -1 {
				t.Fatalf("victim: %s", rr)
			}
			continue
		}
		final := rr.Reports[len(rr.Reports)-1]
		var v incrReport
		if err := final.Decode(&v); err != nil || !v.Final {
			t.Fatalf("child %d's last report %s, %v", rr.Child, final.Data, err)
		}
		sum += v.Incrs
	}
	if got := redisGet(t, r, "c"); got < sum {
		t.Fatalf("counter %d below the %d INCRs reported", got, sum)
	}
}

// TestTimeoutKillsStragglers: a worker that ignores its context is killed
// at the group's Timeout and marked so.
func TestTimeoutKillsStragglers(t *testing.T) {
	g := proctest.Start(t, "hang", 2, nil, proctest.Options{Timeout: 3 * time.Second})
	if err := g.Go(); err != nil {
		t.Fatal(err)
	}
	g.Stop() // ignored by the worker
	for _, rr := range g.Wait() {
		if !rr.TimedOut || rr.Done || rr.Killed || !gone(rr.Pid) {
			t.Fatalf("%s", rr)
		}
		if len(rr.Reports) != 1 {
			t.Fatalf("child %d: %d reports, want 1", rr.Child, len(rr.Reports))
		}
	}
}

// TestCleanupKills: children a test leaves running are killed when it
// ends.
func TestCleanupKills(t *testing.T) {
	var pids []int
	t.Run("leaves children running", func(t *testing.T) {
		g := proctest.Start(t, "hang", 3, nil, proctest.Options{})
		if err := g.Go(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < g.N(); i++ {
			pids = append(pids, g.Pid(i))
		}
	})
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("pid %d outlived its test", pid)
		}
	}
}

func TestFailures(t *testing.T) {
	g := proctest.Start(t, "fail", 2, nil, proctest.Options{})
	for _, rr := range g.Wait() {
		if rr.OK() || !rr.Done || rr.ExitCode != 1 || !strings.Contains(rr.Err, "failed on purpose") ||
			!strings.Contains(rr.Stderr, "stray print") {
			t.Fatalf("%s", rr)
		}
	}
	g = proctest.Start(t, "panic", 1, nil, proctest.Options{})
	if rr := g.Wait()[0]; rr.Done || rr.ExitCode != 2 || !strings.Contains(rr.Stderr, "panicked on purpose") {
		t.Fatalf("%s", rr)
	}
	// A worker that never calls Ready makes Go fail, naming the child.
	g = proctest.Start(t, "missing", 1, nil, proctest.Options{})
	if err := g.Go(); err == nil || !strings.Contains(err.Error(), `no worker "missing"`) {
		t.Fatalf("Go with an unknown worker: %v", err)
	}
}

func TestArgs(t *testing.T) {
	g := proctest.Start(t, "echo", 3, "shared", proctest.Options{})
	res := g.WaitOK(t)
	got, err := proctest.Decode[string](res)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "shared/0/3 shared/1/3 shared/2/3" {
		t.Fatalf("reports %q", got)
	}
	g = proctest.Start(t, "echo", 2, nil, proctest.Options{ArgsFor: func(i int) any { return strings.Repeat("x", 100<<10) + strconv.Itoa(i) }})
	got, err = proctest.Decode[string](g.WaitOK(t))
	if err != nil || len(got) != 2 || !strings.HasSuffix(got[1], "x1/1/2") || len(got[0]) != 100<<10+5 {
		t.Fatalf("large per-child args: %d reports, %v", len(got), err)
	}
}
