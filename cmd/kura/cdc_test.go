package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// TestCDCHelpGolden keeps kura cdc --help under review (refresh with
// go test ./cmd/kura -run TestCDCHelpGolden -update).
func TestCDCHelpGolden(t *testing.T) {
	out, _, err := kura(t, "cdc", "--help")
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "cdc.help.txt", out)
}

// TestCDCHelpExampleRuns runs the help's example as written, with only
// the ports changed to this test's private servers: the config file from
// the heredoc, the psql lines, then kura cdc --until-caught-up.
func TestCDCHelpExampleRuns(t *testing.T) {
	pg := servertest.Postgres(t, servers.PostgresConfig{Logical: true})
	r := servertest.Redis(t, servers.RedisConfig{})
	m := servertest.Memcached(t, servers.MemcachedConfig{})
	help, _, err := kura(t, "cdc", "--help")
	if err != nil {
		t.Fatal(err)
	}
	ports := strings.NewReplacer("127.0.0.1:5432", pg.Addr, "127.0.0.1:6379", r.Addr, "127.0.0.1:11211", m.Addr)
	_, rest, _ := strings.Cut(help, "<<'EOF'\n")
	conf, rest, ok := strings.Cut(rest, "  EOF\n")
	if !ok {
		t.Fatal("no heredoc in the example")
	}
	conf = ports.Replace(strings.ReplaceAll(conf, "\n  ", "\n"))
	dir := t.TempDir()
	path := filepath.Join(dir, "cdc.json")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// The psql line's statements, through pgx (psql may be absent).
	ctx := context.Background()
	c, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE TABLE IF NOT EXISTS items (id bigint PRIMARY KEY, category text)", "ALTER TABLE items REPLICA IDENTITY FULL"} {
		if !strings.Contains(rest, q) {
			t.Fatalf("the example no longer runs %q", q)
		}
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	c.Close(ctx)
	if psql, err := exec.LookPath("psql"); err == nil {
		_ = psql // the statements ran above; psql itself is a client detail
	}
	if !strings.Contains(rest, "kura cdc --config cdc.json --until-caught-up") {
		t.Fatal("the example no longer runs --until-caught-up")
	}
	start := time.Now()
	out := runAllWithin(t, 60*time.Second, "cdc", "--config", path, "--until-caught-up", "--status-every", "1s")
	if !strings.Contains(out, "cdc: caught up") {
		t.Fatalf("after %v the example did not report caught up:\n%s", time.Since(start), out)
	}
	t.Logf("caught up in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]))
}

func TestCDCBadConfigNamesTheField(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ conf, want string }{
		{`{"database": {"url": "postgres://kura@127.0.0.1:1/x"}, "targets": [{"url": "redis://127.0.0.1:1"}], "tables": [{"table": "t", "keys": [{"prefix": "t:"}]}]}`, "tables[0].keys[0]"},
		{`{"database": {"url": "postgres://kura@127.0.0.1:1/x"}, "targets": [{"url": "redis://127.0.0.1:1"}], "tabels": []}`, `unknown field "tabels"`},
		{`{"database": {"url": "postgres://kura@127.0.0.1:1/x"}, "targets": [], "tables": []}`, "targets is empty"},
		{`{"database": {}, "targets": [], "tables": []}`, "database.url is required"},
		{`{"database": {"url": "postgres://kura@127.0.0.1:1/x"}, "targets": [{"url": "redis://127.0.0.1:1"}], "tables": [{"table": "t", "keys": [{"template": "{id}"}]}]}`, "tables[0].keys[0].template"},
		{`{"database": {"url": "postgres://kura@127.0.0.1:1/x"}, "targets": [{"url": "rdis://127.0.0.1:1"}], "tables": [{"table": "t", "keys": [{"template": "t:{id}"}]}]}`, "targets[0].url"},
		{`{"max_txn_keys": "many"}`, "max_txn_keys"},
	} {
		path := filepath.Join(dir, "c.json")
		if err := os.WriteFile(path, []byte(tc.conf), 0o600); err != nil {
			t.Fatal(err)
		}
		out := runAllWithin(t, 10*time.Second, "cdc", "--config", path)
		if !strings.Contains(out, tc.want) {
			t.Errorf("config %s:\ngot  %q\nwant it to name %q", tc.conf, out, tc.want)
		}
	}
}

// TestCDCNoSecretInOutput: a password in the database URL is refused
// without being printed; one in a password file or a target URL never
// appears in what kura cdc prints.
func TestCDCNoSecretInOutput(t *testing.T) {
	dir := t.TempDir()
	const secret = "S3cr/et#?pw"
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, conf := range []string{
		`{"database": {"url": "postgres://kura:S3cr%2Fet%23%3Fpw@127.0.0.1:1/x"}, "targets": [{"url": "redis://127.0.0.1:1"}], "tables": [{"table": "t", "keys": [{"template": "t:{id}"}]}]}`,
		`{"database": {"url": "postgres://kura:S3cr/et#?pw@127.0.0.1:1/x"}, "targets": [{"url": "redis://127.0.0.1:1"}], "tables": [{"table": "t", "keys": [{"template": "t:{id}"}]}]}`,
		`{"database": {"url": "postgres://kura@127.0.0.1:1/x", "password_file": "` + pwFile + `"}, "targets": [{"url": "redis://127.0.0.1:1"}], "tables": [{"table": "t", "keys": [{"template": "t:{id}"}]}]}`,
		`{"database": {"url": "postgres://kura@127.0.0.1:1/x"}, "targets": [{"url": "redis://:S3cr%2Fet%23%3Fpw@127.0.0.1:1"}], "tables": [{"table": "t", "keys": [{"template": "t:{id}"}]}]}`,
		// A keyword/value string that does not parse (the port) is not echoed.
		`{"database": {"url": "host=127.0.0.1 port=abc password=S3cr/et#?pw"}, "targets": [{"url": "redis://127.0.0.1:1"}], "tables": [{"table": "t", "keys": [{"template": "t:{id}"}]}]}`,
		`{"database": {"url": "host=127.0.0.1 port=abc password='S3cr/et#?pw"}, "targets": [{"url": "redis://127.0.0.1:1"}], "tables": [{"table": "t", "keys": [{"template": "t:{id}"}]}]}`,
	} {
		path := filepath.Join(dir, "c.json")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		out := runAllWithin(t, 2*time.Second, "cdc", "--config", path, "--status-every", "1s")
		for _, s := range []string{secret, "S3cr%2Fet", "S3cr"} {
			if strings.Contains(out, s) {
				t.Errorf("kura cdc printed the password (%q):\n%s", s, out)
			}
		}
	}
}
