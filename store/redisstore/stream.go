package redisstore

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/redis/rueidis"

	"github.com/kuracache/kura/store"
)

// Sent is a multi-key read that has been written to its server and whose
// replies are not read yet (SendGetAt): a store that spreads one batch
// over several Stores (a ring's shards) sends every shard its share from
// one goroutine, then reads the replies one shard after another, while
// the servers answer at the same time. Read it exactly once, with
// ReadValues or ReadLeases (then FinishLeases): until then it holds one of
// the server's connections.
type Sent struct {
	s      *Store
	ctx    context.Context
	keys   []string
	idx    []int // positions of the keys sent, in order
	stream rueidis.MultiRedisResultStream
	fails  failures
	start  time.Time
	read   bool
	// after ReadLeases: the positions that held nothing
	missing []int
}

// CanSend reports whether SendGetAt can send on this Store now: a
// connected standalone server (not a cluster, not a Sentinel master set).
// Otherwise read with GetManyAt or LeaseGetAt.
func (s *Store) CanSend() bool {
	cn := s.cur.Load()
	return cn != nil && !cn.cluster && s.masterSet == "" && !s.closed.Load()
}

// SendGetAt writes one GET for keys[i], for every i in idx, on a
// connection of its own from rueidis's pool (DoMultiStream), and returns
// without reading the replies. Invalid keys are not sent and fail in the
// read's error. A GET per key rather than one MGET: rueidis streams only
// replies that are single strings, and a streamed reply is copied into
// one allocation of the value's exact size, with no parsed message in
// between. Use it only when CanSend is true.
func (s *Store) SendGetAt(ctx context.Context, keys []string, idx []int) *Sent {
	p := &Sent{s: s, ctx: ctx, keys: keys, fails: failures{op: "get", n: len(idx)}}
	cn, err := s.ready(ctx)
	if err != nil {
		for _, i := range idx {
			p.fails.add(keys[i], s.addrOf(keys[i]), err)
		}
		return p
	}
	p.idx = idx
	for _, i := range idx {
		if store.CheckKey(keys[i]) != nil {
			p.idx = validOnly(keys, idx, len(idx), &p.fails)
			break
		}
	}
	if len(p.idx) == 0 {
		return p
	}
	cmds := make([]rueidis.Completed, len(p.idx))
	for j, i := range p.idx {
		cmds[j] = cn.c.B().Get().Key(keys[i]).Build()
	}
	p.start = time.Now()
	p.stream = cn.c.DoMultiStream(ctx, cmds...)
	return p
}

var errReadTwice = errors.New("redisstore: a Sent read twice (its replies are gone)")

// valueSink receives one streamed value. rueidis copies a value into an
// io.ReaderFrom through an io.LimitedReader of the value's length, so
// ReadFrom allocates the value's exact size once.
type valueSink struct{ b []byte }

func (w *valueSink) Write(b []byte) (int, error) {
	w.b = append(w.b, b...)
	return len(b), nil
}

func (w *valueSink) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok && lr.N > 0 && lr.N <= 1<<40 {
		w.b = make([]byte, lr.N)
		n, err := io.ReadFull(lr, w.b)
		w.b = w.b[:n]
		return int64(n), err
	}
	b, err := io.ReadAll(r)
	w.b = append(w.b, b...)
	return int64(len(b)), err
}

