// Package kafka starts private Kafka brokers and Debezium engines for tests, soak runs and the
// demo: a single KRaft node (broker and controller in one JVM) on free loopback ports, and
// Debezium's embedded engine writing a database's change events to it.
//
// Both are Java programs built from Maven artifacts by the pom in java/ (nothing is committed
// as a jar): the first use in a process runs `mvn -B -q compile` there, which copies the jars
// from Maven Central into java/target/lib, and reuses that output while it is newer than the pom
// and the Java sources. The JVMs run under `nice -n 10` with small heaps: this harness shares
// two cores with everything else on the machine.
//
// Every process gets a fresh temporary directory and is ended by Stop; nothing is left behind.
// Start times are measured and kept on the returned values, for the docs and the reports.
package kafka

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf16"

	"github.com/kuracache/kura/internal/harness/servers"
)

// ErrNotInstalled reports that java or mvn is not on this machine.
var ErrNotInstalled = errors.New("kafka harness: not installed")

// Heap is the -Xmx each JVM of the harness gets unless a config says otherwise.
const Heap = "384m"

// JavaDir returns the directory of the harness's Maven project: $KURA_KAFKA_JAVA_DIR when set,
// else java/ beside this source file.
func JavaDir() string {
	if d := os.Getenv("KURA_KAFKA_JAVA_DIR"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "java")
}

// Build is the result of compiling the Java side.
type Build struct {
	// Classpath is the java -cp value: the compiled classes and every jar in target/lib.
	Classpath string
	// Took is how long mvn ran in this process (0 when the output was fresh and mvn did not run).
	Took time.Duration
	// Fresh reports that target/ was newer than the pom and the sources, so mvn did not run.
	Fresh bool
}

var (
	buildMu   sync.Mutex
	buildDone *Build
)

// Compile builds the Java side once per process (see the package doc) and returns its
// classpath. Concurrent test binaries serialise on a lock file in java/target.
func Compile(ctx context.Context) (*Build, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDone != nil {
		return buildDone, nil
	}
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("%w: java (install it with: apt-get install -y openjdk-17-jdk-headless)", ErrNotInstalled)
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return nil, fmt.Errorf("%w: mvn (install it with: apt-get install -y maven)", ErrNotInstalled)
	}
	dir := JavaDir()
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(target, 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(target, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("kafka harness: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	b := &Build{Classpath: filepath.Join(target, "classes") + string(os.PathListSeparator) + filepath.Join(target, "lib", "*")}
	stamp := filepath.Join(target, ".build.stamp")
	if fresh(stamp, dir) {
		b.Fresh = true
		buildDone = b
		return b, nil
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "compile")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("kafka harness: mvn compile in %s: %v: %s", dir, err, tail(string(out), 15))
	}
	b.Took = time.Since(start)
	if err := os.WriteFile(stamp, []byte(time.Now().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return nil, err
	}
	buildDone = b
	return b, nil
}

// fresh reports whether stamp exists and is newer than the pom and every file under src/.
func fresh(stamp, dir string) bool {
	st, err := os.Stat(stamp)
	if err != nil {
		return false
	}
	if _, err := os.Stat(filepath.Join(dir, "target", "lib")); err != nil {
		return false
	}
	newer := false
	check := func(info os.FileInfo) {
		if info.ModTime().After(st.ModTime()) {
			newer = true
		}
	}
	if info, err := os.Stat(filepath.Join(dir, "pom.xml")); err == nil {
		check(info)
	} else {
		return false
	}
	_ = filepath.Walk(filepath.Join(dir, "src"), func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			check(info)
		}
		return nil
	})
	return !newer
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) { return servers.FreePort() }

// jvm is one running process of the harness: a JVM, or (bin set) another server.
type jvm struct {
	name    string
	dir     string
	bin     string   // "" means java
	args    []string // after the binary
	logPath string

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	lines chan string // "kura-harness: ..." lines from stdout
}

// launch starts the JVM; stdout lines that start with "kura-harness: " go to j.lines, everything
// goes to the log file.
func (j *jvm) launch() error {
	logf, err := os.OpenFile(j.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	bin, args := "java", j.args
	if j.bin != "" {
		bin = j.bin
	}
	if nice, err := exec.LookPath("nice"); err == nil {
		bin, args = nice, append([]string{"-n", "10", bin}, j.args...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = j.dir
	cmd.Stderr = logf
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("kafka harness: start %s: %w", j.name, err)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if rest, ok := strings.CutPrefix(line, "kura-harness: "); ok {
				select {
				case lines <- rest:
				default: // nobody listens; the log keeps it
				}
			}
		}
		close(lines)
	}()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		pw.Close()
		logf.Close()
		close(done)
	}()
	j.mu.Lock()
	j.cmd, j.done, j.lines = cmd, done, lines
	j.mu.Unlock()
	return nil
}

func (j *jvm) current() (*exec.Cmd, chan struct{}, chan string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cmd, j.done, j.lines
}

// exited reports whether the process has ended.
func (j *jvm) exited() bool {
	_, done, _ := j.current()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// kill ends the process group at once with SIGKILL, as a crash would, and waits for it.
func (j *jvm) kill() {
	cmd, done, _ := j.current()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// stop asks the JVM to end (SIGTERM, so the engine flushes its offsets) and kills it after grace.
func (j *jvm) stop(grace time.Duration) {
	cmd, done, _ := j.current()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Log returns the tail of the JVM's output, for error messages.
func (j *jvm) Log() string {
	b, _ := os.ReadFile(j.logPath)
	return tail(string(b), 25)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// jvmArgs returns the JVM's flags. Its name lookups go to a hosts file in dir that
// knows localhost alone (jdk.net.hosts.file), never to the system resolver: log4j2 looks
// up the machine's own name at start (its hostName property), and whatever else in
// Kafka or Debezium asks for a name other than localhost gets UnknownHostException
// instead of a lookup.
func jvmArgs(heap, dir string) ([]string, error) {
	if heap == "" {
		heap = Heap
	}
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		return nil, err
	}
	return []string{"-Xmx" + heap, "-Xms32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.net.preferIPv4Stack=true", "-Djdk.net.hosts.file=" + hosts}, nil
}

// writeProps writes a Java properties file; values are escaped as Properties.load reads them.
func writeProps(path string, props map[string]string, order []string) error {
	var b strings.Builder
	seen := map[string]bool{}
	emit := func(k string) {
		if seen[k] {
			return
		}
		seen[k] = true
		b.WriteString(propEscape(k, true))
		b.WriteByte('=')
		b.WriteString(propEscape(props[k], false))
		b.WriteByte('\n')
	}
	for _, k := range order {
		if _, ok := props[k]; ok {
			emit(k)
		}
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		emit(k)
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func propEscape(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' && (key || i == 0):
			b.WriteString(`\ `)
		case r == '=' || r == ':' || r == '#' || r == '!':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			if r1, r2 := utf16.EncodeRune(r); r1 != unicode.ReplacementChar {
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }
