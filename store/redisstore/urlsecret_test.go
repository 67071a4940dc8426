package redisstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kuracache/kura/store/redisstore"
)

// TestNewFromURLNeverPrintsThePassword: a URL that does not parse, or
// that lost its host, is refused by NewFromURL without its password in
// the error. rueidis.ParseURL's error quotes the whole URL, and a URL
// such as redis://:123456 (no host) was accepted, the password taken for
// a port, and printed by every later dial error.
func TestNewFromURLNeverPrintsThePassword(t *testing.T) {
	const secret = "S3cretPW"
	for _, u := range []string{
		"redis://:" + secret,
		"redis://user:" + secret + "/0",
		"redis://:123456",
		"redis://user:S3c%zzretPW@127.0.0.1:1",
		"redis://:S3c/retPW",
		"rediss://user:" + secret,
	} {
		s, err := redisstore.NewFromURL(context.Background(), u, redisstore.Options{})
		if err == nil {
			s.Close()
			t.Errorf("NewFromURL(%q) accepted", u)
			continue
		}
		for _, leak := range []string{secret, "123456", "retPW"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("NewFromURL(%q): the error shows the password: %v", u, err)
			}
		}
	}
}
