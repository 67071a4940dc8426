package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// TestCDCTargetsOfOneName: two targets of one name, an inspect section
// and --metrics made kura cdc panic (the Prometheus registry refused the
// second inspector, whose metrics carry the same cache label); the
// config is refused instead, naming both targets.
func TestCDCTargetsOfOneName(t *testing.T) {
	r := servertest.Redis(t, servers.RedisConfig{})
	conf := fmt.Sprintf(`{"database": {"url": "postgres://kura@127.0.0.1:1/x"},
 "targets": [{"name": "a", "url": "redis://%s"}, {"name": "a", "url": "redis://%s/1"}],
 "tables": [{"table": "items", "keys": [{"prefix": "item:", "column": "id"}]}],
 "inspect": {"keys": [{"prefix": "item:", "query": "SELECT to_jsonb(i) FROM items i WHERE id = $1"}]}}`, r.Addr, r.Addr)
	path := filepath.Join(t.TempDir(), "cdc.json")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runAllWithin(t, 5*time.Second, "cdc", "--config", path, "--metrics", "127.0.0.1:0")
	if !strings.Contains(out, `targets[0] and targets[1] are both named "a"`) {
		t.Fatalf("want the config refused, naming both targets:\n%s", out)
	}
}
