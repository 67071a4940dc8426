package main

import (
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kuracache/kura/internal/redact"
	"github.com/kuracache/kura/internal/vis"
)

// mainErrorLine is the line main prints for err: errorLine with every
// secret the command line carries replaced by redact.Mask, whatever path
// the error took (a URL mistaken for a file name, a library message that
// quotes its input). Secrets are found with the rule the URL parser uses
// (redact.SplitUserinfo), so what a client would be given as a password
// is what is hidden.
func mainErrorLine(cmd *cobra.Command, err error, args []string) string {
	// A server's error text (a Lua error_reply, a proxy's message) may
	// carry screen-clear, hyperlink and bell sequences: escaped, never
	// obeyed.
	return vis.Escape(scrubSecrets(errorLine(cmd, err), args))
}

// schemeish matches the start of a mistyped URL: a scheme and the
// colons and slashes after it.
var schemeish = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*(:/*|//)`)

// secretFlags take a secret as their value.
var secretFlags = map[string]bool{"-a": true, "--password": true, "--token": true, "--pass": true, "--requirepass": true}

// secretsIn returns the secrets of a command line: the user info of
// anything URL-like (and its password, escaped and not) and the values of
// password and token flags.
func secretsIn(args []string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 3 { // shorter strings would mask ordinary words
			out = append(out, s)
		}
	}
	for i, a := range args {
		if secretFlags[a] && i+1 < len(args) {
			add(args[i+1])
			continue
		}
		if val, next, ok := shortPassword(a); ok {
			if next && i+1 < len(args) {
				add(args[i+1])
			}
			add(val)
			continue
		}
		v := a
		if strings.HasPrefix(a, "-") {
			name, val, ok := strings.Cut(a, "=")
			switch {
			case ok && secretFlags[name]:
				add(val)
				continue
			case ok:
				v = val
			case strings.HasPrefix(a, "-a") && len(a) > 2 && !strings.HasPrefix(a, "--"):
				add(a[2:])
				continue
			}
		}
		rest := v
		if _, r, ok := strings.Cut(v, "://"); ok {
			rest = r
		}
		userinfo, _, ok := redact.SplitUserinfo(rest)
		if !ok {
			continue
		}
		// A mistyped URL ("redis:/:pw@h", "redis//:pw@h"): drop the
		// scheme-ish prefix, not more (the password may hold "/").
		if !strings.Contains(v, "://") {
			userinfo = schemeish.ReplaceAllString(userinfo, "")
		}
		add(userinfo)
		user, pw, hasPass := strings.Cut(userinfo, ":")
		if !hasPass {
			pw = user
		}
		add(pw)
		if u, err := url.PathUnescape(pw); err == nil {
			add(u)
		}
	}
	// Longest first, so that a password inside a user info is not left
	// half-masked.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// scrubSecrets replaces every secret of args in line by redact.Mask.
func scrubSecrets(line string, args []string) string {
	for _, s := range secretsIn(args) {
		line = strings.ReplaceAll(line, s, redact.Mask)
	}
	return line
}

// shortPassword reads -a (the password, as redis-benchmark spells it) in
// a cluster of short flags: "-qa PW", "-qaPW", "-aPW". It returns the
// password in the argument (empty when it is the next one: next), and ok
// when the argument holds -a. The flags before "a" are letters (boolean
// flags such as -q); a flag that takes a value ends a cluster, so "-ua"
// is -u's value, not -a.
func shortPassword(a string) (val string, next, ok bool) {
	if len(a) < 2 || a[0] != '-' || a[1] == '-' {
		return "", false, false
	}
	for i := 1; i < len(a); i++ {
		c := a[i]
		switch {
		case c == 'a':
			return a[i+1:], i+1 == len(a), true
		case strings.IndexByte(boolShorthands, c) < 0:
			return "", false, false
		}
	}
	return "", false, false
}

// boolShorthands are the one-letter flags of kura's commands that take no
// value, so that they may stand before -a in a cluster.
const boolShorthands = "qh"
