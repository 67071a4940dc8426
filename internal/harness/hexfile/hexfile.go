// Package hexfile reads the hand-written hex files of test corpora
// (testdata/hostile): hex bytes in any spacing, "#" starting a comment.
package hexfile

import (
	"encoding/hex"
	"os"
	"strings"
)

// Parse decodes the hex in text, ignoring whitespace and comments.
func Parse(text string) ([]byte, error) {
	var h strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		h.WriteString(strings.Join(strings.Fields(line), ""))
	}
	return hex.DecodeString(h.String())
}

// Read parses the file at path.
func Read(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(string(b))
}
