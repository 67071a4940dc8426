package proctest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Environment variables that make a test binary a child.
const (
	envWorker   = "KURA_PROCTEST_WORKER"
	envChild    = "KURA_PROCTEST_CHILD"
	envN        = "KURA_PROCTEST_N"
	envDeadline = "KURA_PROCTEST_DEADLINE"
)

// Worker is the body of a child process. ctx ends at the group's deadline
// or when the parent calls Group.Stop (or dies); a worker that loops
// until told to stop watches it. The returned error reaches the parent as
// Result.Err.
type Worker func(ctx context.Context, c *Child) error

// Workers names the workers a test binary can run as children.
type Workers map[string]Worker

// IsChild reports whether this process is a child started by Start. A
// TestMain that starts shared servers does so only when !IsChild().
func IsChild() bool { return os.Getenv(envWorker) != "" }

// Main is called from TestMain with every worker of the package:
//
//	func TestMain(m *testing.M) { os.Exit(proctest.Main(m, workers)) }
//
// In the test process it runs the tests and returns m.Run's exit code. In
// a child it runs the worker named by the parent and exits the process
// (code 0 when the worker returned nil, 1 when it returned an error, 2 on
// a bad start); it never returns there.
func Main(m *testing.M, workers Workers) int {
	if !IsChild() {
		return m.Run()
	}
	os.Exit(runChild(workers))
	return 0
}

// Child is a worker's handle on the harness: its identity, its arguments,
// the barrier and the report channel to the parent.
type Child struct {
	// Index is this child's number, 0 to N-1.
	Index int
	// N is the number of children in the group.
	N int

	args  json.RawMessage
	mu    sync.Mutex // serialises writes to out
	out   *json.Encoder
	goCh  <-chan struct{}
	ready bool
}

// message is one line a child writes to the parent.
type message struct {
	// T is the kind: "ready", "report" or "done".
	T   string          `json:"t"`
	V   json.RawMessage `json:"v,omitempty"`
	Err string          `json:"err,omitempty"`
}

// Args decodes the JSON arguments the parent passed to Start into v.
func (c *Child) Args(v any) error {
	if len(c.args) == 0 {
		return errors.New("proctest: no arguments")
	}
	return json.Unmarshal(c.args, v)
}

// Report sends v (encoded as JSON) to the parent, where it appears in
// Result.Reports and to Group.WaitReport. It is safe for concurrent use.
func (c *Child) Report(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.send(message{T: "report", V: b})
}

// Ready is the start barrier: it tells the parent this child has finished
// its set-up and waits until the parent's Group.Go releases every child at
// once. Call it once, after connecting and before the measured work. It
// returns ctx's error if the group ends first.
func (c *Child) Ready(ctx context.Context) error {
	if c.ready {
		return errors.New("proctest: Ready called twice")
	}
	c.ready = true
	if err := c.send(message{T: "ready"}); err != nil {
		return err
	}
	select {
	case <-c.goCh:
		return nil
	case <-ctx.Done():
		select {
		case <-c.goCh: // released, then stopped at once: start anyway
			return nil
		default:
			return ctx.Err()
		}
	}
}

func (c *Child) send(m message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Encode(m)
}

// runChild runs the worker named in the environment and returns the exit
// code.
func runChild(workers Workers) int {
	// The protocol owns the real stdout; stray prints go to stderr, which
	// the parent keeps for error messages.
	out := os.Stdout
	os.Stdout = os.Stderr
	name := os.Getenv(envWorker)
	w, ok := workers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "proctest: no worker %q in this test binary\n", name)
		return 2
	}
	index, err1 := strconv.Atoi(os.Getenv(envChild))
	n, err2 := strconv.Atoi(os.Getenv(envN))
	deadline, err3 := time.Parse(time.RFC3339Nano, os.Getenv(envDeadline))
	if err := errors.Join(err1, err2, err3); err != nil {
		fmt.Fprintf(os.Stderr, "proctest: bad environment: %v\n", err)
		return 2
	}
	// stdin: the arguments line, then "go" (the barrier), then EOF when
	// the parent stops the group or dies.
	in := bufio.NewReader(os.Stdin)
	args, err := in.ReadBytes('\n')
	if err != nil {
		fmt.Fprintf(os.Stderr, "proctest: reading arguments: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	goCh := make(chan struct{})
	go func() {
		released := false
		for {
			line, err := in.ReadString('\n')
			if line == "go\n" && !released {
				released = true
				close(goCh)
				continue
			}
			if err != nil { // io.EOF: stop
				cancel()
				return
			}
		}
	}()
	c := &Child{Index: index, N: n, args: json.RawMessage(args), out: json.NewEncoder(out), goCh: goCh}
	werr := w(ctx, c)
	msg := message{T: "done"}
	if werr != nil {
		msg.Err = werr.Error()
		if msg.Err == "" {
			msg.Err = "error with an empty message"
		}
	}
	if err := c.send(msg); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		fmt.Fprintf(os.Stderr, "proctest: reporting the end: %v\n", err)
	}
	if werr != nil {
		return 1
	}
	return 0
}
