package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kuracache/kura/internal/harness/servers"
)

// redisBenchmarkFlags says what kura bench does with each flag of
// redis-benchmark (7.0, as Debian ships it): "same" (kura bench has a flag
// of that name), "url" (it is part of the target URL), "--flag" (kura
// bench's flag of another name), "" (no counterpart).
var redisBenchmarkFlags = map[string]string{
	"-h": "url", "-p": "url", "--dbnum": "url", "--tls": "url",
	"-a": "same", "--user": "same", "-u": "same", "-c": "same", "-n": "same", "-d": "same",
	"-r": "same", "-P": "same", "-t": "same", "--threads": "same", "--cluster": "same", "--insecure": "same",
	"--cacert": "--tls-ca", "--csv": "--json", "-q": "--json",
	"-s": "", "-3": "", "--enable-tracking": "", "-k": "", "--precision": "", "-l": "", "-I": "", "-x": "",
	"--sni": "", "--cacertdir": "", "--cert": "", "--key": "", "--tls-ciphers": "", "--tls-ciphersuites": "",
}

var flagSpan = regexp.MustCompile("`(-{1,2}[A-Za-z0-9][A-Za-z0-9-]*)")

// TestREADMENamesRedisBenchmarkFlags holds the README's account of which
// redis-benchmark flags kura bench maps against `redis-benchmark --help`
// on this machine: every flag redis-benchmark has is classified (a new
// one fails here until it is), every flag said to keep its name is a flag
// of kura bench, and the README's list of flags without a counterpart is
// exactly the rest, naming no flag redis-benchmark does not have.
func TestREADMENamesRedisBenchmarkFlags(t *testing.T) {
	path, err := servers.LookPath("redis-benchmark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-benchmark not found (make servers installs redis-tools)")
		}
		t.Skip("redis-benchmark not found (make servers installs redis-tools)")
	}
	help, _ := exec.Command(path, "--help").CombinedOutput() // exits 0 or 1 by version
	flagLine := regexp.MustCompile(`(?m)^ (-{1,2}[A-Za-z0-9][A-Za-z0-9-]*)`)
	var theirs []string
	for _, m := range flagLine.FindAllStringSubmatch(string(help), -1) {
		if m[1] != "--help" && m[1] != "--version" {
			theirs = append(theirs, m[1])
		}
	}
	if len(theirs) < 20 {
		t.Fatalf("read only %d flags from redis-benchmark --help:\n%s", len(theirs), help)
	}
	bench := newBenchCmd()
	has := func(flag string) bool {
		name := strings.TrimLeft(flag, "-")
		if strings.HasPrefix(flag, "--") {
			return bench.Flags().Lookup(name) != nil
		}
		return bench.Flags().ShorthandLookup(name) != nil
	}
	for _, f := range theirs {
		how, ok := redisBenchmarkFlags[f]
		switch {
		case !ok:
			t.Errorf("redis-benchmark has %s, which neither this test nor the README classifies", f)
		case how == "same" && !has(f):
			t.Errorf("%s is said to keep its name, but kura bench has no %s", f, f)
		case strings.HasPrefix(how, "-") && !has(how):
			t.Errorf("%s is said to be kura bench's %s, which does not exist", f, how)
		}
	}
	for f := range redisBenchmarkFlags {
		if !slices.Contains(theirs, f) {
			t.Errorf("this test classifies %s, which redis-benchmark --help does not list", f)
		}
	}

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(readme), "`kura bench` takes these redis-benchmark flags")
	if !ok {
		t.Fatal("README no longer says which redis-benchmark flags kura bench takes")
	}
	para, _, _ = strings.Cut(para, "\n\n")
	mapped, none, ok := strings.Cut(para, "No counterpart:")
	if !ok {
		t.Fatal(`the README's paragraph on redis-benchmark flags has no "No counterpart:" list`)
	}
	spans := func(s string) []string {
		var out []string
		for _, m := range flagSpan.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		return out
	}
	inMapped := spans(mapped)
	for f, how := range redisBenchmarkFlags {
		if how != "" && !slices.Contains(inMapped, f) {
			t.Errorf("README does not say what becomes of redis-benchmark's %s (%s)", f, how)
		}
	}
	for _, f := range inMapped {
		if _, theirs := redisBenchmarkFlags[f]; !theirs && !has(f) {
			t.Errorf("README names %s, a flag of neither redis-benchmark nor kura bench", f)
		}
	}
	var want []string
	for f, how := range redisBenchmarkFlags {
		if how == "" {
			want = append(want, f)
		}
	}
	got := spans(none)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("README's flags without a counterpart: %v; redis-benchmark's flags kura bench has no counterpart for: %v", got, want)
	}
}
