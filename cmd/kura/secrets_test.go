package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// recorder is the tests' resolver: it answers localhost and records
// every other name it is asked, so that no lookup leaves the machine and
// the test can see what would have.
type recorder struct {
	mu    sync.Mutex
	names []string
}

func (r *recorder) LookupHost(ctx context.Context, host string) ([]string, error) {
	r.mu.Lock()
	r.names = append(r.names, host)
	r.mu.Unlock()
	if strings.EqualFold(host, "localhost") {
		return []string{"127.0.0.1"}, nil
	}
	return nil, &net.DNSError{Err: "no such host (test resolver)", Name: host, IsNotFound: true}
}

func (r *recorder) asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

// testResolver is the resolver every command run by runAll looks names
// up with.
var testResolver = &recorder{}

// run executes the kura command line args in process and returns all it
// printed, stdout, stderr and the error line main would print. os.Args is
// args, as the reports that quote their command line read it, and names
// are looked up with testResolver, never the system's.
func runAll(t *testing.T, args ...string) string {
	t.Helper()
	return runAllWithin(t, 15*time.Second, args...)
}

// runAllWithin is runAll with the command's context ending after timeout.
func runAllWithin(t *testing.T, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ctx = withResolver(ctx, testResolver)
	saved := os.Args
	os.Args = append([]string{"kura"}, args...)
	defer func() { os.Args = saved }()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	if cmd, err := root.ExecuteContextC(ctx); err != nil {
		out.WriteString(mainErrorLine(cmd, err, args) + "\n")
	}
	return out.String()
}

// randomPassword returns a random password of n characters from letters
// and digits that do not make words or ports, with special (if any)
// spread through it.
func randomPassword(n int, special string) string {
	const alpha = "QZXJKVWqzxjkvw89"
	b := make([]byte, n)
	for i := range b {
		b[i] = alpha[rand.IntN(len(alpha))]
	}
	for _, c := range []byte(special) {
		b[1+rand.IntN(n-2)] = c
	}
	return string(b)
}

// fragments returns every 4-character piece of s.
func fragments(s string) []string {
	var out []string
	for i := 0; i+4 <= len(s); i++ {
		out = append(out, s[i:i+4])
	}
	return out
}

// leak returns the first 4-character fragment of a secret in text.
func leak(text string, secrets ...string) string {
	for _, sec := range secrets {
		for _, f := range fragments(sec) {
			if strings.Contains(text, f) {
				return f
			}
		}
	}
	return ""
}

