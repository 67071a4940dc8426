package loadgen

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// TestSentinelTarget: a redis+sentinel:// target loads the primary the
// sentinels name (the primary's own counters see every operation), with
// the data password and the sentinels' password kept apart; a wrong
// sentinel password or master set is a one-line error without either
// password.
func TestSentinelTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: "data-pw", SentinelPassword: "sent-pw"})
	sentinels := strings.Join(set.SentinelAddrs(), ",")
	url := "redis+sentinel://:data-pw@" + sentinels + "/" + set.MasterSet + "?sentinel_password=sent-pw"
	res := mustRun(t, Config{Target: url, Command: CmdSet, Requests: 500, Connections: 2})
	if res.Ops != 500 || res.Errors != 0 {
		t.Fatalf("ops %d errors %d (%v)", res.Ops, res.Errors, res.ErrorSamples)
	}
	if res.Server == nil || res.Server.Commands["set"] != 500 {
		t.Fatalf("the primary counted %v, want 500 SETs", res.Server)
	}
	if res.Target == "" || strings.Contains(res.Target, "pw") || !strings.Contains(res.Target, set.Primary.Addr) {
		t.Fatalf("result target %q: want the primary named, no password", res.Target)
	}
	// Each password refusal names the part of the URL that holds it, not
	// the other side's (the sentinels' is sentinel_password=, the data
	// servers' the user info).
	for _, bad := range []struct{ name, url, want, not string }{
		{"sentinel password", strings.Replace(url, "sent-pw", "wrong-pw", 1), "sentinel_password", "redis://"},
		{"no sentinel password", strings.TrimSuffix(url, "?sentinel_password=sent-pw"), "sentinel_password=PASSWORD", "redis://"},
		{"no data password", strings.Replace(url, ":data-pw@", "", 1), "redis+sentinel://:PASSWORD@", "as sentinel_password"},
		{"wrong data password", strings.Replace(url, ":data-pw@", ":wrong-pw@", 1), "user info", "check sentinel_user"},
		{"master set", strings.Replace(url, "/"+set.MasterSet+"?", "/nosuch?", 1), "nosuch", "\x00"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, err := Run(context.Background(), Config{Target: bad.url, Requests: 10, Timeout: 2 * time.Second})
			if err == nil || !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line mentioning %q", err, bad.want)
			}
			if strings.Contains(err.Error(), bad.not) {
				t.Fatalf("err = %v, offers the other side's fix (%q)", err, bad.not)
			}
			for _, pw := range []string{"data-pw", "sent-pw", "wrong-pw"} {
				if strings.Contains(err.Error(), pw) {
					t.Fatalf("the error shows a password: %v", err)
				}
			}
		})
	}
}

// TestSentinelTargetTLS: rediss+sentinel:// asks the sentinels over TLS
// (trusting --tls-ca) and loads the primary's TLS port they name.
func TestSentinelTargetTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	files, _ := servertest.SelfSigned(t)
	set := servertest.SentinelSet(t, servers.SentinelConfig{Password: "data-pw", SentinelPassword: "sent-pw", TLS: files})
	url := "rediss+sentinel://:data-pw@" + strings.Join(set.TLSSentinelAddrs, ",") + "/" + set.MasterSet + "?sentinel_password=sent-pw"
	res := mustRun(t, Config{Target: url, TLSCAFile: files.CertFile, Command: CmdSet, Requests: 300, Connections: 2})
	if res.Ops != 300 || res.Errors != 0 || res.Server == nil || res.Server.Commands["set"] != 300 {
		t.Fatalf("ops %d errors %d (%v), server %v", res.Ops, res.Errors, res.ErrorSamples, res.Server)
	}
	if !strings.Contains(res.Target, set.PrimaryTLS) {
		t.Fatalf("result target %q, want the primary's TLS port %s", res.Target, set.PrimaryTLS)
	}
}
