package wire

import (
	"bufio"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReadStats(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("STAT pid 7\r\nSTAT version 1.6.18\r\nSTAT rusage_user 0.5\r\nEND\r\nnext"))
	m, err := ReadStats(r)
	if err != nil || !reflect.DeepEqual(m, map[string]string{"pid": "7", "version": "1.6.18", "rusage_user": "0.5"}) {
		t.Fatalf("ReadStats = %v, %v", m, err)
	}
	if rest, _ := r.ReadString(0); rest != "next" {
		t.Errorf("ReadStats read past END: left %q", rest)
	}
	for in, want := range map[string]func(error) bool{
		"SERVER_ERROR out of memory\r\n": func(err error) bool {
			var re *ReplyError
			return errors.As(err, &re) && re.Line == "SERVER_ERROR out of memory"
		},
		"ERROR\r\n":       func(err error) bool { var re *ReplyError; return errors.As(err, &re) },
		"VALUE x 0 1\r\n": func(err error) bool { return errors.Is(err, ErrProtocol) },
		"STAT a 1\r\n":    func(err error) bool { return err != nil }, // cut off before END
	} {
		if _, err := ReadStats(bufio.NewReader(strings.NewReader(in))); !want(err) {
			t.Errorf("ReadStats(%q): %v", in, err)
		}
	}
	long := bufio.NewReaderSize(strings.NewReader("STAT x "+strings.Repeat("y", 100)+"\r\nEND\r\n"), 16)
	if _, err := ReadStats(long); !errors.Is(err, ErrProtocol) {
		t.Errorf("a line longer than the buffer: %v", err)
	}
}

func TestParseInfo(t *testing.T) {
	info := ParseInfo("# Stats\r\ntotal_net_input_bytes:10\r\n\r\n# Commandstats\r\ncmdstat_get:calls=3,usec=9,usec_per_call=3.00\r\ncmdstat_memory|usage:calls=2,usec=1\r\nbad line\r\n")
	if info["total_net_input_bytes"] != "10" {
		t.Errorf("ParseInfo = %v", info)
	}
	if c := CommandCalls(info); !reflect.DeepEqual(c, map[string]int64{"get": 3, "memory|usage": 2}) {
		t.Errorf("CommandCalls = %v", c)
	}
}

func TestParseSlots(t *testing.T) {
	v := []any{
		[]any{int64(0), int64(100), []any{"10.0.0.1", int64(7000), "id"}, []any{"10.0.0.2", int64(7001)}},
		[]any{int64(101), int64(16383), []any{"?", int64(7002)}},
	}
	got, err := ParseSlots(v, "::1")
	want := []SlotRange{{0, 100, "10.0.0.1:7000", 1}, {101, 16383, "[::1]:7002", 0}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseSlots = %v, %v", got, err)
	}
	for _, bad := range []any{
		"OK",
		[]any{[]any{int64(0), int64(16384), []any{"h", int64(1)}}},
		[]any{[]any{int64(5), int64(4), []any{"h", int64(1)}}},
		[]any{[]any{int64(0), int64(1), []any{"h", int64(0)}}},
		[]any{[]any{int64(0), int64(1)}},
		[]any{"x"},
	} {
		if _, err := ParseSlots(bad, ""); !errors.Is(err, ErrProtocol) {
			t.Errorf("ParseSlots(%v): %v", bad, err)
		}
	}
}

// FuzzReadStats: any bytes give a map or an error, never a panic, and a
// map holds only what STAT lines said.
func FuzzReadStats(f *testing.F) {
	for _, s := range []string{"STAT pid 1\r\nEND\r\n", "END\r\n", "ERROR\r\n", "STAT \r\nEND\r\n", "STAT a\r\nEND\n", "\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadStats(bufio.NewReaderSize(strings.NewReader(string(data)), 64))
		if err != nil {
			return
		}
		for k := range m {
			if !strings.Contains(string(data), "STAT "+k) {
				t.Fatalf("stat %q not in %q", k, data)
			}
		}
	})
}

// FuzzParseInfo: any text parses without a panic, and every call count
// comes from a cmdstat_ line.
func FuzzParseInfo(f *testing.F) {
	for _, s := range []string{"# S\r\na:1\r\n", "cmdstat_get:calls=1,usec=2\r\n", "cmdstat_x:calls=-\r\n", ":\n#\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		info := ParseInfo(s)
		for name := range CommandCalls(info) {
			if !strings.Contains(s, "cmdstat_"+name) {
				t.Fatalf("command %q not in %q", name, s)
			}
		}
	})
}
