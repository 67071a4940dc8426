package loadgen

import (
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kuracache/kura/store"
)

// ErrConfig is wrapped by every error about a Config value that cannot work;
// the message names the field (and the CLI flag) and says what to do.
var ErrConfig = errors.New("kura: bad bench config")

// Command is the operation a workload sends.
type Command string

// Commands a workload can send. Template uses Config.Template.
const (
	CmdGet      Command = "get"
	CmdSet      Command = "set"
	CmdHSet     Command = "hset"
	CmdMGet     Command = "mget"
	CmdMSet     Command = "mset"
	CmdMixed    Command = "mixed" // SET and GET in Config.Ratio
	CmdTemplate Command = "template"
)

// Distribution is how keys are drawn from the key space.
type Distribution string

// Key distributions.
const (
	Uniform    Distribution = "uniform"
	Zipf       Distribution = "zipf"
	Sequential Distribution = "sequential"
)

// Config describes one run. The zero value (with a Target) is a 10 second
// closed-loop GET run over 50 connections without pipelining, 100,000 keys
// drawn uniformly and 100-byte random values.
type Config struct {
	// Target is where to send load: redis://[user:password@]host:port[/db],
	// rediss:// for TLS, several comma-separated host:port for a Redis
	// Cluster, or memcached://host:port[,host:port...]. See ParseTarget.
	Target string
	// User and Password, when set, replace the URL's credentials.
	User, Password string
	// Cluster forces Redis Cluster mode; without it, cluster mode is used
	// when the server says cluster_enabled:1.
	Cluster bool
	// InsecureTLS skips TLS certificate verification for rediss://.
	InsecureTLS bool
	// Resolver, if set, looks up the servers' host names instead of the
	// system's resolver (tests record every lookup with one).
	Resolver store.Resolver
	// TLSCAFile is a PEM file of CA certificates to trust for rediss://,
	// in addition to the system's.
	TLSCAFile string
	// Protocol is the memcached protocol: "meta" (default) or "text".
	Protocol string

	// Command is the operation; if blank, it is CmdGet, or CmdMixed when
	// Ratio is set, or CmdTemplate when Template is set.
	Command Command
	// Ratio is the SET:GET ratio for CmdMixed, such as "1:10" (memtier's
	// --ratio). If blank, it defaults to 1:10.
	Ratio string
	// Template is a Redis command with __key__ and __data__ placeholders,
	// such as ["HSET", "__key__", "f1", "__data__"] (redis-benchmark-go).
	Template []string
	// MultiKeys is the number of keys per MGET/MSET. If 0, it defaults to 10.
	MultiKeys int

	// Keys is the key space size. If 0, it defaults to 100,000.
	Keys int64
	// KeyPrefix is put before the 12-digit key number. If blank, "key:".
	KeyPrefix string
	// Distribution of keys; if blank, Uniform.
	Distribution Distribution
	// ZipfExponent is the Zipf exponent s (> 0). If 0, it defaults to 0.99.
	ZipfExponent float64

	// DataSize is the value size in bytes: "100", a range "100-1000", or a
	// weighted list "100:8,1000:2" (memtier's --data-size-list). If blank,
	// "100".
	DataSize string
	// DataContent is "random" (incompressible, the default) or "text"
	// (English-like words, compresses about 3x).
	DataContent string
	// TTL is the expiry set with every write; 0 means none.
	TTL time.Duration
	// Prefill writes every key of the key space once before the run so
	// that reads hit.
	Prefill bool

	// Connections is the number of workers, each with one connection per
	// server node. If 0, it defaults to 50 (redis-benchmark -c).
	Connections int
	// Pipeline is the number of requests a connection has in flight. If 0,
	// it defaults to 1.
	Pipeline int
	// Duration of the measured run. If 0 and Requests is 0, 10s.
	Duration time.Duration
	// Requests ends the run after this many operations (redis-benchmark -n).
	// With Duration also set, whichever comes first ends it.
	Requests int64
	// Rate, when > 0, is the open-loop target in operations per second over
	// all connections; latency is then measured from each request's
	// intended send time (coordinated omission corrected).
	Rate float64
	// Timeout is how long a connection waits for a reply or a dial before
	// the request counts as an error. If 0, 10s.
	Timeout time.Duration

	// Progress, when set, is called about once a second during the run
	// with the last interval's numbers. It runs on its own goroutine.
	Progress func(Interval)
}

// keyDigits is the fixed width of the key number, as redis-benchmark's
// __rand_int__ (12 digits), so every key has the same length.
const keyDigits = 12

// settings is a validated Config with defaults applied.
type settings struct {
	Config
	setRatio, getRatio int
	sizes              sizeSpec
	target             Target
	rootCAs            *x509.CertPool
}

func cfgErr(format string, a ...any) error {
	return &ConfigError{Reason: fmt.Sprintf(format, a...)}
}

// ConfigError is a Config value that cannot work. It matches ErrConfig.
type ConfigError struct {
	// Reason names the field (and the CLI flag) and says what to do,
	// without ErrConfig's text: what a command line prints.
	Reason string
	// Err is the cause, when there is one (a target URL that does not
	// parse).
	Err error
}

