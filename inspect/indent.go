package inspect

// Indent returns the compact JSON text src (a Report's Value) indented
// for a person, as json.Indent would with prefix and indent, but never
// longer than max bytes: a value nested deep and wide multiplies its
// size by its indentation (a 1 MiB value 62 levels deep indents to about
// 100 MiB), so the text stops at max and cut reports it. The cost is
// O(max), whatever src holds. src that is not compact JSON is returned
// as it is, cut at max.
func Indent(src []byte, prefix, indent string, max int) (text string, cut bool) {
	if max < 0 {
		max = 0
	}
	out := make([]byte, 0, min(max, 2*len(src)+64))
	depth := 0
	inString, escaped := false, false
	newline := func(d int) bool {
		out = append(out, '\n')
		out = append(out, prefix...)
		for range d {
			out = append(out, indent...)
			if len(out) > max {
				return false
			}
		}
		return len(out) <= max
	}
	for i := 0; i < len(src); i++ {
		if len(out) >= max {
			return string(out[:max]), true
		}
		c := src[i]
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inString = true
			out = append(out, c)
		case '{', '[':
			out = append(out, c)
			// An empty object or array stays on its line.
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				out = append(out, src[i+1])
				i++
				continue
			}
			depth++
			if !newline(depth) {
				return string(out[:max]), true
			}
		case '}', ']':
			depth--
			if !newline(max0(depth)) {
				return string(out[:max]), true
			}
			out = append(out, c)
		case ',':
			out = append(out, c)
			if !newline(max0(depth)) {
				return string(out[:max]), true
			}
		case ':':
			out = append(out, ':', ' ')
		default:
			out = append(out, c)
		}
	}
	if len(out) > max {
		return string(out[:max]), true
	}
	return string(out), false
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}
