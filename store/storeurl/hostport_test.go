package storeurl_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kuracache/kura/store/storeurl"
)

// TestHostList: every server of a URL is read the way redis-cli, a
// browser's URL parser and the person who wrote it read it, or refused
// with a message that says how to write it. redis://:pw@[::1 (an unclosed
// bracket) used to dial [::1]:6379, and redis://::1:6380 dialled port 6379
// of the address ::1:6380.
func TestHostList(t *testing.T) {
	for in, want := range map[string][]string{
		"redis://[::1]":                     {"[::1]:6379"},
		"redis://[::1]:6380/2":              {"[::1]:6380"},
		"redis://:s3cret@[::1]:6380":        {"[::1]:6380"},
		"memcached://[fe80::1%eth0]:11211":  {"[fe80::1%eth0]:11211"},
		"redis://[::ffff:127.0.0.1]:7000":   {"[::ffff:127.0.0.1]:7000"},
		"redis://cache_1.svc-a.local:06379": {"cache_1.svc-a.local:06379"},
		"redis://h1,[::1]:7001,h3:7002":     {"h1:6379", "[::1]:7001", "h3:7002"},
		"memcached://a:1,,b":                {"a:1", "b:11211"},
	} {
		got, err := storeurl.Parse(in)
		if err != nil || !slices.Equal(got.Addrs, want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got.Addrs, err, want)
		}
	}
	for in, says := range map[string]string{
		"redis://:s3cret@[::1":       "does not close",
		"redis://[::1":               "does not close",
		"redis://[::1:6379":          "does not close",
		"redis://s3cret@[::1]x":      "after the bracket",
		"redis://[::1]]:6379":        "after the bracket",
		"redis://::1]":               "bracket outside",
		"redis://h[1]:6379":          "bracket outside",
		"redis://[h1]:6379":          "only an IPv6 address",
		"redis://[127.0.0.1]:6379":   "only an IPv6 address",
		"redis://[]:6379":            "only an IPv6 address",
		"redis://::1":                "in brackets",
		"redis://::1:6380":           "in brackets",
		"redis://:s3cret@h:1:2":      "in brackets",
		"redis://h:+6379":            "port must be a number",
		"redis://h:0":                "port must be a number",
		"redis://h:65536":            "port must be a number",
		"redis://h:":                 "port must be a number",
		"redis://[::1]:":             "port must be a number",
		"redis://h: 1":               "port must be a number",
		"redis://:6379":              "no host",
		"redis://h#frag":             `holds "#"`,
		"redis://h%41":               `holds "%"`,
		"memcached://a,b c":          "holds a space",
		"redis://h\x00x":             "holds a control character",
		"redis://h:1/+1":             "database number",
		"redis://h:1/99999999999999": "database number",
		"memcached://h:1/0":          "memcached has no databases",
		"redis+ring://h1,[::1":       "does not close",
		"redis+sentinel://[::1/m":    "does not close",
	} {
		_, err := storeurl.Parse(in)
		if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), says) {
			t.Errorf("Parse(%q) = %v; want ErrBadURL saying %q", in, err, says)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q): the error shows the password: %v", in, err)
		}
	}
}
