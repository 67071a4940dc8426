package proctest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrNotRunning reports a Kill of a child that already ended.
var ErrNotRunning = errors.New("kura: proctest: child not running")

// Options configures a Group. The zero value works.
type Options struct {
	// Timeout bounds the whole run from Start: children still running then
	// are killed with SIGKILL (Result.TimedOut), and Go and WaitReport stop
	// waiting. 0 means 2 minutes, or less when the test's own deadline
	// (go test -timeout) comes sooner (it then ends 5s before it).
	Timeout time.Duration
	// ArgsFor, when set, gives child i its own arguments ArgsFor(i) instead
	// of the args passed to Start.
	ArgsFor func(i int) any
	// Env adds "KEY=value" variables to the children's environment (which
	// is otherwise the test process's own).
	Env []string
	// Executable, when set, is the test binary the children run instead
	// of this one: another build of the same package (an older commit's,
	// to measure a change against it in the same run). It must have the
	// worker.
	Executable string
}

// Report is one value a child sent with Child.Report.
type Report struct {
	// Child is the sender's index.
	Child int
	// Data is the value as JSON.
	Data json.RawMessage
}

// Decode decodes the report's value into v.
func (r Report) Decode(v any) error { return json.Unmarshal(r.Data, v) }

// Result is what one child did.
type Result struct {
	// Child is the child's index.
	Child int
	// Pid is its process id.
	Pid int
	// Reports are its reports, in order.
	Reports []Report
	// Done is true when the worker returned (killed children never do).
	Done bool
	// Err is the error the worker returned ("" for nil), or why the child
	// could not run.
	Err string
	// Killed is true when Kill ended it; TimedOut when the group's Timeout
	// did.
	Killed, TimedOut bool
	// ExitCode is the exit status, -1 when a signal ended the process.
	// Under the race detector a child that saw a data race exits with 66.
	ExitCode int
	// Stderr is the tail (the last 16 KiB) of the child's standard error,
	// where stray prints, panics and race reports go.
	Stderr string
}

// OK reports whether the child ran to completion: the worker returned nil
// and the process exited with status 0.
func (r Result) OK() bool { return r.Done && r.Err == "" && r.ExitCode == 0 }

// String describes the result for a test failure message.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "child %d (pid %d): done=%v exit=%d", r.Child, r.Pid, r.Done, r.ExitCode)
	if r.Killed {
		b.WriteString(" killed")
	}
	if r.TimedOut {
		b.WriteString(" timed out")
	}
	if r.Err != "" {
		fmt.Fprintf(&b, " err=%q", r.Err)
	}
	if s := strings.TrimSpace(r.Stderr); s != "" {
		fmt.Fprintf(&b, "\nstderr:\n%s", s)
	}
	return b.String()
}

