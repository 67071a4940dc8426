package faults

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// BlackHole is a loopback listener that accepts every connection, reads
// and discards what the client sends, and never answers: the view a
// client has of a server that is up at the TCP level but hung (a deadlock,
// a full disk, a stuck event loop). Connecting succeeds, writes succeed,
// reads wait until the client's own deadline.
//
// It is safe for concurrent use.
type BlackHole struct {
	ln       net.Listener
	accepted atomic.Int64
	bytes    atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewBlackHole listens on a free port of 127.0.0.1.
func NewBlackHole() (*BlackHole, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &BlackHole{ln: ln, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

// Addr returns the listener's host:port.
func (b *BlackHole) Addr() string { return b.ln.Addr().String() }

// Conns returns how many connections were accepted so far.
func (b *BlackHole) Conns() int64 { return b.accepted.Load() }

// Bytes returns how many bytes clients sent (all discarded).
func (b *BlackHole) Bytes() int64 { return b.bytes.Load() }

func (b *BlackHole) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			c.Close()
			return
		}
		b.conns[c] = struct{}{}
		b.accepted.Add(1)
		b.wg.Add(1)
		b.mu.Unlock()
		go func() {
			defer b.wg.Done()
			_, _ = io.Copy(counter{&b.bytes}, c)
			c.Close()
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
		}()
	}
}

// Close stops listening, closes every accepted connection and waits for
// its goroutines to end. It is safe to call more than once.
func (b *BlackHole) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	err := b.ln.Close()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

// counter is an io.Writer that counts and discards.
type counter struct{ n *atomic.Int64 }

func (w counter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}
