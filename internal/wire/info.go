package wire

import (
	"strconv"
	"strings"
)

// ParseInfo turns a Redis INFO reply into a map of field to value
// (section headers and blank lines skipped).
func ParseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// CommandCalls returns the calls= count of every command in a parsed
// INFO commandstats section, by command name ("get", "memory|usage").
func CommandCalls(info map[string]string) map[string]int64 {
	calls := map[string]int64{}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				calls[name], _ = strconv.ParseInt(n, 10, 64)
			}
		}
	}
	return calls
}