// Decode decodes every report of results into a T, in child order.
func Decode[T any](results []Result) ([]T, error) {
	var out []T
	for _, r := range results {
		for _, rep := range r.Reports {
			var v T
			if err := rep.Decode(&v); err != nil {
				return nil, fmt.Errorf("child %d: %w", r.Child, err)
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// Group is a set of child processes running one worker, started together
// by Start. Its methods are safe for concurrent use.
type Group struct {
	tb       testing.TB
	worker   string
	ctx      context.Context
	cancel   context.CancelFunc
	children []*child

	mu      sync.Mutex
	cond    *sync.Cond // signalled on every message and exit
	reports []Report   // every report, in arrival order
}

// child is the parent's view of one child process.
type child struct {
	g     *Group
	index int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when the process has been reaped
	stop  sync.Once

	// guarded by g.mu
	res     Result
	ready   bool
	partial []byte // stdout bytes after the last newline
	stderr  tail
}

// Start starts n copies of the test binary, each running the worker
// registered under name in the package's TestMain (see Main), and returns
// at once: the children set up, call Child.Ready and wait there until Go.
// args is encoded as JSON and given to every child (see Options.ArgsFor).
// When the test ends every child still running is killed and reaped, so
// no process outlives the test.
func Start(tb testing.TB, name string, n int, args any, opts Options) *Group {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("proctest: %d children", n)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
		if d, ok := testDeadline(tb); ok {
			timeout = min(timeout, time.Until(d)-5*time.Second)
		}
	}
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	exe, err := os.Executable()
	if opts.Executable != "" {
		exe, err = opts.Executable, nil
	}
	if err != nil {
		cancel()
		tb.Fatalf("proctest: %v", err)
	}
	g := &Group{tb: tb, worker: name, ctx: ctx, cancel: cancel}
	g.cond = sync.NewCond(&g.mu)
	tb.Cleanup(g.cleanup)
	for i := 0; i < n; i++ {
		a := args
		if opts.ArgsFor != nil {
			a = opts.ArgsFor(i)
		}
		line, err := json.Marshal(a)
		if err != nil {
			tb.Fatalf("proctest: arguments of child %d: %v", i, err)
		}
		c := &child{g: g, index: i, done: make(chan struct{})}
		c.res.Child = i
		// -test.run=^$: a binary whose TestMain lacks proctest.Main runs no
		// test and exits, instead of running the tests again recursively.
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(append(os.Environ(), raceEnv()...), opts.Env...)
		cmd.Env = append(cmd.Env,
			envWorker+"="+name, envChild+"="+strconv.Itoa(i), envN+"="+strconv.Itoa(n),
			envDeadline+"="+deadline.Format(time.RFC3339Nano))
		cmd.Stdout = stdoutWriter{c}
		cmd.Stderr = stderrWriter{c}
		// Linux kills the child if the test process dies.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.WaitDelay = time.Second
		stdin, err := cmd.StdinPipe()
		if err != nil {
			tb.Fatalf("proctest: %v", err)
		}
		c.cmd, c.stdin = cmd, stdin
		if err := cmd.Start(); err != nil {
			tb.Fatalf("proctest: start child %d: %v", i, err)
		}
		c.res.Pid = cmd.Process.Pid
		g.children = append(g.children, c)
		go func() { // the pipe buffer may be smaller than the arguments
			_, _ = stdin.Write(append(line, '\n'))
		}()
		go c.wait()
	}
	go func() { // the time bound
		<-ctx.Done()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			for _, c := range g.children {
				c.kill(false)
			}
		}
	}()
	return g
}

// raceEnv makes a child built with -race exit at once: by default the
// race runtime sleeps 1s at exit (atexit_sleep_ms), which would add a
// second to every group. A GORACE that sets it already is kept.
func raceEnv() []string {
	v := os.Getenv("GORACE")
	if strings.Contains(v, "atexit_sleep_ms") {
		return nil
	}
	return []string{"GORACE=" + strings.TrimSpace(v+" atexit_sleep_ms=0")}
}

// testDeadline returns the test's deadline (from go test -timeout).
func testDeadline(tb testing.TB) (time.Time, bool) {
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}

// N returns the number of children.
func (g *Group) N() int { return len(g.children) }

// Pid returns child i's process id.
func (g *Group) Pid(i int) int { return g.children[i].cmd.Process.Pid }

// Go is the start barrier: it waits until every child still running has
// called Child.Ready, then releases them all at once (one write to each
// child's stdin, back to back). It fails when a child ends before it is
// ready (with that child's stderr), or when the group's Timeout passes.
func (g *Group) Go() error {
	g.mu.Lock()
	for {
		var waiting []int
		for _, c := range g.children {
			if c.ready || c.res.Killed {
				continue
			}
			if c.exited() {
				res := c.result()
				g.mu.Unlock()
				return fmt.Errorf("proctest: %s ended before it was ready (is proctest.Main called from TestMain?): %s", g.worker, res)
			}
			waiting = append(waiting, c.index)
		}
		if len(waiting) == 0 {
			break
		}
		if err := g.ctx.Err(); err != nil {
			g.mu.Unlock()
			return fmt.Errorf("proctest: children %v not ready: %w", waiting, err)
		}
		g.cond.Wait()
	}
	g.mu.Unlock()
	for _, c := range g.children {
		_, _ = io.WriteString(c.stdin, "go\n") // a dead child's pipe fails; Wait tells
	}
	return nil
}

// WaitReport waits until some child has sent a report for which match
// returns true (reports already received count) and returns it. It fails
// when ctx ends, the group's Timeout passes, or every child has ended
// without such a report.
func (g *Group) WaitReport(ctx context.Context, match func(Report) bool) (Report, error) {
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := 0
	for {
		for ; seen < len(g.reports); seen++ {
			if match(g.reports[seen]) {
				return g.reports[seen], nil
			}
		}
		if err := errors.Join(ctx.Err(), g.ctx.Err()); err != nil {
			return Report{}, fmt.Errorf("proctest: no matching report: %w", err)
		}
		alive := false
		for _, c := range g.children {
			alive = alive || !c.exited()
		}
		if !alive {
			return Report{}, errors.New("proctest: no matching report: every child has ended")
		}
		g.cond.Wait()
	}
}

// Kill ends child i at once with SIGKILL, as a crash would (Result.Killed).
// It returns ErrNotRunning if the child had already ended.
func (g *Group) Kill(i int) error {
	if !g.children[i].kill(true) {
		return fmt.Errorf("%w: child %d", ErrNotRunning, i)
	}
	return nil
}

// Stop asks every child to finish: it closes their stdin, which ends each
// worker's ctx (a child still waiting in Ready gets ctx's error). Workers
// then report and return; Wait collects them.
func (g *Group) Stop() {
	for _, c := range g.children {
		c.stop.Do(func() { _ = c.stdin.Close() })
	}
}

// Wait waits until every child has ended (by itself, by Kill, or killed
// at the group's Timeout) and returns what each did, in index order.
func (g *Group) Wait() []Result {
	for _, c := range g.children {
		<-c.done
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Result, len(g.children))
	for i, c := range g.children {
		out[i] = c.result()
	}
	return out
}

// result returns a copy of the child's result; the caller holds g.mu.
func (c *child) result() Result {
	r := c.res
	r.Reports = append([]Report(nil), r.Reports...)
	r.Stderr = c.stderr.String()
	return r
}

// WaitOK is Wait that fails the test unless every child that was not
// killed with Kill ran to completion (Result.OK).
func (g *Group) WaitOK(tb testing.TB) []Result {
	tb.Helper()
	res := g.Wait()
	for _, r := range res {
		if !r.Killed && !r.OK() {
			tb.Errorf("proctest: %s: %s", g.worker, r)
		}
	}
	if tb.Failed() {
		tb.FailNow()
	}
	return res
}

// cleanup kills and reaps every child still running.
func (g *Group) cleanup() {
	for _, c := range g.children {
		c.kill(false)
	}
	for _, c := range g.children {
		<-c.done
	}
	g.cancel()
}

// kill sends SIGKILL if the child still runs; user marks Result.Killed,
// otherwise a kill at the deadline marks TimedOut. It reports whether the
// child was running.
func (c *child) kill(user bool) bool {
	c.g.mu.Lock()
	if c.exited() {
		c.g.mu.Unlock()
		return false
	}
	if user {
		c.res.Killed = true
	} else if c.g.ctx.Err() != nil && !c.res.Killed {
		c.res.TimedOut = true
	}
	c.g.mu.Unlock()
	_ = c.cmd.Process.Kill()
	<-c.done
	return true
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait reaps the process and records how it ended.
func (c *child) wait() {
	err := c.cmd.Wait()
	c.g.mu.Lock()
	c.res.ExitCode = c.cmd.ProcessState.ExitCode()
	if err != nil && c.res.ExitCode == 0 {
		c.res.Err = err.Error() // I/O copying failed
	}
	if len(c.partial) > 0 { // an unfinished last line
		c.stderr.Write(append([]byte("stdout: "), c.partial...))
	}
	close(c.done)
	c.g.cond.Broadcast()
	c.g.mu.Unlock()
	c.stop.Do(func() { _ = c.stdin.Close() })
}

// stdoutWriter parses the child's protocol lines.
type stdoutWriter struct{ c *child }

func (w stdoutWriter) Write(p []byte) (int, error) {
	c := w.c
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		line := c.partial[:i]
		var m message
		if err := json.Unmarshal(line, &m); err != nil || m.T == "" {
			c.stderr.Write(append(append([]byte("stdout: "), line...), '\n'))
		} else {
			switch m.T {
			case "ready":
				c.ready = true
			case "report":
				r := Report{Child: c.index, Data: append(json.RawMessage(nil), m.V...)}
				c.res.Reports = append(c.res.Reports, r)
				c.g.reports = append(c.g.reports, r)
			case "done":
				c.res.Done = true
				c.res.Err = m.Err
			}
		}
		c.partial = c.partial[i+1:]
	}
	c.partial = append([]byte(nil), c.partial...)
	c.g.cond.Broadcast()
	return len(p), nil
}

// stderrWriter keeps the tail of the child's stderr.
type stderrWriter struct{ c *child }

func (w stderrWriter) Write(p []byte) (int, error) {
	w.c.g.mu.Lock()
	defer w.c.g.mu.Unlock()
	w.c.stderr.Write(p)
	return len(p), nil
}

// tail keeps the last 16 KiB written to it.
type tail struct{ b []byte }

const tailMax = 16 << 10

func (t *tail) Write(p []byte) {
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = append([]byte(nil), t.b[len(t.b)-tailMax:]...)
	}
}

func (t *tail) String() string { return string(t.b) }
