// Package redact removes secrets from text a person or a log may see: the
// password of a URL, the value of a password flag.
package redact

import "strings"

// Mask replaces a secret.
const Mask = "xxxxx"

// SplitUserinfo splits the part of a URL after "scheme://" at its last
// "@": the user info before it (which may hold any byte, "/", "#", "?"
// and spaces included) and the hosts after it. It is the one rule both
// the store URL parser (storeurl) and URL use, so what the client is
// given as a password is exactly what redaction hides.
//
// An "@" in the query of a URL without user info (a
// sentinel_password= that holds one) is not the user info's end: the
// search stops at the first "?" or "&" that starts a parameter a store
// URL takes.
func SplitUserinfo(rest string) (userinfo, hosts string, ok bool) {
	at := strings.LastIndexByte(rest[:queryStart(rest)], '@')
	if at < 0 {
		return "", rest, false
	}
	return rest[:at], rest[at+1:], true
}

// params are the query parameters store URLs take.
var params = []string{"sentinel_password=", "sentinel_user=", "addr=", "ring=", "weights=", "names=", "hashtag="}

// queryStart returns the index of the first "?" or "&" followed by a
// parameter a store URL takes, or len(s).
func queryStart(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] != '?' && s[i] != '&' {
			continue
		}
		for _, p := range params {
			if strings.HasPrefix(s[i+1:], p) {
				return i
			}
		}
	}
	return len(s)
}

// URL returns s with the secret of its user info replaced by Mask:
// "redis://user:xxxxx@host" for user and password, "redis://xxxxx@host"
// for the "redis://password@host" shorthand (kura sends it as the
// password). A string that is not a well-formed URL is still redacted:
// without "://", everything before its last "@" is replaced, so a
// mistyped URL never leaks its password through an error message.
//
// The value of a query parameter whose name holds "password"
// (sentinel_password=) is masked too.
func URL(s string) string { return query(userinfo(s)) }

// query masks the values of the parameters named *password*. It does not
// need a "?": a mistyped URL ("redis+sentinel://h&sentinel_password=x")
// puts the parameter in the host part, and it is masked there too. A
// parameter runs from a "?" or "&" to the next one; a ";" does not end
// it (Go's query parser refuses it as a separator, and a password may
// hold one).
func query(s string) string {
	var b strings.Builder
	start := 0 // start of the current parameter
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '?' && s[i] != '&' {
			continue
		}
		p := s[start:i]
		if k, _, ok := strings.Cut(p, "="); ok && strings.Contains(strings.ToLower(k), "password") {
			// The value runs to the next parameter a store URL takes: a
			// password may hold "?" and "&" unescaped.
			end := len(s)
			if j := queryStart(s[i:]); j < len(s)-i {
				end = i + j
			}
			b.WriteString(k + "=" + Mask)
			i = end
		} else {
			b.WriteString(p)
		}
		if i < len(s) {
			b.WriteByte(s[i])
		}
		start = i + 1
	}
	return b.String()
}

func userinfo(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		if at := strings.LastIndexByte(s, '@'); at >= 0 {
			return Mask + s[at:]
		}
		return s
	}
	userinfo, hosts, ok := SplitUserinfo(rest)
	if !ok {
		return scheme + "://" + HostList(rest)
	}
	user, _, hasPass := strings.Cut(userinfo, ":")
	if hasPass && user != "" && !strings.ContainsFunc(user, func(r rune) bool { return r <= ' ' || strings.ContainsRune("/?#%@", r) }) {
		return scheme + "://" + user + ":" + Mask + "@" + hosts
	}
	return scheme + "://" + Mask + "@" + hosts
}

// HostList masks what stands where a port goes in a host list (the part
// of a URL after "scheme://" without "@", or one host:port), when it is
// not a port: a URL whose host was left out
// ("redis://:password", "redis://user:password", "redis://:pw/0") puts
// its password there. A port is digits, so nothing a dialer could use is
// hidden, except digits after an empty host (see below); from the first
// such host on, the rest of the string is masked, since a password may
// hold "/", "?" or ",". An IPv6 address without
// brackets (two colons or more, hex digits) is kept, as a person wrote it.
func HostList(rest string) string {
	for i := 0; i < len(rest); {
		end := i + strings.IndexAny(rest[i:]+",", ",/?#")
		h := rest[i:end]
		colon := strings.IndexByte(h, ':')
		if strings.HasPrefix(h, "[") && !strings.Contains(h, "]") && ipv6(h[1:]) {
			colon = -1 // an IPv6 address whose bracket is not closed: no secret
		} else if strings.HasPrefix(h, "[") {
			if b := strings.IndexByte(h, ']'); b >= 0 {
				colon = -1 // the port's colon is after the bracket
				if c := strings.IndexByte(h[b+1:], ':'); c >= 0 {
					colon = b + 1 + c
				}
			}
		}
		// No host before the colon: "redis://:1234" is a password-only
		// URL that lost its "@host" at least as often as a port without
		// a host, so what follows is hidden even when it is all digits.
		if colon >= 0 && (colon == 0 || !digits(h[colon+1:])) && !ipv6(h) {
			return rest[:i+colon+1] + Mask
		}
		if end >= len(rest) || rest[end] != ',' {
			break
		}
		i = end + 1
	}
	return rest
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ipv6 reports whether h reads as an IPv6 address written without
// brackets: two colons or more and hex digits only.
func ipv6(h string) bool {
	if strings.Count(h, ":") < 2 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c != ':' && c != '.' && (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// Secret returns Mask for a non-empty secret and "" for an empty one, for
// printing whether a password was given without printing it.
func Secret(s string) string {
	if s == "" {
		return ""
	}
	return Mask
}
