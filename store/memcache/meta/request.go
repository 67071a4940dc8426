package meta

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Command is a meta command.
type Command byte

// The meta commands.
const (
	// Get is mg: read an item, its metadata, or touch it.
	Get Command = 'g'
	// Set is ms: store an item (set, add, replace, append, prepend, CAS).
	Set Command = 's'
	// Delete is md: remove an item or mark it stale.
	Delete Command = 'd'
	// Arith is ma: increment or decrement a counter.
	Arith Command = 'a'
	// Noop is mn: answers MN; ends a pipeline of quiet commands.
	Noop Command = 'n'
)

func (c Command) String() string {
	switch c {
	case Get, Set, Delete, Arith, Noop:
		return "m" + string(rune(c))
	}
	return fmt.Sprintf("Command(%d)", byte(c))
}

// Set modes for Request.Mode (the M flag of ms), and arithmetic modes (the
// M flag of ma).
const (
	ModeAdd     byte = 'E'
	ModeAppend  byte = 'A'
	ModePrepend byte = 'P'
	ModeReplace byte = 'R'
	ModeSet     byte = 'S'
	ModeIncr    byte = 'I'
	ModeDecr    byte = 'D'
)

// Request is one meta command. Fields map one to one onto meta flags; a
// zero field sends no flag, so the zero Request plus Cmd and Key is the
// plainest form of each command. Flags a command does not take are not
// checked here: memcached answers CLIENT_ERROR, and the connection is then
// discarded.
type Request struct {
	Cmd Command
	// Key is the caller's key; it is encoded on the way out (see
	// AppendKey), so any non-empty string works.
	Key string
	// Value is the data block of ms.
	Value []byte

	// Quiet (q) suppresses the uninteresting answers: HD of ms and md, EN
	// of mg. Errors and hits still come back.
	Quiet bool
	// Opaque (O) is echoed in the answer when non-zero. Exec overrides it
	// to match answers to requests.
	Opaque uint32

	ReturnValue       bool // v: mg and ma return the value
	ReturnCAS         bool // c
	ReturnTTL         bool // t: remaining TTL in seconds, -1 for none
	ReturnClientFlags bool // f
	ReturnKey         bool // k
	ReturnSize        bool // s
	ReturnHit         bool // h: whether the item was hit before
	ReturnLastAccess  bool // l: seconds since last access
	NoBump            bool // u: do not bump the item in the LRU

	// TTL is the T flag in wire seconds (see TTL). It is sent when
	// non-zero, or when ForceTTL is set (mg with T0 makes an item
	// permanent; md with I and T0 likewise).
	TTL      int64
	ForceTTL bool
	// CompareCAS (C) makes the command conditional on the item's CAS.
	CompareCAS uint64
	// NewCAS (E) sets the item's CAS to this value if it is modified,
	// so a version from the database can be the cache's version.
	NewCAS uint64
	// ClientFlags (F) are the 32 opaque bits stored with an item by ms.
	ClientFlags uint32
	// Invalidate (I): on md, mark stale instead of removing (readers get
	// X, and one of them W); on ms with CompareCAS, accept an older CAS
	// but store the item as stale.
	Invalidate bool
	// RemoveValue (x) on md empties the value but keeps the item: with
	// Invalidate it leaves a tombstone.
	RemoveValue bool
	// Vivify (N) on mg creates an empty item on a miss with this TTL and
	// hands this caller the W (won) flag: a lease for the recache. On ma it
	// creates the counter; on ms in append mode it autovivifies.
	Vivify int64
	// Recache (R) on mg hands out W when the remaining TTL is below this
	// many seconds: refresh before expiry by exactly one caller.
	Recache int64
	// Mode (M) selects the ms mode (ModeAdd, ...) or the ma mode
	// (ModeIncr, ModeDecr).
	Mode byte
	// Delta (D) and Initial (J) are the arguments of ma.
	Delta   uint64
	Initial uint64
}

// maxTTLDelta is the largest TTL memcached takes as relative seconds;
// larger values are absolute Unix times.
const maxTTLDelta = 30 * 24 * 60 * 60

