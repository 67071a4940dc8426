package loadgen

import (
	"bytes"
	"compress/flate"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string // a word the message must contain (the flag)
	}{
		{"negative connections", Config{Connections: -1}, "--connections"},
		{"negative pipeline", Config{Pipeline: -2}, "--pipeline"},
		{"negative duration", Config{Duration: -time.Second}, "--duration"},
		{"negative requests", Config{Requests: -5}, "--requests"},
		{"negative rate", Config{Rate: -1}, "--rate"},
		{"NaN rate", Config{Rate: math.NaN()}, "--rate"},
		{"bad ratio", Config{Ratio: "1-10"}, "--ratio"},
		{"zero ratio", Config{Ratio: "0:0"}, "--ratio"},
		{"ratio with get", Config{Command: CmdGet, Ratio: "1:1"}, "--ratio"},
		{"unknown command", Config{Command: "flushall"}, "--command"},
		{"backwards range", Config{DataSize: "10-1"}, "--data-size"},
		{"bad weight", Config{DataSize: "10:0"}, "--data-size"},
		{"huge size", Config{DataSize: "999999999999"}, "--data-size"},
		{"bad distribution", Config{Distribution: "pareto"}, "--distribution"},
		{"bad zipf", Config{ZipfExponent: -1}, "--zipf-exponent"},
		{"bad content", Config{DataContent: "zeros"}, "--data-content"},
		{"sub-second ttl", Config{TTL: 10 * time.Millisecond}, "--ttl"},
		{"too many keys", Config{Keys: 1e12}, "--keys"},
		{"prefix with space", Config{KeyPrefix: "a b"}, "--key-prefix"},
		{"protocol on redis", Config{Protocol: "text"}, "--protocol"},
		{"bad protocol", Config{Target: "memcached://h:1", Protocol: "binary"}, "--protocol"},
		{"hset on memcached", Config{Target: "memcached://h:1", Command: CmdHSet}, "hset"},
		{"template on memcached", Config{Target: "memcached://h:1", Template: []string{"HGET", "__key__"}}, "template"},
		{"template and command", Config{Command: CmdGet, Template: []string{"GET", "__key__"}}, "either"},
		{"cluster on memcached", Config{Target: "memcached://h:1", Cluster: true}, "--cluster"},
		{"bad scheme", Config{Target: "http://h:1"}, "scheme"},
		{"bad port", Config{Target: "redis://h:99999"}, "host:port"},
		{"cluster db", Config{Target: "redis://a:1,b:2/3"}, "database 0"},
		{"memcached password", Config{Target: "memcached://u:p@h:1"}, "password"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.cfg.validate()
			if err == nil {
				t.Fatalf("validate(%+v) = nil, want an error", c.cfg)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %v does not match ErrConfig", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not mention %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is more than one line", err)
			}
		})
	}
}

func TestValidateDefaults(t *testing.T) {
	s, err := Config{}.validate()
	if err != nil {
		t.Fatal(err)
	}
	if s.Connections != 50 || s.Pipeline != 1 || s.Duration != 10*time.Second || s.Keys != 100000 ||
		s.Command != CmdGet || s.Distribution != Uniform || s.sizes.min != 100 || s.sizes.max != 100 ||
		s.target.Addrs[0] != "127.0.0.1:6379" || s.Protocol != "meta" {
		t.Errorf("defaults: %+v", s)
	}
	s, err = Config{Ratio: "1:3"}.validate()
	if err != nil || s.Command != CmdMixed || s.setRatio != 1 || s.getRatio != 3 {
		t.Errorf("ratio implies mixed: %+v %v", s, err)
	}
	s, err = Config{Template: []string{"hset", "__key__", "f", "__data__"}}.validate()
	if err != nil || s.Command != CmdTemplate {
		t.Errorf("template implies CmdTemplate: %v %v", s.Command, err)
	}
}