func (e *ConfigError) Error() string { return ErrConfig.Error() + ": " + e.Reason }

// Is reports whether target is ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// Unwrap returns the cause.
func (e *ConfigError) Unwrap() error { return e.Err }

// validate applies the documented defaults and rejects values that cannot
// work, naming the CLI flag so a person knows what to change.
func (c Config) validate() (*settings, error) {
	s := &settings{Config: c}
	t, err := ParseTarget(c.Target)
	if err != nil {
		return nil, err
	}
	if c.Cluster {
		if t.Kind != KindRedis {
			return nil, cfgErr("--cluster is for Redis targets; a memcached pool is several comma-separated addresses")
		}
		if t.Ring != nil {
			return nil, cfgErr("--cluster names a Redis Cluster, but %s is sharded standalone Redis (redis+ring://); drop one of them", t)
		}
		t.Cluster = true
	}
	if c.User != "" {
		t.User = c.User
	}
	if c.Password != "" {
		t.Password = c.Password
	}
	if t.Kind == KindMemcached && (t.User != "" || t.Password != "") {
		return nil, cfgErr("memcached has no password in the protocols kura speaks; drop --user/--password")
	}
	s.target = t
	if c.TLSCAFile != "" {
		if !t.TLS {
			return nil, cfgErr("--tls-ca is for rediss:// targets")
		}
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, cfgErr("--tls-ca: %v", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, cfgErr("--tls-ca %s holds no PEM certificate", c.TLSCAFile)
		}
		s.rootCAs = pool
	}
	switch {
	case c.Connections < 0:
		return nil, cfgErr("--connections must be at least 1, got %d", c.Connections)
	case c.Connections == 0:
		s.Connections = 50
	case c.Connections > 100000:
		return nil, cfgErr("--connections %d is more than any server accepts; use at most 100000", c.Connections)
	}
	switch {
	case c.Pipeline < 0:
		return nil, cfgErr("--pipeline must be at least 1, got %d", c.Pipeline)
	case c.Pipeline == 0:
		s.Pipeline = 1
	case c.Pipeline > 100000:
		return nil, cfgErr("--pipeline %d is too deep; use at most 100000", c.Pipeline)
	}
	if c.Duration < 0 {
		return nil, cfgErr("--duration must be positive, got %s", c.Duration)
	}
	if c.Requests < 0 {
		return nil, cfgErr("--requests must be positive, got %d", c.Requests)
	}
	if c.Duration == 0 && c.Requests == 0 {
		s.Duration = 10 * time.Second
	}
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		return nil, cfgErr("--rate must be a positive number of operations per second, got %v", c.Rate)
	}
	if c.Timeout < 0 {
		return nil, cfgErr("--timeout must be positive, got %s", c.Timeout)
	}
	if c.Timeout == 0 {
		s.Timeout = 10 * time.Second
	}
	if c.Keys < 0 {
		return nil, cfgErr("--keys must be at least 1, got %d", c.Keys)
	}
	if c.Keys == 0 {
		s.Keys = 100000
	}
	if s.Keys >= 1e12 {
		return nil, cfgErr("--keys %d does not fit in %d digits; use fewer keys", c.Keys, keyDigits)
	}
	if c.KeyPrefix == "" {
		s.KeyPrefix = "key:"
	}
	if strings.ContainsAny(s.KeyPrefix, " \r\n\t") || len(s.KeyPrefix) > 200 {
		return nil, cfgErr("--key-prefix must be short and without spaces or newlines, got %q", c.KeyPrefix)
	}
	switch c.Distribution {
	case "":
		s.Distribution = Uniform
	case Uniform, Zipf, Sequential:
	default:
		return nil, cfgErr("--distribution must be uniform, zipf or sequential, got %q", c.Distribution)
	}
	if c.ZipfExponent < 0 || math.IsNaN(c.ZipfExponent) || c.ZipfExponent > 10 {
		return nil, cfgErr("--zipf-exponent must be between 0 and 10 (0.99 is typical), got %v", c.ZipfExponent)
	}
	if c.ZipfExponent == 0 {
		s.ZipfExponent = 0.99
	}
	if c.DataSize == "" {
		s.DataSize = "100"
	}
	if s.sizes, err = parseSizes(s.DataSize); err != nil {
		return nil, err
	}
	switch c.DataContent {
	case "":
		s.DataContent = "random"
	case "random", "text":
	default:
		return nil, cfgErr("--data-content must be random or text, got %q", c.DataContent)
	}
	if c.TTL < 0 || (c.TTL > 0 && c.TTL < time.Second) {
		return nil, cfgErr("--ttl must be at least 1s (servers count expiry in seconds), got %s", c.TTL)
	}
	if c.MultiKeys < 0 || c.MultiKeys > 10000 {
		return nil, cfgErr("--multi-keys must be between 1 and 10000, got %d", c.MultiKeys)
	}
	if c.MultiKeys == 0 {
		s.MultiKeys = 10
	}
	if err := s.validateCommand(); err != nil {
		return nil, err
	}
	switch c.Protocol {
	case "":
		s.Protocol = "meta"
	case "meta", "text":
		if t.Kind != KindMemcached {
			return nil, cfgErr("--protocol %s is for memcached:// targets; Redis always speaks RESP", c.Protocol)
		}
	default:
		return nil, cfgErr("--protocol must be meta or text, got %q", c.Protocol)
	}
	return s, nil
}

