package servers

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PostgresConfig configures a private PostgreSQL. The zero value is a
// throw-away server tuned for tests: no fsync, small shared buffers.
type PostgresConfig struct {
	// Args are extra "-c name=value" settings passed through verbatim, as
	// "name=value" strings.
	Args []string
	// Logical turns on logical replication (wal_level=logical, with
	// replication slots and WAL senders to spare) for the change stream
	// (cdc/pgsource). It does not change the other settings.
	Logical bool
}

// Postgres is a running private PostgreSQL with a superuser "kura" that
// needs no password (trust authentication on loopback only).
type Postgres struct {
	*Proc
	ready func(context.Context) error
}

// Restart stops PostgreSQL with a fast shutdown (SIGINT: clients are
// disconnected, a checkpoint is written; replication slots survive) and
// starts it again on the same port and data directory, waiting until it
// accepts connections. Clients see their connections closed, then
// connection refused until it is back.
func (p *Postgres) Restart(ctx context.Context) error {
	cmd, done := p.current()
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("servers: postgres on %s did not shut down within 30s", p.Addr)
	}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return fmt.Errorf("%w: postgres on %s", ErrStopped, p.Addr)
	}
	err := p.launch()
	if err == nil {
		p.restarts++
	}
	p.mu.Unlock()
	if err != nil {
		return err
	}
	return p.waitReady(ctx, p.ready)
}

// DSN returns a connection string for the "postgres" database, usable by
// pgx and libpq.
func (p *Postgres) DSN() string {
	return "postgres://kura@" + p.Addr + "/postgres?sslmode=disable"
}

// pgCredential returns the credential the PostgreSQL binaries run with:
// initdb and postgres refuse to run as root, so as root they run as the
// "postgres" user that Debian's package creates; otherwise as the current
// user (nil).
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: PostgreSQL refuses to run as root and there is no \"postgres\" user (install it with: apt-get install -y postgresql)", ErrNotInstalled)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// StartPostgres runs initdb in a fresh directory and starts postgres on a
// free loopback port. It takes a few seconds: start one per test package.
func StartPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	initdb, err := LookPath("initdb")
	if err != nil {
		return nil, err
	}
	bin, err := LookPath("postgres")
	if err != nil {
		return nil, err
	}
	cred, err := pgCredential()
	if err != nil {
		return nil, err
	}
	var ready func(context.Context) error
	p, err := retryPort(func(port int) (*Proc, error) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		dir, err := os.MkdirTemp("", "kura-postgres-")
		if err != nil {
			return nil, err
		}
		data := filepath.Join(dir, "data")
		if cred != nil {
			if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
		cmd := exec.CommandContext(ctx, initdb, "-D", data, "-U", "kura", "--auth=trust",
			"--no-sync", "--encoding=UTF8", "--locale=C")
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("initdb: %v: %s", err, lastLines(string(out), 5))
		}
		args := []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "shared_buffers=32MB", "-c", "max_connections=100"}
		if cfg.Logical {
			args = append(args, "-c", "wal_level=logical", "-c", "max_replication_slots=30", "-c", "max_wal_senders=30")
		}
		for _, a := range cfg.Args {
			args = append(args, "-c", a)
		}
		proc, err := startIn(dir, "postgres", bin, args, addr, cred)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		isReady, _ := LookPath("pg_isready")
		ready = func(ctx context.Context) error {
			if isReady == "" {
				c, err := net.Dial("tcp", addr)
				if err == nil {
					c.Close()
				}
				return err
			}
			out, err := exec.CommandContext(ctx, isReady, "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "kura").CombinedOutput()
			if err != nil {
				return fmt.Errorf("pg_isready: %v %s", err, strings.TrimSpace(string(out)))
			}
			return nil
		}
		if err := proc.waitReady(ctx, ready); err != nil {
			proc.Stop()
			return nil, err
		}
		return proc, nil
	})
	if err != nil {
		return nil, err
	}
	return &Postgres{Proc: p, ready: ready}, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