func TestParseTarget(t *testing.T) {
	cases := []struct {
		in   string
		want Target
	}{
		{"", Target{Kind: KindRedis, Addrs: []string{"127.0.0.1:6379"}}},
		{"redis://h.internal", Target{Kind: KindRedis, Addrs: []string{"h.internal:6379"}}},
		{"h:7000", Target{Kind: KindRedis, Addrs: []string{"h:7000"}}},
		{"redis://u:p%40ss@h:1/2", Target{Kind: KindRedis, Addrs: []string{"h:1"}, User: "u", Password: "p@ss", DB: 2}},
		{"redis://secret@h:1", Target{Kind: KindRedis, Addrs: []string{"h:1"}, Password: "secret"}},
		{"rediss://:pw@h:1", Target{Kind: KindRedis, Addrs: []string{"h:1"}, Password: "pw", TLS: true}},
		{"redis://a:1,b:2", Target{Kind: KindRedis, Addrs: []string{"a:1", "b:2"}, Cluster: true}},
		{"redis://a:1?addr=b:2&addr=c:3", Target{Kind: KindRedis, Addrs: []string{"a:1", "b:2", "c:3"}, Cluster: true}},
		{"memcached://a,b:5", Target{Kind: KindMemcached, Addrs: []string{"a:11211", "b:5"}}},
		{"redis://[::1]:6380", Target{Kind: KindRedis, Addrs: []string{"[::1]:6380"}}},
	}
	for _, c := range cases {
		got, err := ParseTarget(c.in)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", c.in, err)
			continue
		}
		if got.String() != c.want.String() || got.Password != c.want.Password || got.Cluster != c.want.Cluster || got.TLS != c.want.TLS {
			t.Errorf("ParseTarget(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
	if got, _ := ParseTarget("redis://u:secret@h:1"); strings.Contains(got.String(), "secret") {
		t.Errorf("String() shows the password: %s", got)
	}
}

func TestParseSizes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sp, err := parseSizes("100:3,1000:1")
	if err != nil {
		t.Fatal(err)
	}
	n100 := 0
	for range 10000 {
		switch sp.draw(r) {
		case 100:
			n100++
		case 1000:
		default:
			t.Fatal("drew a size not in the list")
		}
	}
	if n100 < 7000 || n100 > 8000 {
		t.Errorf("weights 3:1 gave %d of 10000 at 100", n100)
	}
	if m := sp.mean(); m != 325 {
		t.Errorf("mean = %v, want 325", m)
	}
	sp, _ = parseSizes("10-20")
	for range 1000 {
		if n := sp.draw(r); n < 10 || n > 20 {
			t.Fatalf("range 10-20 drew %d", n)
		}
	}
}

func TestZipf(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range []float64{0.7, 0.99, 1.2} {
		z := newZipfKeys(1000, s)
		counts := make([]int, 1000)
		const n = 400000
		for range n {
			k := z.next(r)
			if k >= 1000 {
				t.Fatalf("key %d out of range", k)
			}
			counts[k]++
		}
		// P(k) is proportional to 1/(k+1)^s: key 0 against key 1 is 2^s.
		got := float64(counts[0]) / float64(counts[1])
		if want := math.Pow(2, s); math.Abs(got-want)/want > 0.1 {
			t.Errorf("s=%v: count(0)/count(1) = %.3f, want %.3f", s, got, want)
		}
		got = float64(counts[0]) / float64(counts[9])
		if want := math.Pow(10, s); math.Abs(got-want)/want > 0.15 {
			t.Errorf("s=%v: count(0)/count(9) = %.3f, want %.3f", s, got, want)
		}
	}
}

func TestAppendKey(t *testing.T) {
	if got := string(appendKey(nil, "key:", 42)); got != "key:000000000042" {
		t.Errorf("appendKey = %q", got)
	}
}

func TestTextValuesCompress(t *testing.T) {
	for _, content := range []string{"text", "random"} {
		s, err := Config{DataContent: content, DataSize: "4096"}.validate()
		if err != nil {
			t.Fatal(err)
		}
		p := newValuePool(s, 1)
		var z bytes.Buffer
		w, _ := flate.NewWriter(&z, flate.DefaultCompression)
		_, _ = w.Write(p.buf[:64<<10])
		_ = w.Close()
		ratio := float64(64<<10) / float64(z.Len())
		if content == "text" && ratio < 2 {
			t.Errorf("text values compress only %.2fx", ratio)
		}
		if content == "random" && ratio > 1.05 {
			t.Errorf("random values compress %.2fx", ratio)
		}
	}
}
