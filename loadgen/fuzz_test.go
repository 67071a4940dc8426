package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/wire"
)

// The fuzz tests cover every parser of the package: replies from servers
// (RESP, memcached meta and text, CLUSTER SLOTS) and the flag specs a
// person types (--data-size, --ratio, the target URL). Each seed corpus is
// in testdata/fuzz/<name>, so plain `go test` runs it.

// maxFuzzInput bounds the inputs: a parser must finish in time linear in
// its input, and larger inputs only slow the fuzzer down.
const maxFuzzInput = 64 << 10

// fuzzReader returns a reader over data with a small buffer, so that the
// "line longer than the buffer" path is reachable.
func fuzzReader(data []byte) (*bufio.Reader, func() int) {
	src := bytes.NewReader(data)
	r := bufio.NewReaderSize(src, 512)
	return r, func() int { return len(data) - src.Len() - r.Buffered() }
}

// appendRESP encodes v as readValue returns it: strings as bulk strings,
// int64 as integers, nil as the null bulk string, []any as arrays.
func appendRESP(dst []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(dst, "$-1\r\n"...)
	case string:
		dst = wire.AppendBulkHeader(dst, len(v))
		dst = append(dst, v...)
		return append(dst, '\r', '\n')
	case int64:
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, v, 10)
		return append(dst, '\r', '\n')
	case []any:
		dst = append(dst, '*')
		dst = strconv.AppendInt(dst, int64(len(v)), 10)
		dst = append(dst, '\r', '\n')
		for _, e := range v {
			dst = appendRESP(dst, e)
		}
		return dst
	}
	panic(fmt.Sprintf("appendRESP: %T", v))
}

// FuzzRESP feeds arbitrary bytes to both RESP readers: readValue (the
// control path) and redisProto.readReply (the load path). Neither may
// panic; where readValue accepts a reply the load path must accept the
// same bytes, and readValue's result must survive encoding and reading
// again.
func FuzzRESP(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", "-ERR wrong\r\n", ":42\r\n", ":-1\r\n", "$3\r\nfoo\r\n", "$-1\r\n", "$0\r\n\r\n",
		"*-1\r\n", "*0\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "*2\r\n-MOVED 1 h:1\r\n$1\r\nb\r\n", "_\r\n",
		"*1\r\n*1\r\n*1\r\n:0\r\n", "$5\r\nab\r\n", "$99999999999\r\n", "*99999999999\r\n", "$1\r\nxyz",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		r, used := fuzzReader(data)
		v, err := wire.ReadValue(r)
		n := used()
		var re respError
		if err != nil && !errors.As(err, &re) {
			return
		}
		// The load path reads the same reply, error replies included.
		r2, used2 := fuzzReader(data)
		var o op
		if err := (&redisProto{}).readReply(r2, &o, 0); err != nil {
			t.Fatalf("readValue took %q, readReply says %v", data[:n], err)
		}
		if n2 := used2(); n2 != n {
			t.Fatalf("readValue took %d bytes of %q, readReply %d", n, data, n2)
		}
		if err != nil {
			return // a (nested) error reply: the value is partial
		}
		enc := appendRESP(nil, v)
		v2, err := wire.ReadValue(bufio.NewReader(bytes.NewReader(enc)))
		if err != nil || !reflect.DeepEqual(v, v2) {
			t.Fatalf("%#v encodes to %q, which reads back as %#v, %v", v, enc, v2, err)
		}
	})
}

