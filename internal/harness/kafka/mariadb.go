package kafka

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// MariaDB is a private mariadbd with a row-based binlog (what a change-data-capture reader
// needs): binlog_format=ROW, binlog_row_image=FULL (every column in the before image), a
// server_id. root has no password and is reachable on loopback only.
type MariaDB struct {
	// Addr is host:port on loopback.
	Addr string
	// Port is Addr's port.
	Port int
	// Dir holds the data directory and the log, removed by Stop.
	Dir string
	// StartTook is install-db plus start to the first answered query.
	StartTook time.Duration

	j *jvm // not a JVM: the same process handling
}

// StartMariaDB initialises a data directory and starts mariadbd on a free loopback port.
// It needs Debian's mariadb-server (mariadb-install-db, mariadbd and the mariadb client).
func StartMariaDB(ctx context.Context) (*MariaDB, error) {
	var bins [3]string
	for i, name := range []string{"mariadb-install-db", "mariadbd", "mariadb"} {
		p, err := lookSbin(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (install it with: apt-get install -y mariadb-server)", ErrNotInstalled, name)
		}
		bins[i] = p
	}
	dir, err := os.MkdirTemp("", "kura-mariadb-")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	data := filepath.Join(dir, "data")
	user := []string{}
	if os.Geteuid() == 0 {
		user = []string{"--user=root"}
	}
	install := exec.CommandContext(ctx, bins[0], append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, user...)...)
	if out, err := install.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("mariadb-install-db: %v: %s", err, tail(string(out), 5))
	}
	port, err := FreePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	m := &MariaDB{Addr: net.JoinHostPort("127.0.0.1", itoa(port)), Port: port, Dir: dir}
	args := append([]string{"--no-defaults"}, user...)
	args = append(args, "--datadir="+data, "--socket="+filepath.Join(dir, "sock"),
		"--pid-file="+filepath.Join(dir, "pid"), "--port="+itoa(port), "--bind-address=127.0.0.1",
		"--skip-name-resolve", "--log-bin="+filepath.Join(data, "binlog"), "--binlog-format=ROW",
		"--binlog-row-image=FULL", "--server-id=1", "--innodb-buffer-pool-size=32M",
		"--log-error="+filepath.Join(dir, "error.log"))
	m.j = &jvm{name: "mariadbd", dir: dir, logPath: filepath.Join(dir, "stdout.log"), bin: bins[1], args: args}
	if err := m.j.launch(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := m.SQL(ctx, "SELECT 1"); err == nil {
			break
		} else if m.j.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			m.Stop()
			return nil, fmt.Errorf("mariadbd on %s did not start: %v\n%s", m.Addr, err, tail(string(log), 10))
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.StartTook = time.Since(start)
	return m, nil
}

// SQL runs statements as root through the mariadb client and returns its tab-separated output.
func (m *MariaDB) SQL(ctx context.Context, sql string) (string, error) {
	client, err := lookSbin("mariadb")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, client, "--no-defaults", "-uroot", "-h127.0.0.1", "-P"+itoa(m.Port), "-N", "-B", "-e", sql)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mariadb: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// Stop kills mariadbd and removes its directory.
func (m *MariaDB) Stop() {
	m.j.stop(5 * time.Second)
	_ = os.RemoveAll(m.Dir)
}

func lookSbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/bin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrNotInstalled, name)
}
