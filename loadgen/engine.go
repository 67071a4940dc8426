package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kuracache/kura/internal/redial"
)

type opKind uint8

const (
	opGet opKind = iota
	opSet
	opHSet
	opMGet
	opMSet
	opTemplate
)

// op is one operation of a batch: one latency sample and one count,
// however many keys (MGET) or servers (a memcached pool) it touches.
type op struct {
	kind    opKind
	keys    []uint64
	start   time.Duration // since the run's base time: intended (open loop) or actual send
	pending int
	hits    int
	misses  int
	errs    int
	errMsg  string
}

func (o *op) fail(msg string) {
	o.errs++
	if o.errMsg == "" {
		o.errMsg = msg
	}
}

// protocol encodes requests and reads replies on the load path. Neither
// method may allocate in the common case.
type protocol interface {
	encode(dst []byte, w *worker, kind opKind, keys []uint64) []byte
	read(r *bufio.Reader, o *op, nkeys int) error
}

var (
	_ protocol = (*redisProto)(nil)
	_ protocol = (*mcProto)(nil)
)

// earlyWindow is how long before its intended time an open-loop request
// may be sent. Go timers are coarse under load (a 50µs sleep can take over
// a millisecond), and waking late would add the client's own lateness to
// every latency; waking early and timing from the actual send does not.
// A request whose intended time passed while the server stalled is still
// timed from its intended time, which is the coordinated-omission
// correction.
const earlyWindow = time.Millisecond

// seg is the part of an op that goes to one node: keys karena[node][lo:hi].
type seg struct{ op, lo, hi int }

// runner is one run in progress.
type runner struct {
	s     *settings
	proto protocol
	top   *topology     // fixed topology (standalone, memcached)
	cs    *clusterState // non-nil for Redis Cluster
	base  time.Time
	endAt time.Duration // 0: no time limit

	issued atomic.Int64
	stop   atomic.Bool
	shards []*shard

	// interval is each worker's time between intended sends, open loop.
	interval float64

	mu                sync.Mutex
	conns             map[*conn]struct{} // every open load connection, to unblock on cancel
	bytesIn, bytesOut int64              // of closed connections
}

func (r *runner) topology() *topology {
	if r.cs != nil {
		return r.cs.get()
	}
	return r.top
}

func (r *runner) track(c *conn) {
	r.mu.Lock()
	r.conns[c] = struct{}{}
	r.mu.Unlock()
}

func (r *runner) untrack(c *conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.bytesIn += c.in()
	r.bytesOut += c.out
	r.mu.Unlock()
	c.close()
}

// unblock makes every pending read return at once, for cancellation.
func (r *runner) unblock() {
	r.mu.Lock()
	for c := range r.conns {
		_ = c.nc.SetDeadline(time.Now())
	}
	r.mu.Unlock()
}

// claim reserves up to n operation numbers; it returns the first and how
// many were granted (0 when --requests is used up).
func (r *runner) claim(n int) (int64, int) {
	end := r.issued.Add(int64(n))
	start := end - int64(n)
	if lim := r.s.Requests; lim > 0 {
		if start >= lim {
			return 0, 0
		}
		if end > lim {
			n = int(lim - start)
		}
	}
	return start, n
}

// worker is one closed- or open-loop client with a connection per node.
type worker struct {
	id     int
	r      *runner
	s      *settings
	rng    *rand.Rand
	keys   keyGen
	values *valuePool
	shard  *shard

	top    *topology
	conns  []*conn
	ops    []op
	segs   [][]seg
	karena [][]uint64
	wbuf   [][]byte
	lat    []int64
	kbuf   []byte
	nodeOf []int
	timer  *time.Timer
}

func newWorker(r *runner, id int, values *valuePool) *worker {
	s := r.s
	w := &worker{
		id: id, r: r, s: s,
		rng:    rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(id)*0x9e3779b97f4a7c15)),
		keys:   newKeyGen(s),
		values: values,
		shard:  r.shards[id%len(r.shards)],
		ops:    make([]op, s.Pipeline),
		lat:    make([]int64, 0, s.Pipeline),
	}
	nk := 1
	if s.Command == CmdMGet || s.Command == CmdMSet {
		nk = s.MultiKeys
	}
	for i := range w.ops {
		w.ops[i].keys = make([]uint64, 0, nk)
	}
	return w
}

// connect (re)opens a connection to every node of the current topology.
func (w *worker) connect(ctx context.Context) error {
	w.closeAll()
	top := w.r.topology()
	w.top = top
	n := len(top.addrs)
	w.conns = make([]*conn, n)
	w.segs = make([][]seg, n)
	w.karena = make([][]uint64, n)
	w.wbuf = make([][]byte, n)
	for i, a := range top.addrs {
		c, err := dial(ctx, w.s, a)
		if err != nil {
			// Leave no half-built set behind: the run loop reconnects
			// when conns is nil (a set with nil entries crashed the
			// worker after a dial failed during a server stall).
			w.closeAll()
			w.conns = nil
			return err
		}
		w.r.track(c)
		w.conns[i] = c
		w.wbuf[i] = make([]byte, 0, 4096)
	}
	return nil
}

