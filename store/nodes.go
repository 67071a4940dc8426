package store

import "context"

// NodeLocator is implemented by stores that spread keys over several
// servers (nodes), or talk to one: it says which node serves a key, so a
// circuit breaker (package store/health) can fail one node's keys fast
// while the other nodes keep serving theirs.
type NodeLocator interface {
	// NodeOf returns the address of the node that serves key, as
	// NodeError.Addr would name it, or "" when it is not known (a Redis
	// Cluster whose slot map has not been read yet).
	NodeOf(key string) string
}

// NodeProber is implemented by stores that can check one node's health
// on a connection of its own, apart from the connections that carry
// application commands, so a health check never waits in a pool or
// behind a pipeline of real requests (the failure that made one
// application's pings take over 200 ms on a busy Redis).
type NodeProber interface {
	// Nodes returns the addresses of the nodes that serve keys now (the
	// masters of a Redis Cluster, every server of a memcached pool).
	Nodes() []string
	// ProbeNode sends one cheap command (PING, mn) to the node at addr on
	// its dedicated probe connection and waits for the answer within ctx.
	// Callers run at most one ProbeNode per node at a time.
	ProbeNode(ctx context.Context, addr string) error
}
