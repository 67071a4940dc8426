package storeurl

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// TestUnescapedPasswordRefused: a password with a character a URL cannot
// hold as is is refused with a message that says how to escape it, and
// without the password; escaped, it is the password the client gets.
func TestUnescapedPasswordRefused(t *testing.T) {
	for _, pw := range []string{"Se/cret", "Se#cret", "Se?cret", "Se cret", "Se@cret", "Se\tcret"} {
		for _, raw := range []string{"redis://:" + pw + "@h:1", "redis://" + pw + "@h:1", "redis://alice:" + pw + "@h:1,h:2"} {
			_, err := Parse(raw)
			if !errors.Is(err, ErrBadURL) || strings.Contains(err.Error(), "Se") || !strings.Contains(err.Error(), "%2F") {
				t.Errorf("Parse(%q) = %v", raw, err)
			}
		}
		esc := strings.NewReplacer("@", "%40").Replace(url.PathEscape(pw))
		for _, raw := range []string{"redis://:" + esc + "@h:1", "redis://" + esc + "@h:1"} {
			tg, err := Parse(raw)
			if err != nil || tg.Password != pw || tg.User != "" {
				t.Errorf("Parse(%q) = %+v, %v; want the password %q", raw, tg, err, pw)
			}
			if strings.Contains(tg.Redacted(), "Se") {
				t.Errorf("Redacted %q", tg.Redacted())
			}
		}
	}
	if _, err := Parse("redis://al ice:pw@h:1"); err == nil || !strings.Contains(err.Error(), "the user holds a space") {
		t.Errorf("a user with a space: %v", err)
	}
}
