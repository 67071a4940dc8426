package codec

import "fmt"

// costJSONValue is what decoding one JSON value into any allocates at
// most, measured: an interface slot, a boxed number, and the slice or map
// growth behind it (a 4M-element array of numbers allocated 86 bytes per
// element).
const costJSONValue = 96

// checkJSON refuses a JSON payload whose decode into any would allocate
// more than limit: every value (counted at the separator or bracket that
// starts it) costs costJSONValue, string bytes their length. Decode
// applies it to compressed JSON payloads, whose decode is otherwise bound
// only by the payload: a zstd-compressed array of millions of small
// numbers made 25 KB under a key cost a reader 194 MB.
func checkJSON(b []byte, limit uint64) error {
	est := uint64(len(b))
	inStr, esc := false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case ',', ':', '[', '{':
			est += costJSONValue
		}
	}
	if est > limit {
		return fmt.Errorf("%w: decoding this JSON would allocate more than %d bytes", ErrBomb, limit)
	}
	return nil
}
