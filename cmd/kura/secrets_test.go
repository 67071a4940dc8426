package main

import (
	"bytes"
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// run executes the kura command line args in process and returns all it
// printed, stdout, stderr and the error line main would print.
func runAll(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
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

// TestNoSecretInOutput: a password with unescaped "/", "#", "?", spaces
// or "@", given in every form a URL takes (user:password, the
// redis://password@host shorthand, a mistyped scheme, a bad escape, a
// memcached URL that cannot have one), to every command that reads a
// cache, never appears in what the command prints.
func TestNoSecretInOutput(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KURA_RESULTS_DIR", dir)
	// A live server for bench's target: a mistyped URL after the target
	// was sent to it as a command template, and its "unknown command"
	// reply printed the password (seen only when the default target,
	// 127.0.0.1:6379, had a server: make redis-up starts one).
	live := servertest.Redis(t, servers.RedisConfig{})
	for _, secret := range []string{"S3cr/et#?pw", "S3cr et pw", "S3cr@et:pw", "S3cret%zz"} {
		forms := []string{
			"redis://:" + secret + "@127.0.0.1:1",
			"redis://alice:" + secret + "@127.0.0.1:1",
			"redis://" + secret + "@127.0.0.1:1",
			"redis:/:" + secret + "@127.0.0.1:1",
			"redis//:" + secret + "@127.0.0.1:1",
			"rediss://:" + secret + "@127.0.0.1:1/0",
			"memcached://u:" + secret + "@127.0.0.1:1",
			"redis://:" + url.PathEscape(secret) + "@127.0.0.1:1",
			// The host left out: the password stands where a port goes.
			"redis://:" + secret,
			"redis://alice:" + secret,
		}
		for _, u := range forms {
			for _, args := range [][]string{
				{"inspect", u, "k"}, {"inspect", "--url", u, "k"}, {"inspect", "--url=" + u, "k"},
				{"scan", u}, {"scan", "-u", u},
				{"codecs", u}, {"codecs", "--url", u},
				{"ui", u, "--listen", "127.0.0.1:0"},
				{"bench", u, "--duration", "1s"},
				{"bench", "--url", live.URL(), u, "-n", "100", "-q", "--no-save"},
				{"bench", "sweep", u, "--html", filepath.Join(dir, "s.html")},
			} {
				out := runAll(t, args...)
				// Every secret starts "S3cr": no part of one is printed.
				for _, s := range []string{"S3cr"} {
					if strings.Contains(out, s) {
						t.Errorf("kura %q printed the password:\n%s", args, out)
					}
				}
			}
		}
		// The sweep report's command line.
		got := strings.Join(redactArgs([]string{"sweep", "redis://" + secret + "@h:1", "-a", secret, "-a" + secret,
			"--uri=redis://" + secret + "@h:1", "--url=redis://:" + secret + "@h:1", "--password=" + secret}), " ")
		if strings.Contains(got, "S3cr") {
			t.Errorf("redactArgs: %s", got)
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
