package meta

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kuracache/kura/store"
)

// Status is the return code of a meta response.
type Status uint8

// Response codes. The three error kinds are the classic error lines, which
// never carry flags (not even O), so they are matched to requests by
// position.
const (
	StatusNone        Status = iota
	HD                       // success, no value
	VA                       // success with a value block
	EN                       // miss (mg)
	NF                       // not found (md, ma, ms with CAS)
	NS                       // not stored (ms add/replace, ma after a miss)
	EX                       // exists: CAS mismatch
	MN                       // answer of mn
	StatusError              // ERROR: unknown command
	StatusClientError        // CLIENT_ERROR: malformed request
	StatusServerError        // SERVER_ERROR: the server could not carry it out
)

var statusNames = [...]string{"none", "HD", "VA", "EN", "NF", "NS", "EX", "MN", "ERROR", "CLIENT_ERROR", "SERVER_ERROR"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// IsError reports whether s is one of the error lines.
func (s Status) IsError() bool { return s >= StatusError }

// Response is one parsed meta response. Only the fields whose flags were
// requested are meaningful.
type Response struct {
	Status Status
	// Value is the data block of VA. It is freshly allocated for each
	// response, so the caller may keep it.
	Value []byte
	// Opaque is the O token echoed back, 0 when absent.
	Opaque uint32
	// Message is the text after an error code.
	Message string

	CAS         uint64 // c
	TTL         int64  // t: -1 means no expiry
	ClientFlags uint32 // f
	Size        int64  // s
	Key         string // k (base64 when Base64Key)
	Base64Key   bool   // b in the response
	Hit         bool   // h
	LastAccess  int64  // l
	Won         bool   // W: this caller won the recache
	Stale       bool   // X: the item is stale
	AlreadyWon  bool   // Z: someone else won the recache
}

// Placeholder reports an empty item that a lease created or an
// invalidation emptied: mg with N on a miss creates one (its answer is
// "VA 0 W", later readers get "VA 0 Z"). It holds no value of the
// caller's, so readers count it as a miss.
func (r *Response) Placeholder() bool {
	return r.Status == VA && len(r.Value) == 0 && (r.Won || r.AlreadyWon || r.Stale)
}

// Err returns the response as an error for the error statuses, nil
// otherwise.
func (r *Response) Err() error {
	if !r.Status.IsError() {
		return nil
	}
	return &ServerError{Status: r.Status, Message: r.Message}
}

// ServerError is an error line sent by memcached.
type ServerError struct {
	Status  Status
	Message string
}

func (e *ServerError) Error() string {
	if e.Message == "" {
		return "memcached answered " + e.Status.String()
	}
	return "memcached answered " + e.Status.String() + " " + e.Message
}

// Is makes the item-size refusals match store.ErrValueTooLarge.
func (e *ServerError) Is(target error) bool {
	return target == store.ErrValueTooLarge && e.Status == StatusServerError &&
		strings.Contains(e.Message, "too large")
}

// ErrProtocol reports a response that does not follow the meta protocol.
// The connection it came from is discarded.
var ErrProtocol = errors.New("meta: protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// maxLine bounds a response line. Real ones are short (a code and a few
// flags); a longer one means the stream is not a meta response stream.
const maxLine = 8 << 10

// ParseHeader parses one response line (without "\r\n") into r and returns
// the length of the data block that follows it (VA only; -1 otherwise).
// It resets every field of r first.
func ParseHeader(line []byte, r *Response) (int, error) {
	*r = Response{}
	if len(line) > maxLine {
		return -1, protoErr("response line of %d bytes", len(line))
	}
	code, rest, _ := bytes.Cut(line, []byte{' '})
	switch string(code) {
	case "HD":
		r.Status = HD
	case "VA":
		r.Status = VA
	case "EN":
		r.Status = EN
	case "NF":
		r.Status = NF
	case "NS":
		r.Status = NS
	case "EX":
		r.Status = EX
	case "MN":
		r.Status = MN
	case "ERROR":
		r.Status = StatusError
		r.Message = string(rest)
		return -1, nil
	case "CLIENT_ERROR":
		r.Status = StatusClientError
		r.Message = string(rest)
		return -1, nil
	case "SERVER_ERROR":
		r.Status = StatusServerError
		r.Message = string(rest)
		return -1, nil
	default:
		return -1, protoErr("unknown response %q", clip(line))
	}
	vlen := -1
	if r.Status == VA {
		tok, more, _ := bytes.Cut(rest, []byte{' '})
		n, err := strconv.ParseUint(string(tok), 10, 31)
		if err != nil {
			return -1, protoErr("bad VA length in %q", clip(line))
		}
		vlen = int(n)
		rest = more
	}
	for len(rest) > 0 {
		var tok []byte
		tok, rest, _ = bytes.Cut(rest, []byte{' '})
		if len(tok) == 0 {
			continue
		}
		if err := parseFlag(tok, r); err != nil {
			return -1, protoErr("%v in %q", err, clip(line))
		}
	}
	return vlen, nil
}

// maxTTLSeconds is the longest TTL a time.Duration holds.
const maxTTLSeconds = int64(math.MaxInt64 / int64(time.Second))

// errBadNumber marks a flag whose number parses but cannot be true: a
// negative size, a TTL below -1 or past maxTTLSeconds. Callers turn sizes
// into lengths and TTLs into durations, so such a value from a corrupt or
// hostile stream is refused here, as an unparsable one is.
var errBadNumber = errors.New("meta: number out of range")

func parseFlag(tok []byte, r *Response) error {
	// The numbers are parsed from string(arg) at each call, which the
	// compiler converts without allocating (strconv keeps no reference to
	// it); only the key, which r keeps, is copied. An answer to a quiet mg
	// thus allocates its value and nothing else, whichever flags it asked
	// for (TestParseHeaderAllocs, and store/memcache's TestGetManyAllocs).
	arg := tok[1:]
	var err error
	switch tok[0] {
	case 'O':
		var n uint64
		n, err = strconv.ParseUint(string(arg), 10, 32)
		r.Opaque = uint32(n)
	case 'c':
		r.CAS, err = strconv.ParseUint(string(arg), 10, 64)
	case 't':
		// -1 is "no expiry"; anything below, or above what a
		// time.Duration holds, is not a TTL a server sends.
		r.TTL, err = strconv.ParseInt(string(arg), 10, 64)
		if err == nil && (r.TTL < -1 || r.TTL > maxTTLSeconds) {
			err = errBadNumber
		}
	case 'f':
		var n uint64
		n, err = strconv.ParseUint(string(arg), 10, 32)
		r.ClientFlags = uint32(n)
	case 's':
		r.Size, err = strconv.ParseInt(string(arg), 10, 64)
		if err == nil && r.Size < 0 {
			err = errBadNumber
		}
	case 'k':
		r.Key = string(arg)
	case 'b':
		r.Base64Key = true
	case 'h':
		r.Hit = string(arg) == "1"
	case 'l':
		r.LastAccess, err = strconv.ParseInt(string(arg), 10, 64)
		if err == nil && r.LastAccess < 0 {
			err = errBadNumber
		}
	case 'W':
		r.Won = true
	case 'X':
		r.Stale = true
	case 'Z':
		r.AlreadyWon = true
	default:
		// Flags this client did not ask for (a newer server, a proxy's
		// P/L hints) are skipped, not fatal.
	}
	if err != nil {
		return fmt.Errorf("bad flag %q", clip(tok))
	}
	return nil
}

func clip(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// ReadResponse reads one response (line and data block) from br into r.
// maxValue bounds the data block; a larger one is a protocol error, so a
// hostile or corrupt stream cannot make the client allocate without bound.
// Large blocks are read in pieces, so memory grows only with bytes actually
// received.
func ReadResponse(br *bufio.Reader, r *Response, maxValue int) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return protoErr("response line longer than %d bytes", br.Size())
		}
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return protoErr("response line %q not ended by CRLF", clip(line))
	}
	vlen, err := ParseHeader(line[:len(line)-2], r)
	if err != nil {
		return err
	}
	if vlen < 0 {
		return nil
	}
	if vlen > maxValue {
		return protoErr("value of %d bytes exceeds the %d-byte limit", vlen, maxValue)
	}
	const step = 1 << 20
	var v []byte
	if vlen+2 <= step {
		v = make([]byte, vlen+2)
		if _, err := io.ReadFull(br, v); err != nil {
			return unexpected(err)
		}
	} else {
		v = make([]byte, 0, step)
		for len(v) < vlen+2 {
			n := min(vlen+2-len(v), max(len(v), step))
			v = append(v, make([]byte, n)...)
			if _, err := io.ReadFull(br, v[len(v)-n:]); err != nil {
				return unexpected(err)
			}
		}
	}
	if v[vlen] != '\r' || v[vlen+1] != '\n' {
		return protoErr("data block of %d bytes not ended by CRLF", vlen)
	}
	r.Value = v[:vlen:vlen]
	return nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
