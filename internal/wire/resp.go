// Package wire parses the protocol answers kura reads by hand, once each:
// RESP replies, Redis INFO, CLUSTER SLOTS and memcached's `stats`. The
// load generator's hot-path reply reader stays in package loadgen (it
// counts, it does not build values); the rest of the module reads these
// answers here.
package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Error is an error reply from Redis ("-ERR ..."), without the minus.
type Error string

func (e Error) Error() string { return string(e) }

// Code returns the error code, such as "MOVED" or "WRONGPASS".
func (e Error) Code() string {
	p, _, _ := strings.Cut(string(e), " ")
	return p
}

// ErrProtocol is matched by the errors of an answer that breaks its
// protocol (a line without CRLF, a bad length, an unknown reply type).
var ErrProtocol = errors.New("kura: protocol error")

// AppendCommand appends args as a RESP array of bulk strings.
func AppendCommand(dst []byte, args ...string) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = AppendBulkHeader(dst, len(a))
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// AppendBulkHeader appends the header of a bulk string of n bytes.
func AppendBulkHeader(dst []byte, n int) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// ReadLine returns one protocol line (RESP or memcached's) without its
// CRLF. The slice is valid until the next read.
func ReadLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, r.Size())
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line without CRLF: %q", ErrProtocol, line)
	}
	return line[:len(line)-2], nil
}

// Atoi parses a decimal integer (with an optional minus) without
// allocating.
func Atoi(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' || n > (1<<62)/10 {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// Bounds on what readValue accepts from a server, so that a hostile or
// broken one cannot make the client allocate gigabytes or recurse without
// end. The control replies it reads (INFO, CLUSTER SLOTS) are kilobytes
// and three levels deep.
const (
	maxControlBulk  = 64 << 20
	maxControlDepth = 16
)

// ReadValue reads one full RESP reply for a control path: strings,
// integers (int64), nil, arrays ([]any) and errors (returned as Error; an
// array holding error replies is returned with nil in their places and
// the first of them). It is not for a hot path: it allocates.
func ReadValue(r *bufio.Reader) (any, error) {
	return readValueDepth(r, 0)
}

func readValueDepth(r *bufio.Reader, depth int) (any, error) {
	line, err := ReadLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, fmt.Errorf("%w: empty line", ErrProtocol)
	}
	switch line[0] {
	case '+':
		return string(line[1:]), nil
	case '-':
		return nil, Error(line[1:])
	case ':':
		n, err := strconv.ParseInt(string(line[1:]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: bad integer %q", ErrProtocol, line)
		}
		return n, nil
	case '$':
		n, ok := Atoi(line[1:])
		if !ok || n > maxControlBulk {
			return nil, fmt.Errorf("%w: bad bulk length %q", ErrProtocol, line)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return nil, fmt.Errorf("%w: bulk string of %d bytes not followed by CRLF", ErrProtocol, n)
		}
		return string(buf[:n]), nil
	case '*':
		n, ok := Atoi(line[1:])
		if !ok || depth >= maxControlDepth {
			return nil, fmt.Errorf("%w: bad array %q", ErrProtocol, line)
		}
		if n < 0 {
			return nil, nil
		}
		// The length is the server's word: grow as elements arrive.
		out := make([]any, 0, min(n, 64))
		var firstErr error
		for range n {
			v, err := readValueDepth(r, depth+1)
			var re Error
			if errors.As(err, &re) {
				firstErr = firstOf(firstErr, err)
				out = append(out, nil)
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, firstErr
	}
	return nil, fmt.Errorf("%w: unexpected reply %q", ErrProtocol, line)
}

func firstOf(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
