package ring

import (
	"fmt"
	"strings"
)

func errHashTag(t string) error {
	return fmt.Errorf("kura: ring hash tag %q must be two bytes, such as \"{}\"", t)
}

// tagBetween returns the bytes between the first open and the next close
// after it when there are any, else key (Redis Cluster's rule, go-redis's
// and twemproxy's).
func tagBetween(key string, open, close byte) string {
	if s := strings.IndexByte(key, open); s >= 0 {
		if e := strings.IndexByte(key[s+1:], close); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// rubyTag is redis-rb's default key_tag, key[/^\{(.+?)\}/, 1]: a '{' at the
// start of the key or of any line in it (Ruby's ^), then the shortest run
// of at least one byte other than '\n' up to a '}'. ok is false when the
// pattern does not match.
func rubyTag(key string) (string, bool) {
	for start := 0; start < len(key); {
		if key[start] == '{' {
			// .+? : at least one non-newline byte, then the first '}'.
			for j := start + 2; j < len(key); j++ {
				if key[j-1] == '\n' {
					break
				}
				if key[j] == '}' {
					return key[start+1 : j], true
				}
			}
		}
		nl := strings.IndexByte(key[start:], '\n')
		if nl < 0 {
			break
		}
		start += nl + 1
	}
	return "", false
}
