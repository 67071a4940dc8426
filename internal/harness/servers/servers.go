// Package servers starts and stops private redis-server, memcached and
// PostgreSQL processes on free loopback ports.
//
// It is used by the tests (through internal/harness/servertest), by `kura demo` and
// by `kura bench sweep`, which all need a server of their own that nobody
// else talks to. Every process gets a fresh temporary directory and is
// killed by Stop; nothing is left behind.
package servers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNotInstalled reports that a server binary is not on this machine.
var ErrNotInstalled = errors.New("servers: binary not installed")

// extraPaths are searched after $PATH: Debian puts some server binaries
// outside the default PATH.
var extraPaths = []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/bin", "/usr/bin"}

// LookPath finds a server binary in $PATH, the sbin directories and, for
// PostgreSQL, /usr/lib/postgresql/*/bin. It returns an error matching
// ErrNotInstalled with an install hint when absent.
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs := append([]string{}, extraPaths...)
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(m) > 0 {
		// Newest version last in lexical order for single digits; prefer it.
		for i := len(m) - 1; i >= 0; i-- {
			dirs = append(dirs, m[i])
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	pkg := map[string]string{
		"redis-server": "redis-server", "redis-cli": "redis-tools",
		"memcached": "memcached", "postgres": "postgresql", "initdb": "postgresql",
	}[name]
	if pkg == "" {
		pkg = name
	}
	return "", fmt.Errorf("%w: %s (install it with: apt-get install -y %s)", ErrNotInstalled, name, pkg)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Proc is one running server process.
//
// Its methods are safe for concurrent use: a test may Kill or Restart a
// server while other goroutines talk to it.
type Proc struct {
	// Name is the binary name, for messages.
	Name string
	// Addr is host:port on loopback. It stays the same across Restart.
	Addr string
	// Dir is the private working directory, removed by Stop. It stays the
	// same across Restart, so a server that keeps state there (a cluster
	// node's nodes.conf) finds it again.
	Dir string

	bin     string
	args    []string
	cred    *syscall.Credential
	logPath string
	// probe answers nil once a (re)started process serves; nil means the
	// process cannot be restarted.
	probe func(context.Context) error
	// killOnStop makes Stop use SIGKILL at once, for servers with nothing
	// to save (memcached takes up to a second to honour SIGTERM).
	killOnStop bool

	mu       sync.Mutex // guards cmd, done, stopped, restarts
	cmd      *exec.Cmd
	done     chan struct{}
	stopped  bool
	restarts int
}

// ErrStopped reports a Restart of a server that Stop already removed.
var ErrStopped = errors.New("servers: process stopped")

// current returns the running command and its done channel.
func (p *Proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// Pid returns the process id (a new one after each Restart).
func (p *Proc) Pid() int {
	cmd, _ := p.current()
	return cmd.Process.Pid
}

// Port returns the TCP port.
func (p *Proc) Port() int {
	_, port, _ := net.SplitHostPort(p.Addr)
	n, _ := strconv.Atoi(port)
	return n
}

// Restarts returns how many times Restart started the process again.
func (p *Proc) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// signal sends sig to the current process.
func (p *Proc) signal(sig os.Signal) error {
	cmd, _ := p.current()
	return cmd.Process.Signal(sig)
}

// Pause stops the process with SIGSTOP; it keeps its sockets but answers
// nothing until Resume. The signal reaches a multi-threaded server's
// threads asynchronously, so Pause waits (up to a second) until every
// thread reports the stopped state: a test that pauses and then measures
// does not measure a few more answers.
func (p *Proc) Pause() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	pid := p.Pid()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if allThreadsStopped(pid) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("%s on %s: not every thread stopped within 1s of SIGSTOP", p.Name, p.Addr)
}

// allThreadsStopped reads /proc/PID/task/*/stat; where /proc is absent it
// answers true and Pause relies on the signal alone.
func allThreadsStopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return true
	}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // thread gone
		}
		// The state is the first field after the ")" closing the name.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false
		}
	}
	return true
}

// Resume continues a paused process with SIGCONT.
func (p *Proc) Resume() error { return p.signal(syscall.SIGCONT) }

// Kill ends the process at once with SIGKILL, as a crash would, and waits
// for it to exit. The directory is kept until Stop; Restart brings the
// server back on the same port.
func (p *Proc) Kill() {
	cmd, done := p.current()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
}

// Restart kills the process with SIGKILL if it still runs (as a crash
// would; a paused process is killed too), starts the same binary with the
// same arguments on the same port and in the same directory, and waits
// until it serves again (at most 20s, or until ctx ends). Memory is lost
// as in a real crash: a memcached or a redis-server without persistence
// comes back empty; a cluster node reloads its nodes.conf and rejoins.
//
// Clients see their connections reset, then connection refused until the
// new process listens. Restart after Stop returns ErrStopped. A
// PostgreSQL server cannot be restarted this way (its backends outlive a
// killed postmaster); Restart returns an error for it.
func (p *Proc) Restart(ctx context.Context) error {
	if p.probe == nil {
		return fmt.Errorf("servers: %s on %s cannot be restarted", p.Name, p.Addr)
	}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return fmt.Errorf("%w: %s on %s", ErrStopped, p.Name, p.Addr)
	}
	p.mu.Unlock()
	p.Kill()
	// The old process held the port; the new one binds it again at once
	// (both servers set SO_REUSEADDR). Another process could take the port
	// in between; retry briefly in case the bind loses a race with the
	// kernel releasing the old socket.
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return fmt.Errorf("%w: %s on %s", ErrStopped, p.Name, p.Addr)
		}
		err := p.launch()
		if err == nil {
			p.restarts++
		}
		p.mu.Unlock()
		if err != nil {
			return err
		}
		if last = p.waitReady(ctx, p.probe); last == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		p.Kill()
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("restart: %w", last)
}