// TTL converts a time to live into the seconds memcached expects in the T
// flag. 0 means no expiry. A duration is rounded up to whole seconds, so a
// positive TTL never becomes "no expiry" and never expires early. Beyond 30
// days memcached reads the number as an absolute Unix time, so such TTLs
// are sent as now + ttl.
func TTL(ttl time.Duration, now time.Time) int64 {
	if ttl <= 0 {
		return 0
	}
	secs := int64(ttl / time.Second)
	if ttl%time.Second != 0 {
		secs++
	}
	if secs <= maxTTLDelta {
		return secs
	}
	abs := now.Unix() + secs
	if abs > math.MaxInt32 || abs < 0 {
		// memcached parses an exptime as a signed 32-bit number: past
		// 2038-01-19 it answers HD and the item is gone at once, so a
		// TTL that ends beyond that means "forever".
		return 0
	}
	return abs
}

// AppendRequest appends the wire form of r to dst: the command line and,
// for ms, the data block. It fails for a key that has no wire form (the
// empty key) and for an unknown command or mode.
func AppendRequest(dst []byte, r *Request) ([]byte, error) {
	dst, err := appendLine(dst, r)
	if err != nil || r.Cmd != Set {
		return dst, err
	}
	dst = append(dst, r.Value...)
	return append(dst, '\r', '\n'), nil
}

// appendLine appends the command line of r, "\r\n" included.
func appendLine(dst []byte, r *Request) ([]byte, error) {
	switch r.Cmd {
	case Noop:
		return append(dst, "mn\r\n"...), nil
	case Get, Set, Delete, Arith:
	default:
		return dst, fmt.Errorf("meta: unknown command %v", r.Cmd)
	}
	switch r.Mode {
	case 0, ModeAdd, ModeAppend, ModePrepend, ModeReplace, ModeSet, ModeIncr, ModeDecr, '+', '-':
	default:
		return dst, fmt.Errorf("meta: invalid mode %q", r.Mode)
	}
	start := len(dst)
	dst = append(dst, 'm', byte(r.Cmd), ' ')
	dst, b64, err := AppendKey(dst, r.Key)
	if err != nil {
		return dst[:start], err
	}
	if r.Cmd == Set {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(len(r.Value)), 10)
	}
	dst = appendFlags(dst, r, b64)
	return append(dst, '\r', '\n'), nil
}

func appendFlags(dst []byte, r *Request, b64 bool) []byte {
	flag := func(c byte) { dst = append(dst, ' ', c) }
	num := func(c byte, v uint64) {
		dst = append(dst, ' ', c)
		dst = strconv.AppendUint(dst, v, 10)
	}
	if b64 {
		flag('b')
	}
	if r.ReturnValue {
		flag('v')
	}
	if r.ReturnCAS {
		flag('c')
	}
	if r.ReturnTTL {
		flag('t')
	}
	if r.ReturnClientFlags {
		flag('f')
	}
	if r.ReturnKey {
		flag('k')
	}
	if r.ReturnSize {
		flag('s')
	}
	if r.ReturnHit {
		flag('h')
	}
	if r.ReturnLastAccess {
		flag('l')
	}
	if r.NoBump {
		flag('u')
	}
	if r.Invalidate {
		flag('I')
	}
	if r.RemoveValue {
		flag('x')
	}
	if r.TTL != 0 || r.ForceTTL {
		dst = append(dst, ' ', 'T')
		dst = strconv.AppendInt(dst, r.TTL, 10)
	}
	if r.CompareCAS != 0 {
		num('C', r.CompareCAS)
	}
	if r.NewCAS != 0 {
		num('E', r.NewCAS)
	}
	if r.ClientFlags != 0 {
		num('F', uint64(r.ClientFlags))
	}
	if r.Vivify > 0 {
		num('N', uint64(r.Vivify))
	}
	if r.Recache > 0 {
		num('R', uint64(r.Recache))
	}
	if r.Mode != 0 {
		dst = append(dst, ' ', 'M', r.Mode)
	}
	if r.Delta != 0 {
		num('D', r.Delta)
	}
	if r.Initial != 0 {
		num('J', r.Initial)
	}
	if r.Quiet {
		flag('q')
	}
	if r.Opaque != 0 {
		num('O', uint64(r.Opaque))
	}
	return dst
}
