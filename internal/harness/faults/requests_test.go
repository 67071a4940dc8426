package faults

import (
	"reflect"
	"testing"
)

// parse feeds b to a fresh parser in pieces of at most step bytes and
// returns the request names it counted and whether it could follow.
func parse(proto Protocol, b []byte, step int) ([]string, bool) {
	r := &reqParser{proto: proto}
	var names []string
	ok := true
	for len(b) > 0 && ok {
		n := min(step, len(b))
		ok = r.feed(b[:n], func(s string) { names = append(names, s) })
		b = b[n:]
	}
	return names, ok
}

func TestRequestParser(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proto Protocol
		in    string
		want  []string
		ok    bool
	}{
		{"resp pipeline", RESP, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$9\r\n*1\r\n$3\r\nx\r\n*1\r\n$4\r\nPING\r\n", []string{"get", "set", "ping"}, true},
		{"resp inline and empty", RESP, "PING\r\n\r\nINFO commandstats\r\n", []string{"ping", "info"}, true},
		{"resp null element", RESP, "*2\r\n$4\r\nECHO\r\n$-1\r\n", []string{"echo"}, true},
		{"resp empty name", RESP, "*1\r\n$0\r\n\r\n", []string{""}, true},
		{"resp garbage", RESP, "*2\r\n:1\r\n", nil, false},
		{"memcache text", Memcache, "set k 0 0 11\r\nget x\r\nmg y\r\nget a b\r\ncas k 0 0 1 99 noreply\r\nx\r\n", []string{"set", "get", "cas"}, true},
		{"memcache meta", Memcache, "mg k v\r\nms k 5 T0\r\nmn\r\n\r\nmn\r\n", []string{"mg", "ms"}, false},
		{"memcache meta ok", Memcache, "mg k v\r\nms k 5 T0\r\nhello\r\nmn\r\n", []string{"mg", "ms", "mn"}, true},
		{"memcache binary", Memcache, "\x80\x00\x00\x00", nil, false},
	} {
		for _, step := range []int{1, 2, 3, 7, 1 << 20} {
			got, ok := parse(tc.proto, []byte(tc.in), step)
			if !reflect.DeepEqual(got, tc.want) || ok != tc.ok {
				t.Errorf("%s, step %d: got %q, %v; want %q, %v", tc.name, step, got, ok, tc.want, tc.ok)
			}
		}
	}
}

// FuzzRequestParser: any input parses without a panic, and splitting it
// into chunks never changes what is counted.
func FuzzRequestParser(f *testing.F) {
	f.Add(false, []byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n"), uint8(3))
	f.Add(true, []byte("set k 0 0 5\r\nhello\r\nmg k v\r\nms k 2\r\nhi\r\nmn\r\n"), uint8(1))
	f.Add(false, []byte("*1\r\n$-5\r\n"), uint8(2))
	f.Fuzz(func(t *testing.T, memcache bool, in []byte, step uint8) {
		proto := RESP
		if memcache {
			proto = Memcache
		}
		whole, okWhole := parse(proto, in, len(in)+1)
		split, okSplit := parse(proto, in, int(step%16)+1)
		if okWhole != okSplit || !reflect.DeepEqual(whole, split) {
			t.Fatalf("whole: %q %v; split by %d: %q %v", whole, okWhole, step%16+1, split, okSplit)
		}
	})
}