// AppendArgs adds command-line arguments that every later Restart passes
// to the server after its original ones, so a setting made at run time
// (a redis-server's CONFIG SET, lost in a crash) survives the restart as a
// real configured server's config file would keep it. The running process
// is not affected.
func (p *Proc) AppendArgs(args ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.args = append(slices.Clip(p.args), args...)
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	_, done := p.current()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Stop kills the process if it still runs and removes its directory. It is
// safe to call more than once, and concurrently with Restart.
func (p *Proc) Stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	select {
	case <-done:
	default:
		_ = cmd.Process.Signal(syscall.SIGCONT)
		if p.killOnStop {
			_ = cmd.Process.Kill()
		} else {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(p.Dir)
}

// Log returns the tail of the process's output, for error messages.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// start runs bin with args in a new temp dir; args may contain the
// placeholder "{dir}", replaced by that dir.
func start(name, bin string, args []string, addr string) (*Proc, error) {
	dir, err := os.MkdirTemp("", "kura-"+name+"-")
	if err != nil {
		return nil, err
	}
	p, err := startIn(dir, name, bin, args, addr, nil)
	if err != nil {
		os.RemoveAll(dir)
	}
	return p, err
}

// startIn is start in an existing directory, optionally as another user
// (cred); the directory is removed by Stop.
func startIn(dir, name, bin string, args []string, addr string, cred *syscall.Credential) (*Proc, error) {
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "{dir}", dir)
	}
	p := &Proc{Name: name, Addr: addr, Dir: dir, bin: bin, args: args, cred: cred,
		logPath: filepath.Join(dir, "server.log")}
	if err := p.launch(); err != nil {
		return nil, err
	}
	return p, nil
}

// launch starts the process; the caller holds p.mu or owns p alone. The
// log is appended to, so a restarted server's log keeps the crash.
func (p *Proc) launch() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = p.Dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Own process group so a Ctrl-C of the parent is handled by the parent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// startReady starts the server and waits until probe succeeds; on failure
// the process is stopped and its directory removed. The probe is kept for
// Restart.
func startReady(ctx context.Context, name, bin string, args []string, addr string, probe func(context.Context, *Proc) error) (*Proc, error) {
	p, err := start(name, bin, args, addr)
	if err != nil {
		return nil, err
	}
	p.probe = func(ctx context.Context) error { return probe(ctx, p) }
	if err := p.waitReady(ctx, p.probe); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// waitReady polls until probe succeeds, the process exits, or ctx ends.
func (p *Proc) waitReady(ctx context.Context, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var last error
	for {
		if p.Exited() {
			return fmt.Errorf("%s on %s exited during start-up: %s", p.Name, p.Addr, p.Log())
		}
		if last = probe(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s on %s not ready: %v (log: %s)", p.Name, p.Addr, last, p.Log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// onPort runs fn on port, or with retryPort when port is 0.
func onPort(port int, fn func(port int) (*Proc, error)) (*Proc, error) {
	if port != 0 {
		return fn(port)
	}
	return retryPort(fn)
}

// retryPort runs fn with a fresh free port up to 5 times, for the small race
// between picking a port and the server binding it.
func retryPort(fn func(port int) (*Proc, error)) (*Proc, error) {
	var last error
	for i := 0; i < 5; i++ {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		p, err := fn(port)
		if err == nil {
			return p, nil
		}
		last = err
	}
	return nil, last
}

// roundTrip sends one line and reads one line back, on a fresh connection.
func roundTrip(ctx context.Context, addr, line string) (string, error) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(line + "\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	s, err := r.ReadString('\n')
	return strings.TrimRight(s, "\r\n"), err
}

// Threaded returns a function that starts a private server of kind
// ("redis" or "memcached") with the given number of threads (redis-server
// io-threads, memcached -t) on a free loopback port and returns its target
// URL and a stop function: the loadgen.SweepConfig.StartServer of an
// --io-threads sweep (`kura bench sweep`, `kura demo`).
func Threaded(kind string) func(ctx context.Context, threads int) (target string, stop func(), err error) {
	return func(ctx context.Context, threads int) (string, func(), error) {
		switch kind {
		case "memcached":
			m, err := StartMemcached(ctx, MemcachedConfig{Threads: threads, MemoryMB: 1024})
			if err != nil {
				return "", nil, err
			}
			return "memcached://" + m.Addr, m.Stop, nil
		case "redis":
			r, err := StartRedis(ctx, RedisConfig{IOThreads: threads})
			if err != nil {
				return "", nil, err
			}
			return r.URL(), r.Stop, nil
		}
		return "", nil, fmt.Errorf("servers: kind %q is not redis or memcached", kind)
	}
}