// FuzzMemcachedReply feeds arbitrary bytes as replies to each kind of
// memcached request in both protocols, then a well-formed reply built from
// the same bytes. Reading may fail but must not panic, must always make
// progress, and must never count more answers than keys; a well-formed
// reply must be counted exactly.
func FuzzMemcachedReply(f *testing.F) {
	for _, s := range []string{
		"VA 3\r\nabc\r\n", "EN\r\n", "VA 3 f1\r\nabc\r\nVA 0\r\n\r\nMN\r\n", "MN\r\n", "HD\r\n", "NS\r\n",
		"VALUE key:000000000001 0 3\r\nabc\r\nEND\r\n", "END\r\n", "STORED\r\n", "NOT_STORED\r\n",
		"SERVER_ERROR out of memory\r\n", "CLIENT_ERROR bad data chunk\r\n", "ERROR\r\n",
		"VA 2\r\n\r\n\r\nMN\r\n", "VA -1\r\n", "VALUE k 0 99999999999\r\n", "VA 1\r\nx\r\nVA 1\r\ny\r\nMN\r\n",
	} {
		for kind := range 4 {
			f.Add([]byte(s), uint8(kind), uint8(1), false)
			f.Add([]byte(s), uint8(kind), uint8(0), true)
		}
	}
	kinds := []opKind{opGet, opSet, opMGet, opMSet}
	f.Fuzz(func(t *testing.T, data []byte, kindSel, keysSel uint8, text bool) {
		if len(data) > maxFuzzInput {
			return
		}
		p := &mcProto{meta: !text}
		kind := kinds[int(kindSel)%len(kinds)]
		nkeys := 1
		if kind == opMGet || kind == opMSet {
			nkeys = 1 + int(keysSel)%16
		}

		// Arbitrary bytes, read as a pipeline of replies.
		r, used := fuzzReader(data)
		for prev := 0; ; {
			o := op{kind: kind}
			if err := p.read(r, &o, nkeys); err != nil {
				break
			}
			n := used()
			if n <= prev {
				t.Fatalf("read of %q made no progress at byte %d", data, n)
			}
			prev = n
			if o.hits < 0 || o.misses < 0 || o.hits+o.misses > nkeys {
				t.Fatalf("%d keys counted %d hits and %d misses from %q", nkeys, o.hits, o.misses, data)
			}
			if (kind == opSet || kind == opMSet) && o.hits+o.misses != 0 {
				t.Fatalf("a set counted %d hits and %d misses", o.hits, o.misses)
			}
		}

		// A well-formed reply: data decides which keys hit and what their
		// values hold (any bytes, CRLF and "MN" included).
		var reply []byte
		hits := 0
		for i := range nkeys {
			hit := i < len(data) && data[i]&1 == 1
			if kind == opSet || kind == opMSet || !hit {
				continue
			}
			hits++
			val := data[i:min(len(data), i+int(data[i])%40)]
			if p.meta {
				reply = fmt.Appendf(reply, "VA %d f0\r\n%s\r\n", len(val), val)
			} else {
				reply = fmt.Appendf(reply, "VALUE %s 0 %d\r\n%s\r\n", appendKey(nil, "key:", uint64(i)), len(val), val)
			}
			if p.meta && kind == opGet {
				break
			}
		}
		switch {
		case kind == opGet && p.meta && hits == 0:
			reply = append(reply, "EN\r\n"...)
		case (kind == opGet || kind == opMGet) && !p.meta:
			reply = append(reply, "END\r\n"...)
		case kind == opMGet && p.meta, kind == opMSet && p.meta:
			reply = append(reply, "MN\r\n"...)
		case kind == opSet && p.meta:
			reply = append(reply, "HD\r\n"...)
		case kind == opSet:
			reply = append(reply, "STORED\r\n"...)
		case kind == opMSet:
			reply = append(reply, strings.Repeat("STORED\r\n", nkeys)...)
		}
		wantMiss := 0
		if kind == opGet || kind == opMGet {
			wantMiss = nkeys - hits
		}
		r, used = fuzzReader(reply)
		o := op{kind: kind}
		if err := p.read(r, &o, nkeys); err != nil {
			t.Fatalf("well-formed reply %q: %v", reply, err)
		}
		if o.hits != hits || o.misses != wantMiss || o.errs != 0 || used() != len(reply) {
			t.Fatalf("reply %q: hits %d misses %d errors %d, read %d bytes; want %d, %d, 0, %d",
				reply, o.hits, o.misses, o.errs, used(), hits, wantMiss, len(reply))
		}
	})
}

// slotsReply encodes a CLUSTER SLOTS reply for ranges of [lo, hi, node].
func slotsReply(ranges [][3]int, addrs []string) []byte {
	v := make([]any, 0, len(ranges))
	for _, rg := range ranges {
		host, port, _ := net.SplitHostPort(addrs[rg[2]])
		p, _ := strconv.Atoi(port)
		v = append(v, []any{int64(rg[0]), int64(rg[1]), []any{host, int64(p), "nodeid"}})
	}
	return appendRESP(nil, v)
}

