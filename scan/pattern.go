package scan

import (
	"strings"
)

// collapseMin is how many patterns must differ in one part only before
// that part becomes "*" (user:alice:items, user:bob:items, ...).
const collapseMin = 20

// maxPatterns bounds the patterns kept during a walk; above it the
// patterns are collapsed early.
const maxPatterns = 5000

// separatorOf returns the separator to split key at: sep when given, else
// the first of ":", "/", "|", "." found in the key.
func separatorOf(key, sep string) string {
	if sep != "" {
		return sep
	}
	for _, s := range []string{":", "/", "|", "."} {
		if strings.Contains(key, s) {
			return s
		}
	}
	return ""
}

// patternOf replaces every part of key that holds a digit with "*":
// user:42:items -> user:*:items.
func patternOf(key, sep string) string {
	sep = separatorOf(key, sep)
	if sep == "" {
		if hasDigit(key) {
			return "*"
		}
		return key
	}
	parts := strings.Split(key, sep)
	changed := false
	for i, p := range parts {
		if hasDigit(p) && p != "*" {
			parts[i] = "*"
			changed = true
		}
	}
	if !changed {
		return key
	}
	return strings.Join(parts, sep)
}

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			return true
		}
	}
	return false
}

// collapse returns, for each pattern in pats, the pattern it folds into:
// when at least collapseMin patterns with the same separator and part
// count differ only in part i, that part becomes "*" in all of them.
// Patterns that do not fold map to themselves. One pass per part
// position, from the last part to the first, so user:alice:items and
// user:bob:cart fold as user:*:items and user:*:cart when each group is
// large enough on its own.
func collapse(pats []string, sep string) map[string]string {
	to := make(map[string]string, len(pats))
	cur := make(map[string]string, len(pats)) // original -> current form
	for _, p := range pats {
		cur[p] = p
	}
	for pos := 0; pos < 16; pos++ {
		groups := map[string][]string{}
		for orig, p := range cur {
			s := separatorOf(p, sep)
			if s == "" {
				continue
			}
			parts := strings.Split(p, s)
			if pos >= len(parts) || parts[pos] == "*" {
				continue
			}
			parts[pos] = "*"
			groups[strings.Join(parts, s)] = append(groups[strings.Join(parts, s)], orig)
		}
		for folded, origs := range groups {
			distinct := map[string]bool{}
			for _, o := range origs {
				distinct[cur[o]] = true
			}
			if len(distinct) >= collapseMin {
				for _, o := range origs {
					cur[o] = folded
				}
			}
		}
	}
	for o, p := range cur {
		to[o] = p
	}
	return to
}
