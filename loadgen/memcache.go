package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kuracache/kura/internal/redial"
	"github.com/kuracache/kura/internal/wire"
	"github.com/kuracache/kura/store/storeurl"
)

// mcProto speaks memcached's meta protocol (mg/ms, multi-key requests in
// quiet mode closed by mn) or the classic text protocol (get/set), which
// older tools such as memtier_benchmark and memcaslap use.
type mcProto struct {
	s    *settings
	meta bool
	ttl  []byte // " T<ttl>" for meta, "<ttl>" for text
}

func newMCProto(s *settings) *mcProto {
	p := &mcProto{s: s, meta: s.Protocol != "text"}
	secs := int64(s.TTL / time.Second)
	if p.meta {
		if secs > 0 {
			p.ttl = []byte(" T" + strconv.FormatInt(secs, 10))
		}
	} else {
		p.ttl = strconv.AppendInt(nil, secs, 10)
	}
	return p
}

func (p *mcProto) key(dst []byte, k uint64) []byte { return appendKey(dst, p.s.KeyPrefix, k) }

func (p *mcProto) appendSet(dst []byte, w *worker, k uint64, quiet bool) []byte {
	v := w.values.value(w.rng, p.s.sizes.draw(w.rng))
	if p.meta {
		dst = append(dst, "ms "...)
		dst = p.key(dst, k)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(len(v)), 10)
		dst = append(dst, p.ttl...)
		if quiet {
			dst = append(dst, " q"...)
		}
	} else {
		dst = append(dst, "set "...)
		dst = p.key(dst, k)
		dst = append(dst, " 0 "...)
		dst = append(dst, p.ttl...)
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(len(v)), 10)
	}
	dst = append(dst, '\r', '\n')
	dst = append(dst, v...)
	return append(dst, '\r', '\n')
}

func (p *mcProto) encode(dst []byte, w *worker, kind opKind, keys []uint64) []byte {
	switch kind {
	case opGet:
		if p.meta {
			dst = append(dst, "mg "...)
			dst = p.key(dst, keys[0])
			return append(dst, " v\r\n"...)
		}
		dst = append(dst, "get "...)
		dst = p.key(dst, keys[0])
		return append(dst, '\r', '\n')
	case opSet:
		return p.appendSet(dst, w, keys[0], false)
	case opMGet:
		if p.meta {
			for _, k := range keys {
				dst = append(dst, "mg "...)
				dst = p.key(dst, k)
				dst = append(dst, " v q\r\n"...)
			}
			return append(dst, "mn\r\n"...)
		}
		dst = append(dst, "get"...)
		for _, k := range keys {
			dst = append(dst, ' ')
			dst = p.key(dst, k)
		}
		return append(dst, '\r', '\n')
	case opMSet:
		for _, k := range keys {
			dst = p.appendSet(dst, w, k, p.meta)
		}
		if p.meta {
			dst = append(dst, "mn\r\n"...)
		}
		return dst
	}
	panic("loadgen: op kind not supported by memcached")
}

// read consumes the replies to one encoded request for nkeys keys.
func (p *mcProto) read(r *bufio.Reader, o *op, nkeys int) error {
	switch {
	case p.meta && (o.kind == opMGet || o.kind == opMSet):
		// Quiet mode: only hits (VA) and failures are answered, then MN.
		hits := 0
		for {
			line, err := wire.ReadLine(r)
			if err != nil {
				return err
			}
			if bytes.Equal(line, []byte("MN")) {
				break
			}
			if ok, err := p.readValueOrError(r, line, o); err != nil {
				return err
			} else if ok {
				hits++
			}
		}
		if hits > nkeys {
			return fmt.Errorf("%w: %d values for %d keys", errProtocol, hits, nkeys)
		}
		if o.kind == opMGet {
			o.hits += hits
			o.misses += nkeys - hits
		}
		return nil
	case !p.meta && o.kind == opMSet:
		for range nkeys {
			if err := p.readStatus(r, o); err != nil {
				return err
			}
		}
		return nil
	case o.kind == opSet:
		return p.readStatus(r, o)
	case p.meta: // mg
		line, err := wire.ReadLine(r)
		if err != nil {
			return err
		}
		if bytes.Equal(line, []byte("EN")) {
			o.misses++
			return nil
		}
		if ok, err := p.readValueOrError(r, line, o); err != nil {
			return err
		} else if ok {
			o.hits++
		}
		return nil
	default: // text get, one or many keys: VALUE ... END
		got := 0
		for {
			line, err := wire.ReadLine(r)
			if err != nil {
				return err
			}
			if bytes.Equal(line, []byte("END")) {
				if got > nkeys {
					return fmt.Errorf("%w: %d values for %d keys", errProtocol, got, nkeys)
				}
				o.hits += got
				o.misses += nkeys - got
				return nil
			}
			ok, err := p.readValueOrError(r, line, o)
			if err != nil {
				return err
			}
			if !ok {
				return nil // an error line ends the reply
			}
			got++
		}
	}
}

