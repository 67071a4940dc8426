package wire

import (
	"fmt"
	"net"
	"strconv"
)

// SlotRange is one entry of a CLUSTER SLOTS reply: the slots First to
// Last (inclusive), the address of their master and how many replicas
// the reply lists for it.
type SlotRange struct {
	First, Last int
	Master      string // host:port
	Replicas    int
}

// ParseSlots reads a CLUSTER SLOTS reply as ReadValue returns it (or
// rueidis's ToAny): entries of [first slot, last slot, [master host,
// port, ...], replicas...]. A master that does not know its own address
// (host "" or "?") is on seedHost. Any malformed entry fails the whole
// reply: a slot map is used whole or not at all.
func ParseSlots(v any, seedHost string) ([]SlotRange, error) {
	entries, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: CLUSTER SLOTS answered %T", ErrProtocol, v)
	}
	out := make([]SlotRange, 0, len(entries))
	for _, r := range entries {
		e, ok := r.([]any)
		if !ok || len(e) < 3 {
			return nil, fmt.Errorf("%w: CLUSTER SLOTS entry %v", ErrProtocol, r)
		}
		lo, ok1 := e[0].(int64)
		hi, ok2 := e[1].(int64)
		m, ok3 := e[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(m) < 2 || lo < 0 || hi >= 16384 || lo > hi {
			return nil, fmt.Errorf("%w: CLUSTER SLOTS entry %v", ErrProtocol, r)
		}
		host, _ := m[0].(string)
		port, _ := m[1].(int64)
		if port <= 0 || port > 65535 {
			return nil, fmt.Errorf("%w: CLUSTER SLOTS entry %v has no valid port", ErrProtocol, r)
		}
		if host == "" || host == "?" {
			host = seedHost
		}
		out = append(out, SlotRange{First: int(lo), Last: int(hi), Master: net.JoinHostPort(host, strconv.FormatInt(port, 10)), Replicas: len(e) - 3})
	}
	return out, nil
}