func (w *worker) closeAll() {
	for i, c := range w.conns {
		if c != nil {
			w.r.untrack(c)
			w.conns[i] = nil
		}
	}
}

// gen fills o with the next operation; seq is its global number.
func (w *worker) gen(o *op, seq int64) {
	s := w.s
	nk := 1
	switch s.Command {
	case CmdGet:
		o.kind = opGet
	case CmdSet:
		o.kind = opSet
	case CmdHSet:
		o.kind = opHSet
	case CmdTemplate:
		o.kind = opTemplate
	case CmdMGet:
		o.kind, nk = opMGet, s.MultiKeys
	case CmdMSet:
		o.kind, nk = opMSet, s.MultiKeys
	case CmdMixed:
		if w.rng.IntN(s.setRatio+s.getRatio) < s.setRatio {
			o.kind = opSet
		} else {
			o.kind = opGet
		}
	}
	o.keys = o.keys[:0]
	for j := range nk {
		var k uint64
		if s.Distribution == Sequential {
			k = uint64(seq*int64(nk)+int64(j)) % uint64(s.Keys)
		} else {
			k = w.keys.next(w.rng)
		}
		o.keys = append(o.keys, k)
	}
	o.pending, o.hits, o.misses, o.errs, o.errMsg = 0, 0, 0, 0, ""
}

// route returns the node of key number k.
func (w *worker) route(k uint64) int {
	if len(w.conns) == 1 {
		return 0
	}
	w.kbuf = appendKey(w.kbuf[:0], w.s.KeyPrefix, k)
	return w.top.route(w.kbuf)
}

// roundTrip sends ops[:n], one write per node, and reads every reply,
// recording each op's latency when its last reply is read. Closed loop:
// ops are timed from the write. An error means a connection failed; the
// ops not answered count as errors (flush).
func (w *worker) roundTrip(n int, closedLoop bool) error {
	nodes := len(w.conns)
	for i := range nodes {
		w.segs[i] = w.segs[i][:0]
		w.karena[i] = w.karena[i][:0]
		w.wbuf[i] = w.wbuf[i][:0]
	}
	for i := range n {
		o := &w.ops[i]
		if len(o.keys) == 1 || nodes == 1 {
			nd := w.route(o.keys[0])
			lo := len(w.karena[nd])
			w.karena[nd] = append(w.karena[nd], o.keys...)
			w.segs[nd] = append(w.segs[nd], seg{i, lo, lo + len(o.keys)})
			continue
		}
		// A multi-key op over a memcached pool: one request per server.
		w.nodeOf = w.nodeOf[:0]
		for _, k := range o.keys {
			w.nodeOf = append(w.nodeOf, w.route(k))
		}
		for nd := range nodes {
			lo := len(w.karena[nd])
			for j, k := range o.keys {
				if w.nodeOf[j] == nd {
					w.karena[nd] = append(w.karena[nd], k)
				}
			}
			if hi := len(w.karena[nd]); hi > lo {
				w.segs[nd] = append(w.segs[nd], seg{i, lo, hi})
			}
		}
	}
	proto := w.r.proto
	for nd := range nodes {
		for _, sg := range w.segs[nd] {
			o := &w.ops[sg.op]
			w.wbuf[nd] = proto.encode(w.wbuf[nd], w, o.kind, w.karena[nd][sg.lo:sg.hi])
			o.pending++
		}
	}
	now := time.Now()
	sent := now.Sub(w.r.base)
	for i := range n {
		// Closed loop: from the send. Open loop: from the intended time,
		// or the send when that came first (see earlyWindow).
		if o := &w.ops[i]; closedLoop || sent < o.start {
			o.start = sent
		}
	}
	for nd := range nodes {
		if len(w.wbuf[nd]) == 0 {
			continue
		}
		if err := w.conns[nd].write(w.wbuf[nd], now); err != nil {
			return fmt.Errorf("connection to %s lost: %v", w.conns[nd].addr, redial.Cause(err))
		}
	}
	w.lat = w.lat[:0]
	for nd := range nodes {
		c := w.conns[nd]
		// A reply parsed without a new read from the socket arrived with
		// the previous one: reuse its timestamp instead of reading the
		// clock for every reply of a deep pipeline.
		var done time.Duration
		lastIn := int64(-1)
		for _, sg := range w.segs[nd] {
			o := &w.ops[sg.op]
			if err := proto.read(c.r, o, sg.hi-sg.lo); err != nil {
				if errors.Is(err, errProtocol) {
					return fmt.Errorf("%s sent a reply kura cannot read: %v", c.addr, err)
				}
				return fmt.Errorf("connection to %s lost: %v", c.addr, redial.Cause(err))
			}
			o.pending--
			if o.pending == 0 {
				if in := c.in(); in != lastIn {
					done, lastIn = time.Since(w.r.base), in
				}
				w.lat = append(w.lat, int64(done-o.start))
			}
		}
	}
	return nil
}

