// Package redial dials "host:port" addresses, looking the host name up
// again on every new connection, and counts what happened per address:
// connections, failures, reconnections, lookups and address changes
// (store.NodeConnStats). Managed caches (ElastiCache, Memorystore) give
// clients DNS names whose address changes on failover or node
// replacement; a client that resolved once at start would dial the old
// address forever.
//
// Concurrent lookups of one host share one query, so many callers hitting
// a server whose name does not resolve send one query at a time, not one
// each.
package redial

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kuracache/kura/store"
)

// Dialer opens TCP connections to host:port addresses. The zero value is
// not usable; use New.
type Dialer struct {
	// NoResolve hands the address to the dial function as it is (a
	// custom dialer that resolves, or needs the name for TLS); the
	// connections are still counted.
	NoResolve bool

	resolver store.Resolver
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)

	mu      sync.Mutex
	nodes   map[string]*node
	lookups map[string]*lookup
}

type node struct {
	dials, dialFails, reconnects, resolves, resolveFails, changes atomic.Uint64
	failing                                                       atomic.Bool // the last attempt failed
	resolved                                                      atomic.Pointer[string]
}

type lookup struct {
	done    chan struct{}
	addrs   []string
	err     error
	waiters int // callers sharing it (guarded by Dialer.mu)
}

// New returns a Dialer that resolves with r (net.DefaultResolver if nil)
// and connects with dial (a net.Dialer if nil) to the resolved ip:port.
func New(r store.Resolver, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Dialer {
	if r == nil {
		r = net.DefaultResolver
	}
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return &Dialer{resolver: r, dial: dial, nodes: map[string]*node{}, lookups: map[string]*lookup{}}
}

// Track makes addr appear in Stats before it is first dialed.
func (d *Dialer) Track(addr string) { d.node(addr) }

func (d *Dialer) node(addr string) *node {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[addr]
	if n == nil {
		n = &node{}
		d.nodes[addr] = n
	}
	return n
}

// DialContext connects to addr ("host:port"). A host name is looked up
// on every call and the addresses are tried in the order the resolver
// gave them until one connects; an IP address is dialed as it is.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	n := d.node(addr)
	nc, ip, err := d.connect(ctx, n, network, addr)
	if err != nil {
		n.dialFails.Add(1)
		n.failing.Store(true)
		return nil, err
	}
	n.dials.Add(1)
	if n.failing.Swap(false) {
		n.reconnects.Add(1)
	}
	if old := n.resolved.Swap(&ip); old != nil && *old != ip {
		n.changes.Add(1)
	}
	return nc, nil
}

func (d *Dialer) connect(ctx context.Context, n *node, network, addr string) (net.Conn, string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", err
	}
	if d.NoResolve || net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")) != nil {
		nc, err := d.dial(ctx, network, addr)
		return nc, addr, err
	}
	n.resolves.Add(1)
	ips, err := d.lookup(ctx, host)
	if err == nil && len(ips) == 0 {
		err = &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	if err != nil {
		n.resolveFails.Add(1)
		// The error net.Dialer gives for a name that does not resolve,
		// so callers that tell dial errors apart see one.
		return nil, "", &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var errs []error
	for _, ip := range ips {
		a := net.JoinHostPort(ip, port)
		nc, err := d.dial(ctx, network, a)
		if err == nil {
			return nc, a, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", errors.Join(errs...)
}

// lookup resolves host, sharing one query among concurrent callers. A
// caller whose ctx ends stops waiting; the query goes on for the others
// under the first caller's context.
func (d *Dialer) lookup(ctx context.Context, host string) ([]string, error) {
	d.mu.Lock()
	l := d.lookups[host]
	if l == nil {
		l = &lookup{done: make(chan struct{})}
		d.lookups[host] = l
		d.mu.Unlock()
		l.addrs, l.err = d.resolver.LookupHost(ctx, host)
		d.mu.Lock()
		delete(d.lookups, host)
		d.mu.Unlock()
		close(l.done)
		return l.addrs, l.err
	}
	l.waiters++
	d.mu.Unlock()
	select {
	case <-l.done:
		return l.addrs, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Stats returns every address's counters, sorted by address.
func (d *Dialer) Stats() []store.NodeConnStats {
	d.mu.Lock()
	out := make([]store.NodeConnStats, 0, len(d.nodes))
	for addr, n := range d.nodes {
		st := store.NodeConnStats{
			Addr: addr, Dials: n.dials.Load(), DialFailures: n.dialFails.Load(), Reconnects: n.reconnects.Load(),
			Resolves: n.resolves.Load(), ResolveFailures: n.resolveFails.Load(), AddrChanges: n.changes.Load(),
		}
		if r := n.resolved.Load(); r != nil {
			st.Resolved = *r
		}
		out = append(out, st)
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b store.NodeConnStats) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}
