package main

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/kuracache/kura/internal/vis"
)

// safeJSON returns JSON text b with every character a terminal would
// obey or hide written as a \u escape: encoding/json escapes C0
// controls, but C1 controls (U+009B is CSI), bidirectional overrides,
// line separators and zero-width characters from a cache or a server
// pass through raw. Such characters only occur inside JSON strings, so
// the result is the same JSON value. Bytes that are not UTF-8 become
// U+FFFD, as encoding/json writes them.
func safeJSON(b []byte) []byte {
	if !vis.Unsafe(string(b)) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		i += n
		switch {
		case r == utf8.RuneError && n <= 1:
			out = append(out, `\ufffd`...)
		case vis.Unsafe(string(r)):
			if r > 0xffff {
				r1, r2 := utf16Pair(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		default:
			out = append(out, b[i-n:i]...)
		}
	}
	return out
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// writeJSON writes what write writes, made safe for a terminal (safeJSON).
func writeJSON(w io.Writer, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	_, err := w.Write(safeJSON(buf.Bytes()))
	return err
}
