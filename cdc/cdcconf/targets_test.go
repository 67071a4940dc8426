package cdcconf

import (
	"strings"
	"testing"
)

// TestTargetNames: two targets of one name (given, or the kind and
// number a target without one gets) are refused when the file is read:
// the name labels each target's metrics and its staleness inspector's,
// and kura cdc --metrics with an inspect section panicked registering
// the second inspector under the name of the first.
func TestTargetNames(t *testing.T) {
	const rest = `"database": {"url": "postgres://kura@127.0.0.1:1/x"}, "tables": [{"table": "t", "keys": [{"prefix": "t:", "column": "id"}]}]`
	for _, tc := range []struct{ targets, want string }{
		{`[{"name": "a", "url": "redis://127.0.0.1:1"}, {"name": "a", "url": "redis://127.0.0.1:2"}]`, `targets[0] and targets[1] are both named "a"`},
		{`[{"name": "redis2", "url": "redis://127.0.0.1:1"}, {"url": "redis://127.0.0.1:2"}]`, `targets[0] and targets[1] are both named "redis2"`},
	} {
		_, err := Parse([]byte(`{"targets": ` + tc.targets + `, ` + rest + `}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.targets, err, tc.want)
		}
	}
	if _, err := Parse([]byte(`{"targets": [{"url": "redis://127.0.0.1:1"}, {"url": "redis://127.0.0.1:2"}, {"name": "redis3x", "url": "memcached://127.0.0.1:3"}], ` + rest + `}`)); err != nil {
		t.Errorf("distinct names: %v", err)
	}
}
