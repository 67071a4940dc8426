package servertest

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Resolver is a name resolver the test controls (store.Resolver): a name
// resolves to the addresses last given with Set, and to nothing ("no such
// host") before or after Unset. Point a name at 127.0.0.1, then at
// 127.0.0.2 (both loopback) to move a server "under the same name".
type Resolver struct {
	mu      sync.Mutex
	hosts   map[string][]string
	lookups atomic.Int64
}

// NewResolver returns an empty Resolver.
func NewResolver() *Resolver { return &Resolver{hosts: map[string][]string{}} }

// Set makes host resolve to ips.
func (r *Resolver) Set(host string, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hosts[host] = append([]string(nil), ips...)
}

// Unset makes host resolve to nothing.
func (r *Resolver) Unset(host string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.hosts, host)
}

// Lookups counts LookupHost calls.
func (r *Resolver) Lookups() int64 { return r.lookups.Load() }

// LookupHost implements store.Resolver.
func (r *Resolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	r.lookups.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	ips := r.hosts[host]
	r.mu.Unlock()
	if len(ips) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return append([]string(nil), ips...), nil
}

// Eventually calls fn until it returns nil, failing the test with fn's
// last error when it has not within a minute (a bound for a broken build,
// not a measurement: the machine may be slow).
func Eventually(tb testing.TB, what string, fn func() error) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: still failing after a minute: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