func (s *settings) validateCommand() error {
	if s.Command == "" {
		switch {
		case len(s.Template) > 0:
			s.Command = CmdTemplate
		case s.Ratio != "":
			s.Command = CmdMixed
		default:
			s.Command = CmdGet
		}
	}
	s.Command = Command(strings.ToLower(string(s.Command)))
	switch s.Command {
	case CmdGet, CmdSet, CmdHSet, CmdMGet, CmdMSet:
		if s.Ratio != "" {
			return cfgErr("--ratio is for the mixed SET:GET workload; drop --command %s or --ratio", s.Command)
		}
	case CmdMixed:
		if s.Ratio == "" {
			s.Ratio = "1:10"
		}
		var err error
		if s.setRatio, s.getRatio, err = parseRatio(s.Ratio); err != nil {
			return err
		}
	case CmdTemplate:
		if len(s.Template) == 0 {
			return cfgErr("a command template needs at least a command name, such as: hset __key__ f1 __data__")
		}
	default:
		return cfgErr("--command must be get, set, hset, mget, mset or mixed (or give a command template after the URL), got %q", s.Command)
	}
	if s.Command != CmdTemplate && len(s.Template) > 0 {
		return cfgErr("give either --command or a command template, not both")
	}
	if s.target.Kind == KindMemcached && s.Command == CmdHSet {
		return cfgErr("hset is a Redis command; memcached takes get, set, mget, mset or mixed")
	}
	if s.target.Kind == KindMemcached && s.Command == CmdTemplate {
		return cfgErr("%q is a Redis command template; memcached takes --command get, set, mget, mset or mixed", strings.Join(s.Template, " "))
	}
	return nil
}

// parseRatio reads --ratio SET:GET, such as 1:10; either side may be 0,
// not both.
func parseRatio(r string) (set, get int, err error) {
	a, b, ok := strings.Cut(r, ":")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || x < 0 || y < 0 || x+y == 0 || x > 1e6 || y > 1e6 {
		return 0, 0, cfgErr("--ratio must be SET:GET such as 1:10, got %q", r)
	}
	return x, y, nil
}

// sizeSpec draws value sizes: a fixed size, a uniform range, or a weighted
// list.
type sizeSpec struct {
	min, max int
	// weighted, when set, holds cumulative weights and their sizes.
	sizes   []int
	weights []int // cumulative
}

// maxValueSize is the largest value a run will write (512 MB is Redis's
// limit, but values above a few MB measure the network, not the cache).
const maxValueSize = 64 << 20

func parseSize(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > maxValueSize {
		return 0, cfgErr("--data-size %q: want a byte count from 0 to %d", s, maxValueSize)
	}
	return n, nil
}

// parseSizes reads "100", "100-1000" or "100:8,1000:2".
func parseSizes(s string) (sizeSpec, error) {
	var sp sizeSpec
	if strings.Contains(s, ":") {
		total := 0
		for _, part := range strings.Split(s, ",") {
			a, b, ok := strings.Cut(part, ":")
			if !ok {
				return sp, cfgErr("--data-size list entries must be SIZE:WEIGHT such as 100:8,1000:2, got %q", part)
			}
			n, err := parseSize(a)
			if err != nil {
				return sp, err
			}
			w, err := strconv.Atoi(strings.TrimSpace(b))
			if err != nil || w < 1 || w > 1e6 {
				return sp, cfgErr("--data-size weight must be a whole number from 1, got %q", b)
			}
			total += w
			sp.sizes = append(sp.sizes, n)
			sp.weights = append(sp.weights, total)
			sp.max = max(sp.max, n)
		}
		sp.min = sp.sizes[0]
		for _, n := range sp.sizes {
			sp.min = min(sp.min, n)
		}
		return sp, nil
	}
	if a, b, ok := strings.Cut(s, "-"); ok && a != "" {
		lo, err := parseSize(a)
		if err != nil {
			return sp, err
		}
		hi, err := parseSize(b)
		if err != nil {
			return sp, err
		}
		if hi < lo {
			return sp, cfgErr("--data-size range %q runs backwards; write MIN-MAX", s)
		}
		sp.min, sp.max = lo, hi
		return sp, nil
	}
	n, err := parseSize(s)
	if err != nil {
		return sp, err
	}
	sp.min, sp.max = n, n
	return sp, nil
}

// mean returns the expected value size, for reports.
func (sp sizeSpec) mean() float64 {
	if len(sp.sizes) > 0 {
		sum, prev := 0.0, 0
		for i, n := range sp.sizes {
			sum += float64(n * (sp.weights[i] - prev))
			prev = sp.weights[i]
		}
		return sum / float64(prev)
	}
	return float64(sp.min+sp.max) / 2
}
