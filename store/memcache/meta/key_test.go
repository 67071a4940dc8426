package meta

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/kuracache/kura/store"
)

func TestKeyForms(t *testing.T) {
	tests := []struct {
		key  string
		form KeyForm
	}{
		{"user:1", KeyPlain},
		{"ключ", KeyPlain},
		{strings.Repeat("k", 250), KeyPlain},
		{"with space", KeyBase64},
		{"tab\there", KeyBase64},
		{"nl\r\nmd victim", KeyBase64},
		{"del\x7f", KeyBase64},
		{strings.Repeat("k", 251), KeyHashed},
		{strings.Repeat(" ", 186), KeyBase64},
		{strings.Repeat(" ", 187), KeyHashed},
		{"\x00lead", KeyHashed},
	}
	for _, tc := range tests {
		form, err := ClassifyKey(tc.key)
		if err != nil || form != tc.form {
			t.Errorf("ClassifyKey(%q) = %v, %v; want %v", tc.key, form, err, tc.form)
		}
		tok, b64, err := AppendKey(nil, tc.key)
		if err != nil {
			t.Fatal(err)
		}
		if b64 != (tc.form != KeyPlain) || len(tok) > MaxKeyLen || !plainKey(string(tok)) {
			t.Errorf("AppendKey(%q) = %q, b64=%v", tc.key, tok, b64)
		}
		if tc.form == KeyBase64 {
			raw, err := base64.StdEncoding.DecodeString(string(tok))
			if err != nil || string(raw) != tc.key {
				t.Errorf("base64 form of %q does not decode to it", tc.key)
			}
		}
	}
	if _, _, err := AppendKey(nil, ""); !errors.Is(err, store.ErrInvalidKey) || !strings.Contains(err.Error(), "empty key") {
		t.Errorf("empty key: %v", err)
	}
}

// FuzzAppendKey checks that every non-empty key has a wire token memcached
// accepts, and that two different keys never share one.
func FuzzAppendKey(f *testing.F) {
	f.Add("a", "b")
	f.Add("a b", "a b ")
	f.Add(strings.Repeat("x", 300), strings.Repeat("x", 301))
	f.Add("\x00"+strings.Repeat("y", 10), strings.Repeat("y", 10))
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		t1, b1, err1 := AppendKey(nil, k1)
		t2, b2, err2 := AppendKey(nil, k2)
		if (err1 != nil) != (k1 == "") || (err2 != nil) != (k2 == "") {
			t.Fatalf("errors %v %v", err1, err2)
		}
		if err1 != nil || err2 != nil {
			return
		}
		for _, tok := range [][]byte{t1, t2} {
			if len(tok) == 0 || len(tok) > MaxKeyLen || !plainKey(string(tok)) {
				t.Fatalf("bad wire token %q", tok)
			}
		}
		same := b1 == b2 && string(t1) == string(t2)
		// A base64 token and a plain token name the same server key when
		// the plain key equals the decoded bytes: that needs k1 == k2.
		if b1 != b2 {
			plain, enc := string(t1), t2
			if b1 {
				plain, enc = string(t2), t1
			}
			if raw, err := base64.StdEncoding.DecodeString(string(enc)); err == nil && string(raw) == plain {
				same = true
			}
		}
		if same != (k1 == k2) {
			t.Fatalf("keys %q and %q: same server key = %v", k1, k2, same)
		}
	})
}
