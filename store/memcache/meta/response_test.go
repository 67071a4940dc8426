package meta

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/kuracache/kura/store"
)

func TestParseEveryStatus(t *testing.T) {
	tests := []struct {
		in     string
		status Status
		check  func(t *testing.T, r *Response)
	}{
		{"HD\r\n", HD, nil},
		{"HD O7 c42 t-1 f3 s10 kfoo b h1 l5 W X Z\r\n", HD, func(t *testing.T, r *Response) {
			if r.Opaque != 7 || r.CAS != 42 || r.TTL != -1 || r.ClientFlags != 3 || r.Size != 10 ||
				r.Key != "foo" || !r.Base64Key || !r.Hit || r.LastAccess != 5 || !r.Won || !r.Stale || !r.AlreadyWon {
				t.Errorf("flags not parsed: %+v", r)
			}
		}},
		{"VA 3 O1\r\nabc\r\n", VA, func(t *testing.T, r *Response) {
			if string(r.Value) != "abc" || r.Opaque != 1 {
				t.Errorf("got %+v", r)
			}
		}},
		{"VA 0\r\n\r\n", VA, func(t *testing.T, r *Response) {
			if r.Value == nil || len(r.Value) != 0 {
				t.Errorf("empty value must be non-nil and empty: %#v", r.Value)
			}
		}},
		{"VA 4\r\na\r\nb\r\n", VA, func(t *testing.T, r *Response) {
			if string(r.Value) != "a\r\nb" {
				t.Errorf("value with CRLF inside: %q", r.Value)
			}
		}},
		{"EN\r\n", EN, nil},
		{"NF O9\r\n", NF, nil},
		{"NS\r\n", NS, nil},
		{"EX c5\r\n", EX, nil},
		{"MN\r\n", MN, nil},
		{"ERROR\r\n", StatusError, nil},
		{"CLIENT_ERROR bad command line format\r\n", StatusClientError, func(t *testing.T, r *Response) {
			if r.Message != "bad command line format" {
				t.Errorf("message %q", r.Message)
			}
		}},
		{"SERVER_ERROR object too large for cache\r\n", StatusServerError, func(t *testing.T, r *Response) {
			if !errors.Is(r.Err(), store.ErrValueTooLarge) {
				t.Errorf("too large not matched: %v", r.Err())
			}
		}},
		{"HD P/x Lfoo\r\n", HD, nil}, // unknown flags are skipped
	}
	for _, tc := range tests {
		var r Response
		br := bufio.NewReader(strings.NewReader(tc.in))
		if err := ReadResponse(br, &r, 1<<20); err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if r.Status != tc.status {
			t.Errorf("%q: status %v, want %v", tc.in, r.Status, tc.status)
		}
		if tc.check != nil {
			tc.check(t, &r)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%q: input not fully consumed", tc.in)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, in := range []string{
		"XX\r\n", "HD\n", "VA\r\n", "VA -1\r\n", "VA x\r\n", "VA 3\r\nabcd\r\n",
		"VA 3\r\nab", "HD Oxyz\r\n", "HD c-1\r\n", "VA 99999999999\r\n", "VA 2000\r\n",
		"HD t" + strings.Repeat("9", 30) + "\r\n", strings.Repeat("H", 70000),
		// Numbers that parse but no server sends: a negative size or
		// last-access time, a TTL below -1 or past what a time.Duration
		// holds (KeyMeta multiplied it into a negative TTL).
		"HD s-5\r\n", "VA 1 s-1\r\nx\r\n", "HD t-2\r\n", "HD t9223372037\r\n",
		"HD t9223372036854775807\r\n", "HD l-1\r\n", "HD s" + strings.Repeat("9", 30) + "\r\n",
	} {
		var r Response
		err := ReadResponse(bufio.NewReaderSize(strings.NewReader(in), 64<<10), &r, 1000)
		if err == nil {
			t.Errorf("%q: accepted as %+v", in, r)
		}
	}
}

// FuzzParseResponse feeds arbitrary streams to the response reader: it
// must never panic or loop, must stop at the first error, and whatever it
// accepts must be self-consistent. The seed corpus in testdata/fuzz runs
// with plain go test.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		"HD\r\n", "VA 3 O1 c2\r\nabc\r\nMN\r\n", "EN\r\nNF\r\nNS\r\nEX\r\n",
		"SERVER_ERROR object too large for cache\r\nMN\r\n", "CLIENT_ERROR bad data chunk\r\nERROR\r\n",
		"VA 5\r\nab\r\n", "VA 0\r\n\r\n", "HD t-1 f4294967295 O4294967295\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(in), 16)
		var r Response
		for n := 0; ; n++ {
			if n > len(in) {
				t.Fatalf("read %d responses from %d bytes", n, len(in))
			}
			if err := ReadResponse(br, &r, 4096); err != nil {
				return
			}
			if r.Status == StatusNone || r.Status > StatusServerError {
				t.Fatalf("accepted with status %v", r.Status)
			}
			if (r.Status == VA) != (r.Value != nil) {
				t.Fatalf("status %v with value %q", r.Status, r.Value)
			}
			if len(r.Value) > 4096 {
				t.Fatalf("value of %d bytes past the limit", len(r.Value))
			}
		}
	})
}

// TestParseHeaderAllocs: parsing an answer's flags allocates nothing but
// the key (k), which the Response keeps. Each numeric flag used to cost a
// string: asking every mg for its CAS (to hand back a recache token) made
// GetMany allocate one more object per key.
func TestParseHeaderAllocs(t *testing.T) {
	for _, tc := range []struct {
		line  string
		allow float64
	}{
		{"VA 300 O4294967295 c18446744073709551615 W X", 0},
		{"HD O7 c42 t-1 f3 s10 b h1 l5 W X Z", 0},
		{"EN", 0},
		{"HD O7 kfoo", 1},
	} {
		var r Response
		line := []byte(tc.line)
		if _, err := ParseHeader(line, &r); err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		got := testing.AllocsPerRun(100, func() {
			if _, err := ParseHeader(line, &r); err != nil {
				t.Fatal(err)
			}
		})
		if got > tc.allow {
			t.Errorf("ParseHeader(%q): %v allocations, want at most %v", tc.line, got, tc.allow)
		}
	}
}