// readValueOrError handles "VA <n> ..." (meta) or "VALUE <key> <flags>
// <n>" (text) by skipping the data block, and error lines by counting
// them. It reports whether a value was read.
func (p *mcProto) readValueOrError(r *bufio.Reader, line []byte, o *op) (bool, error) {
	var n int
	var ok bool
	switch {
	case bytes.HasPrefix(line, []byte("VA ")):
		f := line[3:]
		if i := bytes.IndexByte(f, ' '); i >= 0 {
			f = f[:i]
		}
		n, ok = wire.Atoi(f)
	case bytes.HasPrefix(line, []byte("VALUE ")):
		f := line[bytes.LastIndexByte(line, ' ')+1:]
		n, ok = wire.Atoi(f)
	default:
		if isMCError(line) {
			o.fail(string(line))
			return false, nil
		}
		return false, fmt.Errorf("%w: unexpected memcached reply %q", errProtocol, line)
	}
	if !ok || n < 0 {
		return false, fmt.Errorf("%w: bad value length in %q", errProtocol, line)
	}
	_, err := r.Discard(n + 2)
	return true, err
}

func (p *mcProto) readStatus(r *bufio.Reader, o *op) error {
	line, err := wire.ReadLine(r)
	if err != nil {
		return err
	}
	switch {
	case bytes.Equal(line, []byte("HD")), bytes.Equal(line, []byte("STORED")):
		return nil
	case bytes.Equal(line, []byte("NS")), bytes.Equal(line, []byte("NOT_STORED")), isMCError(line):
		o.fail(string(line))
		return nil
	}
	return fmt.Errorf("%w: unexpected memcached reply %q", errProtocol, line)
}

func isMCError(line []byte) bool {
	return bytes.HasPrefix(line, []byte("SERVER_ERROR")) || bytes.HasPrefix(line, []byte("CLIENT_ERROR")) ||
		bytes.Equal(line, []byte("ERROR")) || bytes.HasPrefix(line, []byte("ERROR "))
}

// memcachedStats reads `stats` from one server.
func (c *conn) memcachedStats() (map[string]string, error) {
	if err := c.write([]byte("stats\r\n"), time.Now()); err != nil {
		return nil, err
	}
	m, err := wire.ReadStats(c.r)
	var re *wire.ReplyError
	if errors.As(err, &re) {
		return nil, fmt.Errorf("memcached at %s: stats: %s", c.addr, re.Line)
	}
	return m, err
}

// memcachedHello checks that the server speaks memcached at all, and the
// meta protocol when it will be used.
func (c *conn) memcachedHello(meta bool) error {
	if err := c.write([]byte("version\r\n"), time.Now()); err != nil {
		return err
	}
	line, err := wire.ReadLine(c.r)
	if err != nil {
		return fmt.Errorf("memcached at %s does not answer `version`: %v (is it a memcached server?)", c.addr, redial.Cause(err))
	}
	if !bytes.HasPrefix(line, []byte("VERSION ")) {
		if bytes.HasPrefix(line, []byte("-ERR")) {
			return errors.New(storeurl.RedisAtMemcachedURL(c.addr))
		}
		return fmt.Errorf("memcached at %s answered `version` with %q; is it a memcached server?", c.addr, line)
	}
	if meta {
		if err := c.write([]byte("mn\r\n"), time.Now()); err != nil {
			return err
		}
		line, err := wire.ReadLine(c.r)
		if err != nil || !bytes.Equal(line, []byte("MN")) {
			return fmt.Errorf("memcached at %s (%s) does not speak the meta protocol (needs 1.6+); use --protocol text", c.addr, bytes.TrimPrefix(line, []byte("VERSION ")))
		}
	}
	return nil
}
