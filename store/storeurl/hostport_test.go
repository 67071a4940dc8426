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
		"redis://[::1]x:s3cret":      "after the bracket",
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

// TestURLThatLostItsHost: a URL whose "host@" part was left out
// ("redis://user:password", "redis://:password/0") has its password
// where the port goes, and no "@" to tell the redaction so. Parse's
// error printed it twice (the URL, then "user:s3cret" is not host:port),
// and so did every kura command given it with --url, and Redact kept it.
func TestURLThatLostItsHost(t *testing.T) {
	for _, in := range []string{
		"redis://default:s3cret",
		"redis://:s3cret",
		"redis://:s3cret/0",
		"rediss://default:s3cret?addr=h:1",
		"redis://h1:6379,default:s3cret",
		"redis://default:s3:cret:x",
		"redis://default:s3cret,more",
		"redis://[::1]:s3cret",
		"redis://[::1:s3cret",
		"redis+ring://h:1,default:s3cret",
		"redis+sentinel://default:s3cret/mymaster",
		"memcached://h:s3cret",
	} {
		_, err := storeurl.Parse(in)
		if !errors.Is(err, storeurl.ErrBadURL) {
			t.Errorf("Parse(%q) = %v; want ErrBadURL", in, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "s3:cret") {
			t.Errorf("Parse(%q): the error shows the password: %v", in, err)
		}
		if got := storeurl.Redact(in); strings.Contains(got, "s3cret") || strings.Contains(got, "s3:cret") {
			t.Errorf("Redact(%q) = %q: the password is still there", in, got)
		}
	}
	// Nothing a dialer reads is hidden: a port, an IPv6 address without
	// brackets (refused, but shown as written).
	for in, says := range map[string]string{
		"redis://h:65536":      `"h:65536"`,
		"redis://::1:6380":     `"::1:6380"`,
		"redis://fe80::1:6380": `"fe80::1:6380"`,
	} {
		if _, err := storeurl.Parse(in); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("Parse(%q) = %v; want it to show %s", in, err, says)
		}
	}
	for _, in := range []string{"redis://127.0.0.1:6379/0", "redis://[::1]:6379", "redis://h1:1,h2:2?addr=h3:3", "memcached://a,b:5"} {
		if got := storeurl.Redact(in); got != in {
			t.Errorf("Redact(%q) = %q; a URL without a secret changed", in, got)
		}
	}
}

// TestLostHostPasswordInPathOrQuery: a URL that lost its host and whose
// password holds an unescaped "/", "?", "&" or ";" has the rest of the
// password in its path or query; Parse's error named it there
// ("unknown parameter \"retPW\"", "drop the /retPW after the servers").
// The host's error now comes first, masked.
func TestLostHostPasswordInPathOrQuery(t *testing.T) {
	for _, u := range []string{
		"redis://user:S3c?retPW",
		"redis://:S3c?retPW=1",
		"redis+ring://:S3c?retPW",
		"memcached://:S3c/retPW",
		"redis://:S3c/retPW",
		"redis+sentinel://h:26379/m?sentinel_password=S3c;retPW",
	} {
		_, err := storeurl.Parse(u)
		if err == nil {
			t.Errorf("Parse(%q) accepted", u)
			continue
		}
		if strings.Contains(err.Error(), "S3c") || strings.Contains(err.Error(), "retPW") {
			t.Errorf("Parse(%q): the error shows the password: %v", u, err)
		}
	}
}

// TestNameThatMayBeAPasswordIsNotLookedUp: redis://PASSWORD (the
// shorthand without "@host") and the end of a password with an unescaped
// "@" stand where a host name goes; looked up, they went to the name
// servers, off the machine. A lone bare name is refused before any
// lookup, with nothing of it in the message; names with a port, a dot, or
// localhost are servers.
func TestNameThatMayBeAPasswordIsNotLookedUp(t *testing.T) {
	for _, in := range []string{"redis://Xq9vKzW2pL", "redis://xq9vkzw2pl", "rediss://Xq9vKzW2pL/0", "memcached://Xq9vKzW2pL",
		"redis://:Xq9v@Kzw2pL", "redis+ring://Xq9vKzW2pL", "redis://Xq9v.KZW2pL", "redis://Xq9vKzW2pL?addr=127.0.0.1:1"} {
		_, err := storeurl.Parse(in)
		if !errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "not looked up") {
			t.Errorf("Parse(%q) = %v; want it refused unresolved", in, err)
		}
		if err != nil && (strings.Contains(err.Error(), "Xq9v") || strings.Contains(strings.ToLower(err.Error()), "w2pl")) {
			t.Errorf("Parse(%q) shows the password: %v", in, err)
		}
	}
	for _, in := range []string{"redis://cache:6379", "redis://localhost", "redis://cache.internal", "redis://10.0.0.1", "redis://[::1]", "redis://:pw@cache.svc.local"} {
		if _, err := storeurl.Parse(in); err != nil {
			t.Errorf("Parse(%q): %v", in, err)
		}
	}
}
