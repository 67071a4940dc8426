package scan

import (
	"bytes"
	"strings"
	"testing"
)

// TestOneKeyIsSingular: a cache of one key on one server reads "1 key"
// and "1 server", never "1 keys" (a new user's first scan of the quick
// start's Redis holds a handful of keys).
func TestOneKeyIsSingular(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, &Report{Target: "redis://127.0.0.1:6379", Kind: "redis", Keys: 1, Servers: []ServerReport{{}}}); err != nil {
		t.Fatal(err)
	}
	if line, _, _ := strings.Cut(b.String(), "\n"); !strings.Contains(line, "(redis, 1 server): 1 key;") {
		t.Errorf("first line %q", line)
	}
}
