package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/kuracache/kura/store"
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

// TestExplainNotConnected: a store that never reached its server within
// the first command's deadline (redisstore's ErrNotConnected around the
// last attempt's error) is explained like a refused dial, and over
// rediss:// as a server that gave no TLS handshake, as kura bench says it;
// it used to surface as "redis h:1: store not connected yet (last
// attempt: ... context deadline exceeded)".
func TestExplainNotConnected(t *testing.T) {
	cause := fmt.Errorf("redis 127.0.0.1:1: %w (last attempt: redis 127.0.0.1:1: %w)", store.ErrNotConnected, context.DeadlineExceeded)
	for raw, want := range map[string]string{
		"rediss://:s3cret@127.0.0.1:1": "cannot connect to redis at 127.0.0.1:1: no TLS handshake (does the server speak TLS there? use redis:// for a plain server)",
		"redis://:s3cret@127.0.0.1:1":  "cannot connect to redis at 127.0.0.1:1: no answer in time (check the address and any firewall)",
	} {
		tg, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		got := Explain(tg, cause)
		if got.Error() != want || !errors.Is(got, store.ErrNotConnected) {
			t.Errorf("Explain(%s) = %q, want %q wrapping ErrNotConnected", raw, got, want)
		}
	}
}

// TestExplainUnknownMasterSet: a master set the sentinels do not know is
// named as the thing to fix, not redisstore's "store not connected yet
// (last attempt: ... No such master with that name)".
func TestExplainUnknownMasterSet(t *testing.T) {
	tg, err := Parse("redis+sentinel://:s3cret@127.0.0.1:26391/nosuch")
	if err != nil {
		t.Fatal(err)
	}
	cause := fmt.Errorf("redis 127.0.0.1:26391: %w (last attempt: redis 127.0.0.1:26391: %w)", store.ErrNotConnected, errors.New("No such master with that name"))
	got := Explain(tg, cause).Error()
	if !strings.HasPrefix(got, `the sentinels at 127.0.0.1:26391 know no master set "nosuch"`) || strings.Contains(got, "s3cret") {
		t.Errorf("Explain = %q", got)
	}
}

// TestBadEscapeInQueryHidden: url.ParseQuery's error for a bad escape
// quotes the three bytes at the "%" ("invalid URL escape \"%zz\""), and in
// sentinel_password= those are part of the password.
func TestBadEscapeInQueryHidden(t *testing.T) {
	for _, in := range []string{
		"redis+sentinel://127.0.0.1:26379/m?sentinel_password=S3%Q!cret",
		"redis+sentinel://127.0.0.1:26379/m?sentinel_user=u&sentinel_password=%Q!",
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), "%XX") || strings.Contains(err.Error(), "%Q!") {
			t.Errorf("Parse(%q) = %v; want a bad escape named without the password's bytes", in, err)
		}
	}
}
