package loadgen

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/kuracache/kura/internal/wire"
)

var errProtocol = wire.ErrProtocol

// respError is an error reply from Redis.
type respError = wire.Error

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
	p.keyHdr = wire.AppendBulkHeader(nil, p.keyLen)
	hdr := func(argc int, name string) []byte {
		b := []byte{'*'}
		b = strconv.AppendInt(b, int64(argc), 10)
		b = append(b, '\r', '\n')
		b = wire.AppendBulkHeader(b, len(name))
		b = append(b, name...)
		b = append(b, '\r', '\n')
		return append(b, p.keyHdr...)
	}
	p.getHdr = hdr(2, "GET")
	if s.TTL > 0 {
		p.setHdr = hdr(5, "SET")
		p.ttlTail = wire.AppendCommand(nil, "EX", strconv.FormatInt(int64(s.TTL.Seconds()), 10))
		p.ttlTail = p.ttlTail[len("*2\r\n"):]
	} else {
		p.setHdr = hdr(3, "SET")
	}
	p.hsetHdr = hdr(4, "HSET")
	p.hsetFld = []byte("$2\r\nf1\r\n")
	p.mgetHdr = wire.AppendCommand(nil, "MGET")[len("*2\r\n"):]
	p.msetHdr = wire.AppendCommand(nil, "MSET")[len("*2\r\n"):]
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
	dst = wire.AppendBulkHeader(dst, len(v))
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
		dst = wire.AppendBulkHeader(dst, n)
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
	line, err := wire.ReadLine(r)
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
		n, ok := wire.Atoi(line[1:])
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
		n, ok := wire.Atoi(line[1:])
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
