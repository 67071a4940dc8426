package faults

import (
	"bytes"
	"strconv"
)

// Protocol selects how a Proxy recognises requests in the client→server
// stream. The zero value, Raw, counts bytes and round trips only.
type Protocol int

const (
	// Raw does not parse the stream: ProxyStats.Requests stays 0.
	Raw Protocol = iota
	// RESP counts Redis commands: each top-level RESP array (or inline
	// command line) is one request, named by its first element in lower
	// case ("get", "mget", "ping", "hello"). A pipeline of 10 GETs is 10
	// requests; a MULTI ... EXEC block counts every command in it.
	RESP
	// Memcache counts memcached text and meta commands: each command line
	// (with its data block, for set/add/replace/append/prepend/cas and ms)
	// is one request, named by its first word ("get", "mg", "ms", "mn",
	// "version"). "get a b c" is one request, as are 3 pipelined mg lines
	// three. The binary protocol is not parsed (see ProxyStats.Unparsed).
	Memcache
)

// maxLine bounds a command line (or a RESP header line) the parser keeps;
// a longer one stops counting on that connection.
const maxLine = 64 << 10

// maxName bounds the command name the parser keeps.
const maxName = 32

// reqParser is an incremental request splitter fed with the client→server
// chunks of one connection, in order.
type reqParser struct {
	proto  Protocol
	broken bool
	line   []byte // partial line
	skip   int    // data bytes still to skip
	crlf   int    // bytes of the CRLF ending the data still expected

	// RESP state: inside an array of nargs elements, at element arg,
	// whose first element (the command name) is name.
	nargs, arg int
	name       []byte
}

// feed parses b and calls count once per complete request. It returns
// false once the stream could not be parsed (the parser then ignores the
// rest of the connection).
func (r *reqParser) feed(b []byte, count func(name string)) bool {
	for len(b) > 0 && !r.broken {
		if r.skip > 0 {
			n := min(r.skip, len(b))
			if r.proto == RESP && r.arg == 0 && len(r.name) < maxName {
				// The command name is the first bulk string.
				r.name = append(r.name, b[:min(n, maxName-len(r.name))]...)
			}
			r.skip -= n
			b = b[n:]
			continue
		}
		if r.crlf > 0 {
			if b[0] != "\r\n"[2-r.crlf] {
				r.broken = true
				return false
			}
			r.crlf--
			b = b[1:]
			if r.crlf == 0 {
				r.endData(count)
			}
			continue
		}
		if r.proto == Memcache && len(r.line) == 0 && b[0] == 0x80 { // binary protocol
			r.broken = true
			return false
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(r.line)+len(b) > maxLine {
				r.broken = true
				return false
			}
			r.line = append(r.line, b...)
			return true
		}
		line := b[:i]
		if len(r.line) > 0 {
			r.line = append(r.line, line...)
			line = r.line
		}
		b = b[i+1:]
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if r.proto == RESP {
			r.respLine(line, count)
		} else {
			r.memcacheLine(line, count)
		}
		r.line = r.line[:0]
	}
	return !r.broken
}

// endData runs when a data block (memcached) or bulk body (RESP) ends.
func (r *reqParser) endData(count func(string)) {
	if r.proto != RESP {
		return
	}
	r.arg++
	if r.arg == r.nargs {
		count(string(bytes.ToLower(r.name)))
		r.nargs, r.arg, r.name = 0, 0, r.name[:0]
	}
}

func (r *reqParser) respLine(line []byte, count func(string)) {
	if r.nargs == 0 { // top level
		if len(line) == 0 {
			return
		}
		if line[0] != '*' { // inline command
			if f := bytes.Fields(line); len(f) > 0 {
				count(string(bytes.ToLower(f[0][:min(len(f[0]), maxName)])))
			}
			return
		}
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil {
			r.broken = true
			return
		}
		if n > 0 {
			r.nargs, r.arg, r.name = n, 0, r.name[:0]
		}
		return
	}
	// Inside an array: a bulk string header.
	if len(line) == 0 || line[0] != '$' {
		r.broken = true
		return
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n < -1 {
		r.broken = true
		return
	}
	if n == -1 { // null element
		r.arg++
		if r.arg == r.nargs {
			count(string(bytes.ToLower(r.name)))
			r.nargs, r.arg, r.name = 0, 0, r.name[:0]
		}
		return
	}
	r.skip, r.crlf = n, 2
}

func (r *reqParser) memcacheLine(line []byte, count func(string)) {
	f := bytes.Fields(line)
	if len(f) == 0 {
		return
	}
	name := string(bytes.ToLower(f[0][:min(len(f[0]), maxName)]))
	count(name)
	// Commands followed by a data block: its length is a field of the line.
	field := -1
	switch name {
	case "set", "add", "replace", "append", "prepend", "cas":
		field = 4
	case "ms":
		field = 2
	}
	if field < 0 || len(f) <= field {
		return
	}
	n, err := strconv.Atoi(string(f[field]))
	if err != nil || n < 0 {
		r.broken = true
		return
	}
	r.skip, r.crlf = n, 2
}
