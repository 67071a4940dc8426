package wire

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
)

// ReplyError is an error line a memcached server sent instead of an
// answer (ERROR, CLIENT_ERROR ..., SERVER_ERROR ...).
type ReplyError struct {
	Line string
}

func (e *ReplyError) Error() string { return e.Line }

// ReadStats reads a memcached `stats` answer: STAT lines up to END, as a
// map of name to value. An error line gives a *ReplyError; any other line
// an error matching ErrProtocol.
func ReadStats(r *bufio.Reader) (map[string]string, error) {
	m := map[string]string{}
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				err = fmt.Errorf("%w: stats line longer than %d bytes", ErrProtocol, r.Size())
			}
			return nil, err
		}
		s := strings.TrimRight(string(line), "\r\n")
		switch {
		case s == "END":
			return m, nil
		case strings.HasPrefix(s, "STAT "):
			k, v, _ := strings.Cut(s[len("STAT "):], " ")
			m[k] = v
		case s == "ERROR" || strings.HasPrefix(s, "ERROR ") || strings.HasPrefix(s, "CLIENT_ERROR") || strings.HasPrefix(s, "SERVER_ERROR"):
			return nil, &ReplyError{Line: s}
		default:
			return nil, fmt.Errorf("%w: stats answered %q", ErrProtocol, s)
		}
	}
}