// run is the worker's loop until the run ends.
func (w *worker) run(ctx context.Context) {
	r, s := w.r, w.s
	open := s.Rate > 0
	next := 0.0
	if open {
		// Stagger the workers over one interval so that sends are spread
		// evenly, not in bursts of Connections at a time.
		next = r.interval * float64(w.id) / float64(s.Connections)
	}
	backoff := 50 * time.Millisecond
	for !r.stop.Load() {
		if w.conns == nil || (r.cs != nil && w.top != r.cs.get()) {
			if err := w.connect(ctx); err != nil {
				w.shard.addError(err.Error())
				if w.sleep(ctx, backoff) != nil {
					return
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			backoff = 50 * time.Millisecond
		}
		n := s.Pipeline
		if r.endAt > 0 && time.Since(r.base) >= r.endAt {
			// The run ends at its duration in both loops. An open loop
			// behind its schedule (--rate above what the server or this
			// client can do) used to keep sending its backlog: --rate 1e9
			// --duration 1s ran until killed. What was due and not sent
			// shows as throughput below the target rate.
			return
		}
		if open {
			if r.endAt > 0 && next >= float64(r.endAt) {
				// Nothing more is due before the end: wait for it, so
				// that a slow run (--rate 0.001) lasts the duration it
				// was given and its figures are per that duration, not
				// per the moment its last request came back.
				_ = w.sleep(ctx, r.endAt-time.Since(r.base))
				return
			}
			// Timers wake up to a millisecond or more late on a busy
			// machine, so sleep only until earlyWindow before the intended
			// time; requests sent early are timed from their actual send
			// (roundTrip), requests sent late from their intended time.
			now := float64(time.Since(r.base))
			if wait := next - now - float64(earlyWindow); wait > 0 {
				if w.sleep(ctx, time.Duration(wait)) != nil {
					return
				}
				now = float64(time.Since(r.base))
			}
			n = min(n, 1+int(max(now+float64(earlyWindow)-next, 0)/r.interval))
		}
		seq, n := r.claim(n)
		if n == 0 {
			return
		}
		for i := range n {
			o := &w.ops[i]
			w.gen(o, seq+int64(i))
			if open {
				o.start = time.Duration(next)
				next += r.interval
			}
		}
		err := w.roundTrip(n, !open)
		if moved := w.flush(n, err); moved && r.cs != nil {
			r.cs.refresh(ctx)
		}
		if err != nil {
			w.closeAll()
			w.conns = nil
		}
	}
}

// flush hands a finished batch to the worker's shard. It reports whether
// a reply was a cluster redirection (MOVED/ASK): the slot map is stale.
func (w *worker) flush(n int, err error) (moved bool) {
	sh := w.shard
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, l := range w.lat {
		sh.record(l)
	}
	// A batch cut off by the end of the run (Ctrl-C unblocks every read)
	// did not fail: its unanswered requests are neither operations nor
	// errors nor latency samples.
	cancelled := err != nil && w.r.stop.Load()
	for i := range n {
		o := &w.ops[i]
		if cancelled && o.pending > 0 {
			continue
		}
		sh.ops++
		sh.hits += int64(o.hits)
		sh.misses += int64(o.misses)
		switch {
		case o.pending > 0:
			sh.errs++
		case o.errs > 0:
			sh.errs++
			sh.sample(o.errMsg)
			if strings.HasPrefix(o.errMsg, "MOVED ") || strings.HasPrefix(o.errMsg, "ASK ") {
				moved = true
			}
		}
	}
	if err != nil && !cancelled {
		sh.sample(err.Error())
		// Requests given up on (a timeout, a lost connection) count in the
		// latency figures at the moment they were abandoned: leaving them
		// out made a 3 s stall look like a 3 ms maximum.
		abandoned := time.Since(w.r.base)
		for i := range n {
			if o := &w.ops[i]; o.pending > 0 {
				sh.abandoned++
				sh.record(int64(abandoned - o.start))
			}
		}
	}
	return moved
}

// sleep waits d or until ctx ends, reusing one timer: the open loop sleeps
// once per batch.
func (w *worker) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-ctx.Done():
		w.timer.Stop()
		return ctx.Err()
	case <-w.timer.C:
		return nil
	}
}
