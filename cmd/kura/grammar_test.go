package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// kuraLine runs the CLI in-process like kura does and returns the one
// line main prints for its error ("" when it succeeds).
func kuraLine(t *testing.T, args ...string) string {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return ""
	}
	return errorLine(cmd, err)
}

// checkGolden compares got with testdata/golden/name (rewritten with
// -update).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s changed; review and run with -update:\n%s", path, got)
	}
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// plainTextServer is a loopback server that answers every connection
// with a plain-text error line, as a Redis without TLS answers a TLS
// hello, at once.
func plainTextServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("-ERR Protocol error: not TLS\r\n"))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestConnectErrorsGolden holds the one message every command gives for a
// server that does not answer, a password it refuses, a scheme kura does
// not speak and mem://, which names nothing a tool can read: the same
// words after "kura COMMAND:" in bench, inspect, scan, codecs and ui.
func TestConnectErrorsGolden(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{Password: "s3cret"})
	dead := closedAddr(t)
	plain := plainTextServer(t)
	cases := []struct{ name, url string }{
		{"TLS to a plain server", "rediss://:s3cret@" + plain},
		{"unreachable", "redis://" + dead},
		{"wrong password", "redis://wrong@" + srv.Addr},
		{"no password", "redis://" + srv.Addr},
		{"unreachable memcached", "memcached://" + dead},
		{"bad scheme", "ftp://" + srv.Addr},
		{"mem", "mem://"},
		{"bare address", srv.Addr},
	}
	commands := map[string]func(url string) []string{
		"bench":   func(u string) []string { return []string{"bench", u, "-n", "5", "-c", "1", "-q", "--no-save"} },
		"inspect": func(u string) []string { return []string{"inspect", u, "k"} },
		"scan":    func(u string) []string { return []string{"scan", u, "-q", "--no-save"} },
		"codecs":  func(u string) []string { return []string{"codecs", "--url", u, "-q"} },
		"ui":      func(u string) []string { return []string{"ui", u, "--listen", "127.0.0.1:0"} },
	}
	var golden strings.Builder
	for _, c := range cases {
		var first string
		for _, name := range []string{"bench", "inspect", "scan", "codecs", "ui"} {
			line := kuraLine(t, commands[name](c.url)...)
			msg, ok := strings.CutPrefix(line, "kura "+name+": ")
			if !ok {
				t.Errorf("%s %s: %q does not start with %q", name, c.name, line, "kura "+name+": ")
				continue
			}
			if strings.Contains(msg, "kura:") || strings.Contains(line, "s3cret") || strings.Contains(line, "\n") {
				t.Errorf("%s %s: %q repeats kura:, shows the password or spans lines", name, c.name, line)
			}
			// bench's own TCP shorthand: a bare host:port names the target
			// the same way, with the same hint.
			if c.name == "bare address" && name == "bench" {
				continue
			}
			if first == "" {
				first = msg
			} else if msg != first {
				t.Errorf("%s: %s says %q, others %q", c.name, name, msg, first)
			}
		}
		first = strings.ReplaceAll(first, dead, "$DEAD")
		first = strings.ReplaceAll(first, plain, "$PLAIN")
		first = strings.ReplaceAll(first, srv.Addr, "$SERVER")
		golden.WriteString(c.name + ": " + first + "\n")
	}
	checkGolden(t, "connect-errors.txt", golden.String())
}

// TestBadFlagGolden holds one bad input per kind of flag, and the
// arguments a command cannot run without: each is one line that says
// what to write instead.
func TestBadFlagGolden(t *testing.T) {
	var golden strings.Builder
	for _, args := range [][]string{
		{"bench", "-c", "abc"},                           // int
		{"bench", "--duration", "ten"},                   // duration
		{"bench", "--max-error-rate", "x"},               // float
		{"bench", "--json=maybe"},                        // bool
		{"bench", "--nope"},                              // unknown flag
		{"scan", "redis://127.0.0.1:1", "--big", "12XB"}, // size
		{"scan", "redis://127.0.0.1:1", "--bandwidth", "fast"},
		{"codecs", "--dict-sizes", "0", "x.json"}, // size list
		{"plan", "--data", "lots"},                // size
		{"plan", "--reserved-memory", "25"},       // fraction
		{"plan", "--growth", "x"},                 // float
		{"plan", "--data", "1GB", "--reads", "-1"},
		{"plan", "--data", "1GB", "--replicas", "1000"},
		{"plan", "--price", "cache.r7g.large"}, // NAME=VALUE
		{"demo", "--only", "nosuch"},           // list of names
		{"inspect"},
		{"inspect", "redis://127.0.0.1:1"},
		{"inspect", "--url", "redis://127.0.0.1:1", "redis://127.0.0.1:2", "k"},
		{"scan"},
		{"scan", "redis://127.0.0.1:1", "extra"},
		{"codecs"},
		{"codecs", "testdata/two-values.jsonl"}, // too few values
		{"benhc"},                               // a mistyped command
		{"nosuch"},
		{"bench", "sweeep", "--connections", "1"},
		{"bench", "--rate", "0"}, // a flag at 0
		{"codecs", "--samples", "0", "--url", "redis://127.0.0.1:1"},
		{"codecs", "--min-time", "-1s", "x.json"},
		{"scan", "redis://127.0.0.1:1", "--samples", "-2"},
		{"demo", "--only", ""},
		{"inspect", "redis://127.0.0.1:1", ""},
		{"inspect", "-u"},               // a shorthand without its value
		{"ui", "--listen"},              // a flag without its value
		{"inspect", "-Z"},               // an unknown shorthand
		{"bench", "sweep", "-c", "1,x"}, // a list
		{"bench", "--data-size", "5Q"},  // a size checked by the engine
	} {
		line := kuraLine(t, args...)
		if line == "" {
			t.Errorf("kura %s succeeded", strings.Join(args, " "))
			continue
		}
		if strings.Count(line, "kura: ") > 1+strings.Count(strings.Join(args, " "), "kura: ") {
			t.Errorf("kura %s: %q says kura: twice", strings.Join(args, " "), line)
		}
		golden.WriteString("kura " + strings.Join(args, " ") + "\n  " + line + "\n")
		// One style for a flag's problem: the flag first, as --name or
		// -x (--name), then the value given and what it wants. (plan's
		// and demo's flags are their issues' this round.)
		if _, rest, ok := strings.Cut(line, ": "); ok && (strings.Contains(line, "flag") || strings.HasPrefix(rest, "-")) && args[0] != "plan" && args[0] != "demo" && !flagStyle.MatchString(rest) {
			t.Errorf("kura %s: %q is not in the one style of flag errors", strings.Join(args, " "), line)
		}
	}
	checkGolden(t, "bad-input.txt", golden.String())
}