// each reads the replies, handing each value found to put (a missing key
// is not handed over; an empty value is empty, not nil). A reply the
// server refused fails its key; a broken connection or the deadline fails
// the key and every one after it.
func (p *Sent) each(put func(i int, v []byte)) {
	if p.read {
		for _, i := range p.idx {
			p.fails.add(p.keys[i], "", errReadTwice)
		}
		return
	}
	p.read = true
	if len(p.idx) == 0 {
		return
	}
	var w valueSink
	var broken error
	for _, i := range p.idx {
		if broken != nil {
			p.fail(i, broken)
			continue
		}
		w.b = nil
		_, err := p.stream.WriteTo(&w)
		switch {
		case err == nil:
			put(i, nonNil(w.b))
		case rueidis.IsRedisNil(err):
		case isRedisErr(err):
			p.fail(i, err)
		default:
			broken = p.streamErr(err)
			p.fail(i, broken)
		}
	}
	for p.stream.HasNext() { // never left holding the connection
		if _, err := p.stream.WriteTo(io.Discard); err != nil && !rueidis.IsRedisNil(err) && !isRedisErr(err) {
			break
		}
	}
	if rt := store.RoundTrips(p.ctx); rt != nil {
		var b batches
		addr := p.s.answering(p.s.addrOf(""))
		for _, i := range p.idx {
			_, failed := p.failed(i)
			b.add("GET", addr, 1, failed)
		}
		b.report(rt, p.start, time.Now())
	}
}

// streamErr is the error of a broken stream: the context's, when its
// deadline is what ended the read (as rueidis's DoMulti says it).
func (p *Sent) streamErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if dl, ok := p.ctx.Deadline(); ok && !time.Now().Before(dl) {
			return context.DeadlineExceeded
		}
	}
	return err
}

func (p *Sent) fail(i int, err error) {
	addr := p.s.addrOf(p.keys[i])
	p.fails.add(p.keys[i], addr, p.s.keyErr(addr, err))
}

func (p *Sent) failed(i int) (error, bool) {
	if p.fails.be == nil {
		return nil, false
	}
	for _, ke := range p.fails.be.Errors {
		if ke.Key == p.keys[i] {
			return ke.Err, true
		}
	}
	return nil, false
}

// ReadValues reads the replies of a SendGetAt into vals (aligned with its
// keys), as GetManyAt does: vals[i] is left nil for a missing key, and the
// other elements of vals are not touched. The error names only keys of
// the Sent.
func (p *Sent) ReadValues(vals [][]byte) error {
	p.each(func(i int, v []byte) { vals[i] = v })
	return p.fails.result(p.ctx)
}

// ReadLeases reads the replies of a SendGetAt into out (aligned with its
// keys) as LeaseGetAt's read does: a hit's value, and its bytes as its
// Lease's Token. The keys that held nothing get their leases in
// FinishLeases, which gives the error; call it after ReadLeases.
func (p *Sent) ReadLeases(out []store.LeaseResult) {
	p.fails.op = "lease"
	p.each(func(i int, v []byte) {
		out[i].Value = v
		out[i].Lease = store.Lease{Key: p.keys[i], Token: v}
	})
	var failed map[string]error
	if p.fails.be != nil {
		failed = p.fails.be.Failed()
	}
	for _, i := range p.idx {
		if out[i].Value != nil {
			continue
		}
		if _, bad := failed[p.keys[i]]; !bad {
			p.missing = append(p.missing, i)
		}
	}
}

// Misses reports whether ReadLeases found keys that held nothing:
// FinishLeases then takes their leases with a round trip.
func (p *Sent) Misses() bool { return len(p.missing) > 0 }

// FinishLeases takes the leases of the keys ReadLeases found empty (SET
// key placeholder NX PX ttl, as LeaseGet does) and returns the lease
// read's error, naming only keys of the Sent.
func (p *Sent) FinishLeases(out []store.LeaseResult, opts store.LeaseOptions) error {
	if err := checkLeaseOptions(opts); err != nil {
		return err
	}
	if len(p.missing) > 0 {
		cn, err := p.s.ready(p.ctx)
		if err != nil {
			for _, i := range p.missing {
				p.fails.add(p.keys[i], p.s.addrOf(p.keys[i]), err)
			}
		} else {
			p.s.takeLeases(p.ctx, cn, p.keys, p.missing, out, opts, &p.fails)
		}
	}
	return p.fails.result(p.ctx)
}
