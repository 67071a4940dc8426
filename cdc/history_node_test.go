package cdc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura"
	"github.com/kuracache/kura/cdc/internal/cdctest"
)

// jsDir is the Node package (js/), whose build (js/dist) the Node readers
// import.
var jsDir = filepath.Join("..", "js")

// nodeReadersReady skips (or, with KURA_CDC_NODE=1, as make test-node runs
// these tests, fails) when node or the Node package's build is missing:
// make test runs the Go tests before it builds js/dist.
func nodeReadersReady(t *testing.T) {
	t.Helper()
	why := ""
	if _, err := exec.LookPath("node"); err != nil {
		why = "node not installed"
	} else if _, err := os.Stat(filepath.Join(jsDir, "dist", "index.js")); err != nil {
		why = "js/dist not built (make test-node builds it and runs these tests)"
	}
	if why == "" {
		return
	}
	if os.Getenv("KURA_CDC_NODE") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// nodeClockMargin is how far a Node reader's start may be off this
// process's clock (js/test/fixtures/clock.mjs: a few microseconds on an
// idle core; the cross-language lease history allows 2 ms).
const nodeClockMargin = 2 * time.Millisecond

// startNodeReaders starts one Node reader process per backend (2 loops
// each) over the keys the Go views spell for ids 1..keys, serves their
// loader (load(i): the row of id i+1) on a loopback endpoint, and returns
// once every process reads. The returned func stops them and returns their
// reads.
func startNodeReaders(t *testing.T, views map[string]*kura.Keyed[int64, int64], caches *cdctest.Caches, keys int, load func(context.Context, int) (int64, error)) func() []read {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(r.URL.Query().Get("i"))
		if err != nil || i < 0 || i >= keys {
			http.Error(w, "bad i", http.StatusBadRequest)
			return
		}
		v, err := load(r.Context(), i)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, v)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	loadURL := "http://" + ln.Addr().String() + "/load"

	type proc struct {
		backend string
		cmd     *exec.Cmd
		stdin   io.WriteCloser
		out     *bufio.Reader
	}
	var procs []proc
	for _, b := range []struct{ backend, addr string }{
		{"redis", caches.Redis.Addr},
		{"memcached", "memcache://" + caches.Memcached.Addr},
	} {
		names := make([]string, keys)
		for i := range names {
			names[i] = views[b.backend].Key(int64(i + 1))
		}
		js, _ := json.Marshal(names)
		cmd := exec.Command("node", filepath.Join(jsDir, "test", "fixtures", "cdc-reader.mjs"), b.addr, loadURL, string(js), "2")
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		procs = append(procs, proc{b.backend, cmd, stdin, bufio.NewReaderSize(stdout, 1<<20)})
	}
	for _, p := range procs {
		line, err := p.out.ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("node reader on %s: %q, %v", p.backend, line, err)
		}
	}
	return func() []read {
		for _, p := range procs {
			p.stdin.Close()
		}
		var reads []read
		for _, p := range procs {
			var got [][4]int64
			if err := json.NewDecoder(p.out).Decode(&got); err != nil {
				t.Fatalf("node reader on %s: %v", p.backend, err)
			}
			if err := p.cmd.Wait(); err != nil {
				t.Fatalf("node reader on %s: %v", p.backend, err)
			}
			if len(got) < 50 {
				t.Fatalf("node reader on %s read only %d times", p.backend, len(got))
			}
			for _, g := range got {
				reads = append(reads, read{key: g[0] + 1, backend: "node " + p.backend,
					start: time.UnixMicro(g[1]), end: time.UnixMicro(g[2]), value: g[3], clock: nodeClockMargin})
			}
		}
		return reads
	}
}

// TestPerReadGuaranteeNodeReaders is TestPerReadGuaranteeWithWritersThatNeverCallKura
// with Node readers (kura's Node package, leases on, Redis and memcached):
// plain-SQL writers, cdc invalidating, the same checker.
func TestPerReadGuaranteeNodeReaders(t *testing.T) {
	guaranteeHolds(t, 3*time.Second, 0, true, 200)
}

// TestHistoryCheckerCatchesInjectedFaultsNodeReaders: with Node readers
// too, a dropped invalidation and a position confirmed before its
// invalidation landed show as violations.
func TestHistoryCheckerCatchesInjectedFaultsNodeReaders(t *testing.T) { checkerCatchesFaults(t, true) }