// flagStyle is the one style of a flag's error.
var flagStyle = regexp.MustCompile(`^(unknown flag -|(--[a-z-]+|-[a-zA-Z] \(--[a-z-]+\))( "[^"]*")?: )`)

// TestDeprecatedFlags: the old names still work, hidden from --help.
func TestDeprecatedFlags(t *testing.T) {
	line := kuraLine(t, "bench", "--uri", "ftp://x")
	if !strings.Contains(line, `unknown scheme "ftp"`) {
		t.Errorf("bench --uri: %q", line)
	}
	out, _, err := kura(t, "bench", "--help")
	if err != nil || strings.Contains(out, "--uri") {
		t.Errorf("bench --help shows --uri (%v)", err)
	}
}

// TestSizeGrammar: K and KB are 1,000 bytes and KiB 1,024 in every command.
func TestSizeGrammar(t *testing.T) {
	for in, want := range map[string]int64{"16K": 16000, "16KB": 16000, "16KiB": 16384, "1.5MB": 1500000, "64kib": 65536, "4096": 4096} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	sizes, err := parseSizes([]string{"16K", "16KiB"})
	if err != nil || sizes[0] != 16000 || sizes[1] != 16384 {
		t.Errorf("--dict-sizes 16K,16KiB = %v, %v", sizes, err)
	}
}

// TestInterruptedLine: Ctrl-C or SIGTERM ends a run with one line that
// says so, not "context canceled", which reads as a failure.
func TestInterruptedLine(t *testing.T) {
	bench, _, err := newRootCmd().Find([]string{"bench"})
	if err != nil {
		t.Fatal(err)
	}
	if got := errorLine(bench, fmt.Errorf("run: %w", context.Canceled)); got != "kura bench: interrupted" {
		t.Errorf("errorLine = %q", got)
	}
}

// TestPasswordOnOpenServer: a URL with a password means the same in every
// command and in the library, also on a server that has none: the library
// (HELLO AUTH) connects, and kura bench used to refuse it ("has no
// password configured but one was given").
func TestPasswordOnOpenServer(t *testing.T) {
	srv := servertest.Redis(t, servers.RedisConfig{})
	u := "redis://:s3cret@" + srv.Addr
	for _, args := range [][]string{
		{"bench", u, "-n", "5", "-c", "1", "-q", "--no-save"},
		{"scan", u, "-q", "--no-save"},
		{"codecs", "--url", u, "-q", "--min-time", "1ms"},
	} {
		line := kuraLine(t, args...)
		if line != "" && !strings.Contains(line, "only 0 values") {
			t.Errorf("kura %s: %s", strings.Join(args[:1], " "), line)
		}
	}
}

// TestUIPortTaken: a second kura ui on the default port says the port is
// taken and what to do ("bind: address already in use" said neither).
func TestUIPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := servertest.Redis(t, servers.RedisConfig{})
	line := kuraLine(t, "ui", srv.URL(), "--listen", ln.Addr().String())
	if !strings.Contains(line, "the port is taken (another kura ui?)") {
		t.Errorf("kura ui on a taken port: %q", line)
	}
}

// TestMistypedURLIsNeverACommand: bench takes a command template where
// other commands take a URL, so a mistyped URL ("redis:/…", "redis//…", a
// scheme-less user:password@host) was once sent to the default server as a
// command and printed in its report, password and all; it passed only where
// nothing listened on 127.0.0.1:6379. Each is refused before any connection,
// and a command template is still a template.
func TestMistypedURLIsNeverACommand(t *testing.T) {
	for _, arg := range []string{
		"redis:/:S3cret@127.0.0.1:1", "redis//:S3cret@127.0.0.1:1", "REDIS:S3cret@127.0.0.1:1",
		"memcached:/127.0.0.1:1", ":S3cret@127.0.0.1:1", "alice:S3cret@127.0.0.1:1",
	} {
		bf := &benchFlags{}
		cmd := newBenchCmd()
		_, err := bf.config(cmd, []string{arg})
		if err == nil {
			t.Errorf("bench %q: accepted as a command template", arg)
			continue
		}
		if strings.Contains(err.Error(), "S3cr") {
			t.Errorf("bench %q: the error shows the password: %v", arg, err)
		}
	}
	for _, args := range [][]string{{"SET", "__key__", "__data__"}, {"GET", "redis:key"}, {"redis/values"}} {
		if _, rest, err := takeURL("", args, false); err != nil || len(rest) != len(args) {
			t.Errorf("takeURL(%q) = %v, %v; want the arguments kept", args, rest, err)
		}
	}
}
