package meta

import (
	"strings"
	"testing"
)

func TestParseDumpLine(t *testing.T) {
	it, err := ParseDumpLine("key=user%3A1%20x exp=1700000100 la=1700000000 cas=5 fetch=no cls=3 size=170")
	if err != nil {
		t.Fatal(err)
	}
	if it.Key != "user:1 x" || it.Exp != 1700000100 || it.LastAccess != 1700000000 || it.Class != 3 || it.Size != 170 {
		t.Fatalf("%+v", it)
	}
	for _, bad := range []string{"", "exp=-1 size=3", "key=a size=x", "key=a size=-5", "key=%zz", "key= size=1"} {
		if _, err := ParseDumpLine(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// FuzzParseDumpLine: any line is an item or an error, never a panic, and
// an item always has a key and a non-negative size.
func FuzzParseDumpLine(f *testing.F) {
	for _, s := range []string{
		"key=a exp=-1 la=1 cas=1 fetch=no cls=1 size=64",
		"key=%E5%AF%BF%E5%8F%B8 exp=1 la=1 size=9999999999",
		"key=x==y size=1 size=2",
		"key",
		strings.Repeat("key=a ", 100),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		it, err := ParseDumpLine(s)
		if err == nil && (it.Key == "" || it.Size < 0) {
			t.Fatalf("%q: %+v", s, it)
		}
	})
}
