package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, in := range []string{
		"redis://:s3cret@127.0.0.1:6379",
		"redis+sentinel://h:26379/mymaster?sentinel_password=s3cret",
		"rediss+sentinel://u:s3cret@h1,h2/mymaster/0?sentinel_user=a&sentinel_password=s3cret",
		"redis+sentinel://h/m?sentinel_user=a&SENTINEL_PASSWORD=s3cret&x=1",
		"redis://user:s3cret@127.0.0.1:6379/0?addr=127.0.0.1:6380",
		"rediss://user:s3cret@h1:1,h2:2",
		"redis://:s3 cret@host:6379",   // does not parse
		"redis://:s3cret%zz@host:6379", // bad escape: does not parse
		"memcached://u:s3cret@h:11211",
		":s3cret@host:6379",
		"redis://s3cret@host:6379",     // the password shorthand
		"redis://:s3/cret@host:6379",   // unescaped / ...
		"redis://:s3#cret@host:6379",   // ... # ...
		"redis://:s3?cret@host:6379/0", // ... ? ...
		"redis://u:s3cret@x@host:6379", // ... @
		"redis:/:s3cret@127.0.0.1:1",   // a mistyped scheme
		"redis//:s3cret@host",          // another
		"redis://s3/cret/x@host",       // shorthand with slashes
		"redis://us er:s3cret@host",    // a user that is not one
	} {
		got := URL(in)
		if strings.Contains(got, "s3cret") || strings.Contains(got, "s3 cret") {
			t.Errorf("URL(%q) = %q: the password is still there", in, got)
		}
	}
	if got := URL("redis://alice:s3cret@h:1"); got != "redis://alice:xxxxx@h:1" {
		t.Errorf("the user name is kept: %q", got)
	}
	if got := URL("redis://127.0.0.1:6379"); got != "redis://127.0.0.1:6379" {
		t.Errorf("a URL without a password changed: %q", got)
	}
}

// A password parameter typed after "&" instead of "?" lands in the host
// part of the URL; it is masked there too.
func TestURLMasksAPasswordParameterWithoutAQuery(t *testing.T) {
	for _, in := range []string{
		"redis+sentinel://h&sentinel_password=hunter2",
		"redis+sentinel://h:26379&sentinel_password=hunter2/mymaster",
		"redis+sentinel://h;Sentinel_Password=hunter2",
		"redis+sentinel://u:pw@h?x=1&sentinel_password=hunter2&db=2",
	} {
		got := URL(in)
		if strings.Contains(got, "hunter2") || strings.Contains(got, "pw@") {
			t.Errorf("URL(%q) = %q: a secret is shown", in, got)
		}
	}
	if got := URL("redis://h:6379/0?protocol=3"); got != "redis://h:6379/0?protocol=3" {
		t.Errorf("a URL without secrets changed: %q", got)
	}
}

func TestURLThatLostItsHost(t *testing.T) {
	for in, want := range map[string]string{
		"redis://user:s3cret":                            "redis://user:xxxxx",
		"redis://:s3cret":                                "redis://:xxxxx",
		"redis://:s3cret/0":                              "redis://:xxxxx",
		"redis://:1234":                                  "redis://:xxxxx", // an all-digit password, no host
		"redis://:1234/0":                                "redis://:xxxxx",
		"redis://h:1,:1234":                              "redis://h:1,:xxxxx",
		"redis://h:1,u:s3/cret?x":                        "redis://h:1,u:xxxxx",
		"redis://[::1]:s3cret":                           "redis://[::1]:xxxxx",
		"redis://[::1]x:s3cret":                          "redis://[::1]x:xxxxx", // text between the bracket and the colon
		"redis://user:s3c?ret":                           "redis://user:xxxxx",   // the rest of the password in the query
		"redis+sentinel://h/m?sentinel_password=s3;cret": "redis+sentinel://h/m?sentinel_password=xxxxx",
		"redis://h:6379/0?addr=h2:1":                     "redis://h:6379/0?addr=h2:1",
		"redis://::1:6380":                               "redis://::1:6380",
		"redis://[::1]:6380,h":                           "redis://[::1]:6380,h",
		"redis://h:":                                     "redis://h:",
		"key:{i}":                                        "key:{i}", // not a URL: a bench template
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}
