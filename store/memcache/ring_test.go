package memcache

import (
	"bufio"
	"flag"
	"fmt"
	"github.com/kuracache/kura/ring"
	"math"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/ketama_golden.txt")

func servers(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("10.0.0.%d:11211", i+1)
	}
	return s
}

// TestRingRemap checks consistent hashing: going from N to N+1 servers
// moves about 1/(N+1) of the keys, and only onto the new server.
func TestRingRemap(t *testing.T) {
	const keys = 100000
	for _, n := range []int{2, 3, 5, 10} {
		before, err := NewRing(servers(n), nil)
		if err != nil {
			t.Fatal(err)
		}
		after, err := NewRing(servers(n+1), nil)
		if err != nil {
			t.Fatal(err)
		}
		moved := 0
		for i := 0; i < keys; i++ {
			k := fmt.Sprintf("user:%d:item", i)
			a, b := before.Server(k), after.Server(k)
			if a != b {
				moved++
				if b != after.addrs[n] {
					t.Fatalf("%s moved from %s to %s, not to the new server", k, a, b)
				}
			}
		}
		frac, want := float64(moved)/keys, 1/float64(n+1)
		// 160 points per server leave a few percent of imbalance.
		if math.Abs(frac-want) > 0.35*want {
			t.Errorf("%d->%d servers moved %.3f of the keys, want about %.3f", n, n+1, frac, want)
		}
		t.Logf("%d->%d servers: moved %.4f (ideal %.4f)", n, n+1, frac, want)
	}
}

// TestRingWeights checks that a server of weight 2 gets about twice the
// keys of one of weight 1.
func TestRingWeights(t *testing.T) {
	r, err := NewRing(servers(3), []int{1, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	count := make([]int, 3)
	for i := 0; i < 100000; i++ {
		count[r.Index(fmt.Sprintf("k%d", i))]++
	}
	ratio := float64(count[1]) / float64(count[0]+count[2]) * 2
	if ratio < 1.6 || ratio > 2.4 {
		t.Errorf("weight-2 share ratio %.2f (counts %v), want about 2", ratio, count)
	}
	if r.r.(*ring.Ketama).Points() != 4*(30+60+30) {
		t.Errorf("%d points, want %d", r.r.(*ring.Ketama).Points(), 4*120)
	}
}

// TestRingGolden pins the mapping: the same keys must land on the same
// servers in every process and every release, or a deploy would empty the
// cache. Regenerate only on purpose, with -update.
func TestRingGolden(t *testing.T) {
	r, err := NewRing(servers(4), []int{1, 1, 2, 1})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# key -> server for servers 10.0.0.1-4:11211, weights 1,1,2,1\n")
	for i := 0; i < 200; i++ {
		k := fmt.Sprintf("golden:%d", i)
		fmt.Fprintf(&b, "%s %s\n", k, r.Server(k))
	}
	const path = "testdata/ketama_golden.txt"
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		k, want, _ := strings.Cut(line, " ")
		if got := r.Server(k); got != want {
			t.Errorf("%s -> %s, golden %s", k, got, want)
		}
		n++
	}
	if n != 200 {
		t.Fatalf("golden file has %d keys", n)
	}
}

func TestRingIndexDoesNotAllocate(t *testing.T) {
	r, err := NewRing([]string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := "UserItem/4200001/inventory/detail/with-a-long-suffix"
	if n := testing.AllocsPerRun(100, func() { _ = r.Index(key) }); n != 0 {
		t.Fatalf("Ring.Index allocates %v times per key", n)
	}
}