// TestNoSecretInOutput: random passwords holding "/", "#", "?", "@" and
// "%" (and a plain one), given in every form a URL takes (user:password,
// the redis://password@host shorthand, the password alone without
// "@host", a mistyped scheme, a bad escape, sentinel_password=, a
// memcached URL that cannot have one) and as -a in a cluster of flags, to
// every command that reads a cache, never appear, not even 4 characters
// of them, in what the command prints or in any file it writes (saved
// results, --html, --json); and no name it looks up holds any of them
// (the tests' recording resolver sees every lookup: none leaves the
// machine).
func TestNoSecretInOutput(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KURA_RESULTS_DIR", filepath.Join(dir, "results"))
	// A live server for bench's target: a mistyped URL after the target
	// was sent to it as a command template, and its "unknown command"
	// reply printed the password (seen only when the default target,
	// 127.0.0.1:6379, had a server: make redis-up starts one).
	live := servertest.Redis(t, servers.RedisConfig{})
	secrets := []string{
		randomPassword(14, "/#"), randomPassword(14, "?@"), randomPassword(14, "%@/"), randomPassword(16, "/#?@%"),
		randomPassword(14, ""), // plain: the one redis://PASSWORD sends to the resolver
		"Qz9x Vkjw pQ",         // a space
		"Qz9Xkv%zz",            // a bad escape
	}
	var all []string
	for _, secret := range secrets {
		forms := []string{
			"redis://:" + secret + "@127.0.0.1:1",
			"redis://alice:" + secret + "@127.0.0.1:1",
			"redis://" + secret + "@127.0.0.1:1",
			"redis:/:" + secret + "@127.0.0.1:1",
			"redis//:" + secret + "@127.0.0.1:1",
			"rediss://:" + secret + "@127.0.0.1:1/0",
			"memcached://u:" + secret + "@127.0.0.1:1",
			"redis+ring://:" + secret + "@127.0.0.1:1,127.0.0.1:2",
			"redis://:" + url.PathEscape(secret) + "@127.0.0.1:1",
			// The host left out: the password stands where a port goes,
			// or, in the shorthand, where the host goes.
			"redis://:" + secret,
			"redis://alice:" + secret,
			"redis://" + secret,
			"memcached://" + secret,
			"redis+sentinel://127.0.0.1:1/m?sentinel_password=" + secret,
			"redis+sentinel://127.0.0.1:1/m?sentinel_password=" + url.QueryEscape(secret),
		}
		for i, u := range forms {
			html := filepath.Join(dir, fmt.Sprintf("s%d.html", i))
			js := filepath.Join(dir, fmt.Sprintf("b%d.json", i))
			for _, args := range [][]string{
				{"inspect", u, "k"}, {"inspect", "--url", u, "k"}, {"inspect", "--url=" + u, "k"}, {"inspect", u, "k", "--json"},
				{"scan", u}, {"scan", "-u", u}, {"scan", u, "--json"},
				{"codecs", u}, {"codecs", "--url", u},
				{"ui", u, "--listen", "127.0.0.1:0"},
				{"bench", u, "--duration", "1s", "--json", js},
				{"bench", "--url", live.URL(), u, "-n", "100", "-q", "--no-save"},
				{"bench", "sweep", u, "--html", html},
			} {
				if out := runAll(t, args...); leak(out, secret) != "" {
					t.Errorf("kura %q printed %q of the password:\n%s", args, leak(out, secret), out)
				}
			}
		}
		// -a in a cluster of flags, and the report files that quote the
		// command line.
		html := filepath.Join(dir, "qa.html")
		for _, args := range [][]string{
			{"bench", "sweep", live.URL(), "-qa", secret, "-n", "200", "-c", "1,2", "--html", html},
			{"bench", "sweep", live.URL(), "-qa" + secret, "-n", "200", "-c", "1,2", "--html", html},
			{"bench", live.URL(), "-qa", secret, "-n", "200", "--json", filepath.Join(dir, "qa.json")},
		} {
			if out := runAll(t, args...); leak(out, secret) != "" {
				t.Errorf("kura %q printed %q of the password:\n%s", args, leak(out, secret), out)
			}
		}
		// The sweep report's command line.
		got := strings.Join(redactArgs([]string{"sweep", "redis://" + secret + "@h:1", "-a", secret, "-a" + secret, "-qa", secret, "-qa" + secret,
			"--uri=redis://" + secret + "@h:1", "--url=redis://:" + secret + "@h:1", "--password=" + secret}), " ")
		if f := leak(got, secret); f != "" {
			t.Errorf("redactArgs shows %q: %s", f, got)
		}
		all = append(all, secret)
	}
	// Every file any command wrote.
	files := 0
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, _ := os.ReadFile(path)
		if f := leak(string(b), all...); f != "" {
			t.Errorf("%s holds %q of a password", path, f)
		}
		return nil
	})
	if files < 3 {
		t.Errorf("the commands wrote %d files; the sweep must have written its reports", files)
	}
	// The resolver is the one the commands use: a name is looked up
	// through it (localhost, which it answers itself).
	runAll(t, "inspect", "redis://localhost:1", "k")
	runAll(t, "bench", "redis://localhost:1", "-n", "1", "-q", "--no-save")
	if n := strings.Count(strings.Join(testResolver.asked(), " "), "localhost"); n < 2 {
		t.Errorf("the recording resolver saw %d lookups of localhost from inspect and bench; want both", n)
	}
	for _, name := range testResolver.asked() {
		if f := leak(name, all...); f != "" {
			t.Errorf("a lookup of %q holds %q of a password", name, f)
		}
	}
}

// TestPasswordShorthandIsAPassword: redis://PASSWORD@host authenticates
// with PASSWORD as the password (never as an ACL user name, which the
// server would log in clear in ACL LOG), and a wrong one is reported
// without it.
func TestPasswordShorthandIsAPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	const pw = "pw/with#odd?chars x"
	r := servertest.Redis(t, servers.RedisConfig{Password: pw})
	ctx := context.Background()
	if _, err := r.Do(ctx, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(r.URL(), "redis://")
	if i := strings.LastIndex(addr, "@"); i >= 0 {
		addr = addr[i+1:]
	}
	esc := url.PathEscape(pw)
	if out := runAll(t, "inspect", "redis://"+esc+"@"+addr, "k"); strings.Contains(out, "pw/with") || strings.Contains(out, esc) || !strings.Contains(out, "text") {
		t.Errorf("inspect with the shorthand and an escaped password:\n%s", out)
	}
	// Unescaped, it is refused with how to escape it.
	if out := runAll(t, "inspect", "redis://"+pw+"@"+addr, "k"); strings.Contains(out, "pw/with") || !strings.Contains(out, "%2F") {
		t.Errorf("inspect with an unescaped password:\n%s", out)
	}
	const wrong = "WrongSecret%2Fx"
	for _, args := range [][]string{{"inspect", "redis://" + wrong + "@" + addr, "k"}, {"scan", "redis://" + wrong + "@" + addr}, {"codecs", "redis://" + wrong + "@" + addr}} {
		if out := runAll(t, args...); strings.Contains(out, "WrongSecret") {
			t.Errorf("%v printed the wrong password:\n%s", args[0], out)
		}
	}
	log, err := r.Do(ctx, "ACL", "LOG")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log, "WrongSecret") || strings.Contains(log, "pw/with") {
		t.Errorf("the password reached the server's ACL LOG as a user name:\n%s", log)
	}
}
