package loadgen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// respError is an error reply from Redis ("-ERR ...").
type respError string

func (e respError) Error() string { return string(e) }

// prefix returns the error code, such as "MOVED" or "WRONGPASS".
func (e respError) prefix() string {
	p, _, _ := strings.Cut(string(e), " ")
	return p
}

var errProtocol = errors.New("kura: protocol error")

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(dst []byte, args ...string) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = appendBulkHeader(dst, len(a))
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

func appendBulkHeader(dst []byte, n int) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// readLine returns one protocol line without its CRLF. The slice is valid
// until the next read.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", errProtocol, r.Size())
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line without CRLF: %q", errProtocol, line)
	}
	return line[:len(line)-2], nil
}

// atoi parses a decimal integer (with an optional minus) without
// allocating.
func atoi(b []byte) (int, bool) {
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

// readValue reads one full RESP reply for the control path: strings,
// integers, nil, arrays ([]any) and errors (returned as respError).
func readValue(r *bufio.Reader) (any, error) {
	return readValueDepth(r, 0)
}

func readValueDepth(r *bufio.Reader, depth int) (any, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, fmt.Errorf("%w: empty line", errProtocol)
	}
	switch line[0] {
	case '+':
		return string(line[1:]), nil
	case '-':
		return nil, respError(line[1:])
	case ':':
		n, err := strconv.ParseInt(string(line[1:]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: bad integer %q", errProtocol, line)
		}
		return n, nil
	case '$':
		n, ok := atoi(line[1:])
		if !ok || n > maxControlBulk {
			return nil, fmt.Errorf("%w: bad bulk length %q", errProtocol, line)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return nil, fmt.Errorf("%w: bulk string of %d bytes not followed by CRLF", errProtocol, n)
		}
		return string(buf[:n]), nil
	case '*':
		n, ok := atoi(line[1:])
		if !ok || depth >= maxControlDepth {
			return nil, fmt.Errorf("%w: bad array %q", errProtocol, line)
		}
		if n < 0 {
			return nil, nil
		}
		// The length is the server's word: grow as elements arrive.
		out := make([]any, 0, min(n, 64))
		var firstErr error
		for range n {
			v, err := readValueDepth(r, depth+1)
			var re respError
			if errors.As(err, &re) {
				firstErr = cmpErr(firstErr, err)
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
	return nil, fmt.Errorf("%w: unexpected reply %q", errProtocol, line)
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// redisProto encodes and reads the load commands. The headers that do not
// change between requests (command name, key length) are built once.
type redisProto struct {
	s        *settings
	keyLen   int
	getHdr   []byte // *2 $3 GET $keylen
	setHdr   []byte // *3|*5 $3 SET $keylen
	ttlTail  []byte // $2 EX $n n
	hsetHdr  []byte // *4 $4 HSET $keylen
	hsetFld  []byte // $2 f1 $
	mgetHdr  []byte
	msetHdr  []byte
	keyHdr   []byte // $keylen\r\n
	template [][]tmplPiece
}

type tmplPiece struct {
	lit  string
	kind byte // 0 literal, 'k' key, 'd' data
}

func newRedisProto(s *settings) *redisProto {
	p := &redisProto{s: s, keyLen: len(s.KeyPrefix) + keyDigits}
	p.keyHdr = appendBulkHeader(nil, p.keyLen)
	hdr := func(argc int, name string) []byte {
		b := []byte{'*'}
		b = strconv.AppendInt(b, int64(argc), 10)
		b = append(b, '\r', '\n')
		b = appendBulkHeader(b, len(name))
		b = append(b, name...)
		b = append(b, '\r', '\n')
		return append(b, p.keyHdr...)
	}
	p.getHdr = hdr(2, "GET")
	if s.TTL > 0 {
		p.setHdr = hdr(5, "SET")
		p.ttlTail = appendCommand(nil, "EX", strconv.FormatInt(int64(s.TTL.Seconds()), 10))
		p.ttlTail = p.ttlTail[len("*2\r\n"):]
	} else {
		p.setHdr = hdr(3, "SET")
	}
	p.hsetHdr = hdr(4, "HSET")
	p.hsetFld = []byte("$2\r\nf1\r\n")
	p.mgetHdr = appendCommand(nil, "MGET")[len("*2\r\n"):]
	p.msetHdr = appendCommand(nil, "MSET")[len("*2\r\n"):]
	for _, a := range s.Template {
		var pieces []tmplPiece
		for a != "" {
			ki := strings.Index(a, "__key__")
			di := strings.Index(a, "__data__")
			switch {
			case ki < 0 && di < 0:
				pieces = append(pieces, tmplPiece{lit: a})
				a = ""
			case ki >= 0 && (di < 0 || ki < di):
				if ki > 0 {
					pieces = append(pieces, tmplPiece{lit: a[:ki]})
				}
				pieces = append(pieces, tmplPiece{kind: 'k'})
				a = a[ki+len("__key__"):]
			default:
				if di > 0 {
					pieces = append(pieces, tmplPiece{lit: a[:di]})
				}
				pieces = append(pieces, tmplPiece{kind: 'd'})
				a = a[di+len("__data__"):]
			}
		}
		if len(pieces) == 0 {
			pieces = []tmplPiece{{lit: ""}}
		}
		p.template = append(p.template, pieces)
	}
	return p
}

func (p *redisProto) appendKey(dst []byte, k uint64) []byte {
	dst = appendKey(dst, p.s.KeyPrefix, k)
	return append(dst, '\r', '\n')
}

func (p *redisProto) appendValue(dst []byte, w *worker) []byte {
	v := w.values.value(w.rng, p.s.sizes.draw(w.rng))
	dst = appendBulkHeader(dst, len(v))
	dst = append(dst, v...)
	return append(dst, '\r', '\n')
}

// encode appends the request for op o with keys (all on one node).
func (p *redisProto) encode(dst []byte, w *worker, kind opKind, keys []uint64) []byte {
	switch kind {
	case opGet:
		dst = append(dst, p.getHdr...)
		return p.appendKey(dst, keys[0])
	case opSet:
		dst = append(dst, p.setHdr...)
		dst = p.appendKey(dst, keys[0])
		dst = p.appendValue(dst, w)
		return append(dst, p.ttlTail...)
	case opHSet:
		dst = append(dst, p.hsetHdr...)
		dst = p.appendKey(dst, keys[0])
		dst = append(dst, p.hsetFld...)
		return p.appendValue(dst, w)
	case opMGet:
		dst = append(dst, '*')
		dst = strconv.AppendInt(dst, int64(len(keys)+1), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, p.mgetHdr...)
		for _, k := range keys {
			dst = append(dst, p.keyHdr...)
			dst = p.appendKey(dst, k)
		}
		return dst
	case opMSet:
		dst = append(dst, '*')
		dst = strconv.AppendInt(dst, int64(2*len(keys)+1), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, p.msetHdr...)
		for _, k := range keys {
			dst = append(dst, p.keyHdr...)
			dst = p.appendKey(dst, k)
			dst = p.appendValue(dst, w)
		}
		return dst
	case opTemplate:
		return p.encodeTemplate(dst, w, keys[0])
	}
	panic("loadgen: unknown op kind")
}

func (p *redisProto) encodeTemplate(dst []byte, w *worker, k uint64) []byte {
	var data []byte
	for _, arg := range p.template {
		for _, pc := range arg {
			if pc.kind == 'd' && data == nil {
				data = w.values.value(w.rng, p.s.sizes.draw(w.rng))
			}
		}
	}
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(p.template)), 10)
	dst = append(dst, '\r', '\n')
	for _, arg := range p.template {
		n := 0
		for _, pc := range arg {
			switch pc.kind {
			case 'k':
				n += p.keyLen
			case 'd':
				n += len(data)
			default:
				n += len(pc.lit)
			}
		}
		dst = appendBulkHeader(dst, n)
		for _, pc := range arg {
			switch pc.kind {
			case 'k':
				dst = appendKey(dst, p.s.KeyPrefix, k)
			case 'd':
				dst = append(dst, data...)
			default:
				dst = append(dst, pc.lit...)
			}
		}
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// read consumes one reply and counts hits (non-nil bulk strings), misses
// (nil bulk strings) and error replies on o. It returns an error only when
// the connection can no longer be used.
func (p *redisProto) read(r *bufio.Reader, o *op, nkeys int) error {
	return p.readReply(r, o, 0)
}

func (p *redisProto) readReply(r *bufio.Reader, o *op, depth int) error {
	line, err := readLine(r)
	if err != nil {
		return err
	}
	if len(line) == 0 {
		return fmt.Errorf("%w: empty reply line", errProtocol)
	}
	switch line[0] {
	case '+', ':':
		return nil
	case '-':
		o.fail(string(line[1:]))
		return nil
	case '$':
		n, ok := atoi(line[1:])
		if !ok {
			return fmt.Errorf("%w: bad bulk length %q", errProtocol, line)
		}
		if n < 0 {
			o.misses++
			return nil
		}
		o.hits++
		_, err := r.Discard(n + 2)
		return err
	case '*':
		n, ok := atoi(line[1:])
		if !ok || depth > 16 {
			return fmt.Errorf("%w: bad array %q", errProtocol, line)
		}
		for range max(n, 0) {
			if err := p.readReply(r, o, depth+1); err != nil {
				return err
			}
		}
		return nil
	case '_': // RESP3 null
		o.misses++
		return nil
	}
	return fmt.Errorf("%w: unexpected reply %q", errProtocol, line)
}