// FuzzClusterSlots reads arbitrary bytes as a CLUSTER SLOTS reply, then
// the reply of a cluster whose ranges are drawn from the same bytes. A
// topology that parseSlots accepts must give every slot a known owner, and
// must come back unchanged through its own CLUSTER SLOTS encoding.
func FuzzClusterSlots(f *testing.F) {
	three := []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}
	f.Add(slotsReply([][3]int{{0, 5460, 0}, {5461, 10922, 1}, {10923, 16383, 2}}, three))
	f.Add(slotsReply([][3]int{{0, 16383, 0}}, three))
	f.Add(slotsReply([][3]int{{0, 8191, 0}, {0, 8191, 1}}, three)) // overlapping, half the slots
	f.Add([]byte("*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$0\r\n\r\n:7000\r\n"))
	f.Add([]byte("*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$1\r\n?\r\n:0\r\n"))
	f.Add([]byte("*1\r\n*3\r\n:-1\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		const seed = "127.0.0.1:7000"
		check := func(top *topology) {
			if len(top.addrs) == 0 || !top.cluster {
				t.Fatalf("accepted topology %+v", top)
			}
			for _, a := range top.addrs {
				if _, _, err := net.SplitHostPort(a); err != nil {
					t.Fatalf("node address %q: %v", a, err)
				}
			}
			for s, o := range top.owner {
				if int(o) >= len(top.addrs) {
					t.Fatalf("slot %d owned by node %d of %d", s, o, len(top.addrs))
				}
			}
			// Round trip through the reply a server would give.
			var ranges [][3]int
			for s := 0; s < slotCount; {
				e := s
				for e+1 < slotCount && top.owner[e+1] == top.owner[s] {
					e++
				}
				ranges = append(ranges, [3]int{s, e, int(top.owner[s])})
				s = e + 1
			}
			v, err := wire.ReadValue(bufio.NewReader(bytes.NewReader(slotsReply(ranges, top.addrs))))
			if err != nil {
				t.Fatal(err)
			}
			again, err := parseSlots(v, seed)
			if err != nil {
				t.Fatalf("re-encoded topology: %v", err)
			}
			for s := range top.owner {
				if again.addrs[again.owner[s]] != top.addrs[top.owner[s]] {
					t.Fatalf("slot %d: %s, then %s", s, top.addrs[top.owner[s]], again.addrs[again.owner[s]])
				}
			}
		}

		r, _ := fuzzReader(data)
		if v, err := wire.ReadValue(r); err == nil {
			if top, err := parseSlots(v, seed); err == nil {
				check(top)
			}
		}

		// Ranges drawn from data, 5 bytes each: lo, hi (14 bits each), node.
		addrs := []string{"10.0.0.1:6379", "10.0.0.2:6379", "[::1]:7000", "?:7001"}
		var ranges [][3]int
		var want [slotCount]int
		for s := range want {
			want[s] = -1
		}
		for i := 0; i+5 <= len(data) && len(ranges) < 64; i += 5 {
			lo := (int(data[i])<<8 | int(data[i+1])) % slotCount
			hi := (int(data[i+2])<<8 | int(data[i+3])) % slotCount
			lo, hi = min(lo, hi), max(lo, hi)
			node := int(data[i+4]) % len(addrs)
			ranges = append(ranges, [3]int{lo, hi, node})
			for s := lo; s <= hi; s++ {
				want[s] = node
			}
		}
		v, err := wire.ReadValue(bufio.NewReader(bytes.NewReader(slotsReply(ranges, addrs))))
		if err != nil {
			t.Fatal(err)
		}
		top, err := parseSlots(v, seed)
		complete := true
		for _, n := range want {
			complete = complete && n >= 0
		}
		if complete != (err == nil) {
			t.Fatalf("ranges %v cover all slots: %v; parseSlots: %v", ranges, complete, err)
		}
		if err != nil {
			return
		}
		check(top)
		for s, n := range want {
			wantAddr := addrs[n]
			if n == 3 {
				wantAddr = "127.0.0.1:7001" // "?" is the seed's host
			}
			if got := top.addrs[top.owner[s]]; got != wantAddr {
				t.Fatalf("slot %d: %s, want %s (ranges %v)", s, got, wantAddr, ranges)
			}
		}
	})
}

// formatSizes writes a sizeSpec back in the --data-size syntax.
func formatSizes(sp sizeSpec) string {
	if len(sp.sizes) == 0 {
		if sp.min == sp.max {
			return strconv.Itoa(sp.min)
		}
		return fmt.Sprintf("%d-%d", sp.min, sp.max)
	}
	parts := make([]string, len(sp.sizes))
	prev := 0
	for i, n := range sp.sizes {
		parts[i] = fmt.Sprintf("%d:%d", n, sp.weights[i]-prev)
		prev = sp.weights[i]
	}
	return strings.Join(parts, ",")
}

