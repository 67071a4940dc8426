package loadgen_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
)

// TestMain skips ExampleRun, which starts a private redis-server, on a
// machine without one, the way every test that needs a server skips
// (servertest): an Example cannot skip itself, and log.Fatal in it would
// fail `go test ./...` for want of a server. Under CI=true or
// KURA_REQUIRE_SERVERS=1 it runs, so a missing server there fails.
func TestMain(m *testing.M) {
	flag.Parse()
	required := os.Getenv("CI") == "true" || os.Getenv("KURA_REQUIRE_SERVERS") == "1"
	if _, err := servers.LookPath("redis-server"); err != nil && !required {
		skip := "^ExampleRun$"
		if s := flag.Lookup("test.skip").Value.String(); s != "" {
			skip = s + "|" + skip
		}
		_ = flag.Set("test.skip", skip)
		fmt.Fprintln(os.Stderr, "loadgen: skipping ExampleRun: no redis-server here (make servers installs it)")
	}
	os.Exit(m.Run())
}
