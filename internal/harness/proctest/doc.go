// Package proctest races real processes against real servers: a test
// binary re-executes itself as N child processes (the os/exec
// TestHelperProcess pattern), each running a named worker function, all
// released at the same moment, each reporting results to the test as JSON.
//
// Goroutines in one process share a client, a connection pool and a
// singleflight; separate processes share only the server. Tests that
// claim "one loader call per key across processes" or "no stale value
// after an invalidation" need the latter.
//
// # How it works
//
// The package's TestMain hands proctest.Main every worker it may run. The
// test calls Start, which launches the test binary n times with an
// environment variable naming the worker; in those children Main runs the
// worker instead of the tests and exits. A child:
//
//   - reads its JSON arguments (the first line of its stdin; any size),
//   - sets up (connects), then calls Child.Ready, which prints "ready" and
//     waits for "go" on stdin: Group.Go waits until every child is ready
//     and releases them all back to back (the start barrier),
//   - reports with Child.Report: JSON lines on its real stdout (anything
//     else the child prints goes to stderr, whose tail the parent keeps),
//   - watches its ctx, which ends at the group's deadline or when the
//     parent calls Group.Stop (stdin closed), or dies.
//
// The parent can Kill(i) a child with SIGKILL mid-run, WaitReport for a
// particular report (to kill a child at a known point), and Wait for every
// Result. Run time is bounded (Options.Timeout, default 2 minutes or the
// test's own deadline): stragglers are killed and marked TimedOut. When the
// test ends, Cleanup kills and reaps every child still running; children
// also get SIGKILL if the test process dies (Linux Pdeathsig). Under -race
// the children are race-checked too (a race makes a child exit 66) and
// skip the race runtime's 1s sleep at exit.
//
// # Example
//
//	func TestMain(m *testing.M) {
//		os.Exit(proctest.Main(m, proctest.Workers{"incr": incr}))
//	}
//
//	type incrArgs struct{ Addr string; N int }
//
//	func incr(ctx context.Context, c *proctest.Child) error {
//		var a incrArgs
//		if err := c.Args(&a); err != nil {
//			return err
//		}
//		conn := dial(a.Addr) // set up before the barrier
//		if err := c.Ready(ctx); err != nil {
//			return err
//		}
//		done := 0
//		for ; done < a.N && ctx.Err() == nil; done++ {
//			conn.Incr("counter")
//		}
//		return c.Report(map[string]int{"incrs": done})
//	}
//
//	func TestIncr(t *testing.T) {
//		r := servertest.Redis(t, servers.RedisConfig{})
//		g := proctest.Start(t, "incr", 4, incrArgs{r.Addr, 1000}, proctest.Options{})
//		if err := g.Go(); err != nil { // all 4 start at once
//			t.Fatal(err)
//		}
//		// g.Kill(2) here would crash one child mid-run.
//		res := g.WaitOK(t) // fails the test if a child failed
//		reps, _ := proctest.Decode[map[string]int](res)
//		// sum reps[i]["incrs"] and compare with GET counter
//	}
//
// Keep default sizes small so `go test` stays fast; full-size runs go
// behind KURA_SOAK=1.
package proctest