// FuzzDataSize checks --data-size: errors name the flag, accepted specs
// draw sizes within their bounds, and survive formatting and parsing again.
func FuzzDataSize(f *testing.F) {
	for _, s := range []string{"100", "0", "100-1000", "100:8,1000:2", " 7 : 3 ", "-5", "5-", "1-2-3", "2-1",
		"100:0", ":", ",", "100:8,", "67108864", "67108865", "1:1000000,2:1000000", "9999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if len(spec) > 4096 {
			return
		}
		sp, err := parseSizes(spec)
		if err != nil {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--data-size") {
				t.Fatalf("parseSizes(%q): %v, want an ErrConfig naming --data-size", spec, err)
			}
			return
		}
		if sp.min < 0 || sp.min > sp.max || sp.max > maxValueSize {
			t.Fatalf("parseSizes(%q) = %+v", spec, sp)
		}
		if len(sp.sizes) != len(sp.weights) {
			t.Fatalf("parseSizes(%q): %d sizes, %d weights", spec, len(sp.sizes), len(sp.weights))
		}
		for i := range sp.weights {
			if sp.weights[i] <= 0 || i > 0 && sp.weights[i] <= sp.weights[i-1] {
				t.Fatalf("parseSizes(%q): cumulative weights %v", spec, sp.weights)
			}
		}
		if m := sp.mean(); m < float64(sp.min) || m > float64(sp.max) {
			t.Fatalf("parseSizes(%q): mean %v outside [%d, %d]", spec, m, sp.min, sp.max)
		}
		r := rand.New(rand.NewPCG(1, uint64(len(spec))))
		for range 32 {
			if n := sp.draw(r); n < sp.min || n > sp.max {
				t.Fatalf("parseSizes(%q): drew %d outside [%d, %d]", spec, n, sp.min, sp.max)
			}
		}
		canon := formatSizes(sp)
		again, err := parseSizes(canon)
		if err != nil || !reflect.DeepEqual(sp, again) {
			t.Fatalf("parseSizes(%q) = %+v, written %q, read back as %+v, %v", spec, sp, canon, again, err)
		}
	})
}

// FuzzRatio checks --ratio SET:GET like FuzzDataSize.
func FuzzRatio(f *testing.F) {
	for _, s := range []string{"1:10", "0:1", "1:0", "0:0", "1:", ":1", "1", "-1:2", "+1:2", "1000000:1", "1000001:1", "1:2:3", " 1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if len(spec) > 4096 {
			return
		}
		x, y, err := parseRatio(spec)
		if err != nil {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--ratio") {
				t.Fatalf("parseRatio(%q): %v, want an ErrConfig naming --ratio", spec, err)
			}
			return
		}
		if x < 0 || y < 0 || x+y == 0 || x > 1e6 || y > 1e6 {
			t.Fatalf("parseRatio(%q) = %d:%d", spec, x, y)
		}
		canon := fmt.Sprintf("%d:%d", x, y)
		if x2, y2, err := parseRatio(canon); err != nil || x2 != x || y2 != y {
			t.Fatalf("parseRatio(%q) = %d:%d, written %q, read back as %d:%d, %v", spec, x, y, canon, x2, y2, err)
		}
	})
}

// FuzzParseTarget checks target URLs: accepted targets name valid
// host:port addresses, and a target without credentials survives String
// and ParseTarget.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"", "redis://127.0.0.1:6379", "rediss://u:p%40ss@h:1/2", "redis://h1:1,h2:2", "redis://h:1?addr=h2:2",
		"memcached://a,b:5", "memcache://[::1]", "h:1", "redis://pw@h", "redis://h:0", "redis://h:99999", "ftp://h", "redis://h/x",
		"memcached://u:p@h", "redis://h1,h2/3", "redis://[::1]:6379/0", "redis://h:1?%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		tg, err := ParseTarget(s)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("ParseTarget(%q): %v is not an ErrConfig", s, err)
			}
			return
		}
		if len(tg.Addrs) == 0 || (tg.Kind != KindRedis && tg.Kind != KindMemcached) {
			t.Fatalf("ParseTarget(%q) = %+v", s, tg)
		}
		for _, a := range tg.Addrs {
			host, port, err := net.SplitHostPort(a)
			p, perr := strconv.Atoi(port)
			if err != nil || perr != nil || host == "" || p <= 0 || p > 65535 {
				t.Fatalf("ParseTarget(%q): address %q", s, a)
			}
		}
		if tg.User != "" || tg.Password != "" {
			return // String leaves the password out
		}
		again, err := ParseTarget(tg.String())
		if err != nil || !reflect.DeepEqual(tg, again) {
			t.Fatalf("ParseTarget(%q) = %+v, written %q, read back as %+v, %v", s, tg, tg.String(), again, err)
		}
	})
}
