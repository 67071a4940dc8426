// Package faults injects network and server faults between a client and a
// real server, for the tests, benchmarks and demo of every kura package.
//
// The faults, and where each lives:
//
//   - Crash and restart on the same port: servers.Proc.Kill (SIGKILL, as a
//     crash) and servers.Proc.Restart (SIGKILL if running, then the same
//     binary, arguments, port and directory, waiting until it serves).
//     Works for redis-server, each node of a RedisCluster and memcached.
//   - Stall of the whole server: servers.Proc.Pause / Resume (SIGSTOP /
//     SIGCONT): the kernel still accepts connections, nothing answers.
//   - A black hole (BlackHole): a listener that accepts, reads and never
//     answers, for a node that is up at the TCP level but hung.
//   - A Proxy in front of one server: a fixed delay per direction (an
//     emulated round trip), a bandwidth limit (bytes/s per direction,
//     shared by every connection, as one small node's link), a stall of
//     the traffic (Stall/Unstall: no bytes lost), refusing new connections
//     (Refuse/Admit: "connection refused" while open ones keep working),
//     a reset in the middle of a reply (ResetNextReply), and resetting
//     every open connection (ResetConns).
//
// The Proxy also counts what passes through it (ProxyStats): connections,
// bytes each way, round trips (turnarounds: a client→server burst that
// follows a server→client one; see ProxyStats.RoundTrips for the exact
// definition) and, with ProxyOptions.Protocol set, requests by command
// name, so a test can assert what reached a node ("the GETs to node 2
// stopped, only PINGs remain") rather than how long it took.
//
// Nothing here logs; everything listens on 127.0.0.1 only. In tests, use
// servertest.Proxy and servertest.BlackHole, which close them when the
// test ends.
//
// Example, in a test:
//
//	r := servertest.Redis(t, servers.RedisConfig{})
//	p := servertest.Proxy(t, r.Addr, faults.ProxyOptions{
//		Delay:    250 * time.Microsecond, // 500µs round trip
//		Protocol: faults.RESP,
//	})
//	client := connect(p.Addr())   // the code under test talks to the proxy
//	before := p.Stats()
//	// ... 10 Fetches of a warm key ...
//	d := p.Stats().Sub(before)
//	// d.Commands["get"] == 10; d.RoundTrips == 10
//	p.Stall()                     // the node stops answering
//	p.ResetNextReply(100)         // or: the next reply is cut after 100 bytes
//	r.Kill()                      // or: the node crashes ...
//	_ = r.Restart(ctx)            // ... and comes back, empty, on its port
package faults
