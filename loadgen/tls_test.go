package loadgen

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

func TestTLS(t *testing.T) {
	files, _ := servertest.SelfSigned(t)
	cert, key := files.CertFile, files.KeyFile
	port, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Redis(t, servers.RedisConfig{Password: "pw", Args: []string{
		"--tls-port", strconv.Itoa(port), "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", cert, "--tls-auth-clients", "no",
	}})
	target := "rediss://:pw@127.0.0.1:" + strconv.Itoa(port)
	res := mustRun(t, Config{Target: target, TLSCAFile: cert, Command: CmdSet, Connections: 2, Requests: 300})
	if res.Errors != 0 || res.Server.Commands["set"] != 300 {
		t.Errorf("TLS run: errors %d %v, server %v", res.Errors, res.ErrorSamples, res.Server.Commands)
	}
	_, err = Run(context.Background(), Config{Target: target, Requests: 1})
	if err == nil || !strings.Contains(err.Error(), "--tls-ca") {
		t.Errorf("unknown CA: err = %v, want a hint at --tls-ca/--insecure", err)
	}
	res = mustRun(t, Config{Target: target, InsecureTLS: true, Requests: 10, Connections: 1})
	if res.Errors != 0 {
		t.Errorf("--insecure: %v", res.ErrorSamples)
	}
	_, err = Run(context.Background(), Config{Target: "rediss://:pw@" + srv.Addr, Requests: 1, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("rediss:// to a plain port: err = %v", err)
	}
}
