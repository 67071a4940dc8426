package main

import (
	"context"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/internal/harness/servertest"
)

// nested returns JSON n arrays deep holding about size bytes of small
// numbers: the value that multiplies when it is indented.
func nested(n, size int) string {
	inner := strings.Repeat("1,", size/2)
	return strings.Repeat("[", n) + inner + "1" + strings.Repeat("]", n)
}

// TestInspectAnyKeyType: kura inspect on a Redis holding what production
// Redis holds. A hash, list, set, sorted set and stream between good keys
// are shown with their type, encoding and length and first elements (the
// old code stopped at the first one with a raw WRONGTYPE, printing nothing
// for the keys before it), and a 1.3 MB value and deep values of 900 KiB and 20 MiB are
// bounded unless --full is given (the old code printed them whole).
func TestInspectAnyKeyType(t *testing.T) {
	if testing.Short() {
		t.Skip("real-server test")
	}
	ctx := context.Background()
	r := servertest.Redis(t, servers.RedisConfig{})
	do := func(args ...string) {
		t.Helper()
		if _, err := r.Do(ctx, args...); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	do("SET", "good:1", `{"id":1}`)
	do("HSET", "h", "name", "ada", "bin", "\xff\x00")
	do("RPUSH", "l", "a", "b", "c")
	do("SADD", "s", "x")
	do("ZADD", "z", "1.5", "m")
	do("XADD", "x", "*", "f", "v")
	do("SET", "good:2", "plain")
	big := `{"report":"` + strings.Repeat("r", 1300<<10) + `"}`
	do("SET", "big", big)
	do("SET", "deep", nested(62, 900<<10))
	do("SET", "huge", nested(62, 20<<20))
	out, _, err := kura(t, "inspect", r.URL(), "good:1", "h", "l", "s", "z", "x", "good:2", "big", "deep", "huge")
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	for _, want := range []string{
		"key      good:1\ntype     string",
		"type     hash, encoding listpack, 2 elements",
		`"field": "name"`, `"base64": "/wA="`,
		"type     list, encoding ", ", 3 elements\n", // quicklist or listpack: the server's version decides
		"type     set, encoding ",
		"type     zset, encoding listpack, 1 element\n", `"score": 1.5`,
		"type     stream, encoding stream, 1 element\n",
		"key      good:2",
		"over the limit of 1048576 this reader decodes",
		"... cut at 65536 bytes of text (--full prints it all)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%.3000s", want, out)
		}
	}
	if len(out) > 256<<10 {
		t.Errorf("inspect printed %d bytes for values of 1.3 MB, 900 KiB and 20 MiB; want the default bound", len(out))
	}
	out, _, err = kura(t, "inspect", r.URL(), "big", "--full")
	if err != nil || len(out) < len(big) {
		t.Errorf("inspect --full: %d bytes printed for a %d-byte value (%v)", len(out), len(big), err)
	}
}
