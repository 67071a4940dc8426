// Package redact removes secrets from text a person or a log may see: the
// password of a URL, the value of a password flag.
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces a secret.
const Mask = "xxxxx"

// URL returns s with the password of its user info replaced by Mask. A
// string that does not parse as a URL is still redacted: everything
// between "://" and the last "@" of the authority is replaced, so a
// malformed URL never leaks its password through an error message.
func URL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" {
		if u.User == nil {
			return s
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
		return u.String()
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		if strings.Contains(s, "@") {
			return Mask + s[strings.LastIndexByte(s, '@'):]
		}
		return s
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		return scheme + "://" + Mask + rest[at:]
	}
	return s
}

// Secret returns Mask for a non-empty secret and "" for an empty one, for
// printing whether a password was given without printing it.
func Secret(s string) string {
	if s == "" {
		return ""
	}
	return Mask
}
