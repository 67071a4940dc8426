package meta

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Pipeline tuning. A window is a run of requests closed by an mn; its MN
// proves every request before it was processed, and error lines (which
// carry no O token) are matched to requests inside their window only.
const (
	// windowSize bounds how many requests share one window: an error line
	// that cannot be placed exactly fails at most this many keys. It costs
	// 4 bytes each way per window.
	windowSize = 32
	// isolateBytes: an ms with a value this large gets a window of its
	// own, so a refusal for size ("object too large", which memcached may
	// send even below item_size_max because of its per-item overhead) is
	// pinned to exactly that key.
	isolateBytes = 64 << 10
	// inlineBytes: pipelines up to this size are written whole, then read.
	// Larger ones are written by a second goroutine while this one reads,
	// so neither side can stall on a full socket buffer.
	inlineBytes = 16 << 10
)

// ErrAmbiguous wraps an error line that arrived in a window holding more
// than one request that could have caused it. Every such request is
// reported failed with it: a false failure costs a cache miss, a dropped
// one would cost a wrong answer.
var ErrAmbiguous = errors.New("meta: error line could not be matched to one request; every request that may have caused it is reported")

// Exec sends reqs on one connection as a pipeline and calls each for every
// request that got an answer or failed. Requests are sent in order, with
// Opaque overwritten by the request's index + 1; an mn closes every window
// of requests and the last one, so a stream of Quiet requests costs one
// round trip and only interesting answers (hits, NS, NF, EX, errors) come
// back.
//
// each(i, res, nil) reports an answer to reqs[i]; each(i, nil, err) reports
// that reqs[i] failed: its key had no wire form, the server sent an error
// line for it, or the connection failed before its window was confirmed.
// A Quiet request never named by each succeeded. each runs on the calling
// goroutine, one call at a time; res is reused after each returns, except
// res.Value, which the callback may keep.
//
// The returned error is the one that broke the pipeline (dial, I/O,
// protocol), already reported through each for the requests it hit.
func (cl *Client) Exec(ctx context.Context, reqs []Request, each func(i int, res *Response, err error)) error {
	if len(reqs) == 0 {
		return nil
	}
	if len(reqs) >= math.MaxUint32 {
		return fmt.Errorf("meta: pipeline of %d requests is too long", len(reqs))
	}
	// Refuse what cannot be sent before anything is: such requests are
	// simply left out of the windows.
	send := make([]int32, 0, len(reqs))
	size := 0
	limit := cl.ItemSizeMax()
	for i := range reqs {
		r := &reqs[i]
		if r.Cmd == Noop {
			continue // the pipeline adds its own
		}
		if _, err := ClassifyKey(r.Key); err != nil {
			each(i, nil, err)
			continue
		}
		if r.Cmd == Set && limit > 0 && len(r.Value) > limit {
			each(i, nil, tooLarge(r.Key, len(r.Value), limit, cl.addr))
			continue
		}
		send = append(send, int32(i))
		size += len(r.Key) + len(r.Value) + 32
	}
	if len(send) == 0 {
		return nil
	}
	p := &pipeline{reqs: reqs, send: send, each: each}
	p.plan()

	c, err := cl.Conn(ctx)
	if err != nil {
		p.failFrom(0, err)
		return err
	}
	defer cl.Put(c)
	c.Begin(ctx)
	defer c.End()

	if size <= inlineBytes {
		if err := p.write(c); err != nil {
			p.failFrom(0, err)
			return err
		}
		return p.read(c, 0)
	}
	werr := make(chan error, 1)
	go func() {
		err := p.write(c)
		if err != nil {
			// Unblock the reader: it would otherwise wait for answers to
			// requests that never left.
			c.fail(err)
			_ = c.nc.Close()
		}
		werr <- err
	}()
	rerr := p.read(c, 0)
	if rerr != nil {
		// Stop the writer (it may be blocked on a full socket).
		_ = c.nc.Close()
	}
	if err := <-werr; err != nil && rerr != nil {
		// The write failure is the cause; the read error its echo.
		return err
	}
	return rerr
}

type pipeline struct {
	reqs []Request
	send []int32 // indexes of reqs to send, in order
	ends []int   // window w covers send[ends[w-1]:ends[w]]
	each func(int, *Response, error)
}

func (p *pipeline) plan() {
	p.ends = make([]int, 0, len(p.send)/windowSize+1) // grows only for isolated large values
	n := 0
	for j, i := range p.send {
		r := &p.reqs[i]
		if r.Cmd == Set && len(r.Value) >= isolateBytes {
			if n > 0 {
				p.ends = append(p.ends, j)
			}
			p.ends = append(p.ends, j+1)
			n = 0
			continue
		}
		n++
		if n == windowSize {
			p.ends = append(p.ends, j+1)
			n = 0
		}
	}
	if n > 0 {
		p.ends = append(p.ends, len(p.send))
	}
}

func (p *pipeline) write(c *Conn) error {
	noop := Request{Cmd: Noop}
	start := 0
	for _, end := range p.ends {
		for _, i := range p.send[start:end] {
			r := p.reqs[i]
			r.Opaque = uint32(i) + 1
			if err := c.WriteRequest(&r); err != nil {
				return err
			}
		}
		if err := c.WriteRequest(&noop); err != nil {
			return err
		}
		start = end
	}
	return c.Flush()
}

// failFrom reports err for every request from window w on.
func (p *pipeline) failFrom(w int, err error) {
	start := 0
	if w > 0 {
		start = p.ends[w-1]
	}
	for _, i := range p.send[start:] {
		p.each(int(i), nil, err)
	}
}

// read consumes answers window by window from window w.
func (p *pipeline) read(c *Conn, w int) error {
	var (
		res      Response
		resolved = make([]bool, windowSize)
		bare     []Response
	)
	start := 0
	if w > 0 {
		start = p.ends[w-1]
	}
	for ; w < len(p.ends); w++ {
		end := p.ends[w]
		win := p.send[start:end]
		if cap(resolved) < len(win) {
			resolved = make([]bool, len(win))
		}
		resolved = resolved[:len(win)]
		clear(resolved)
		bare = bare[:0]
		// Requests of this window are reqs[win[k]]; answers carry O =
		// index + 1 and come in request order.
		pos := 0 // answers must not go back in the window
		for {
			if err := c.ReadResponse(&res); err != nil {
				p.failUnresolved(win, resolved, bare, err)
				p.failFrom(w+1, err)
				return err
			}
			if res.Status == MN {
				break
			}
			if res.Status.IsError() {
				if res.Status != StatusServerError {
					// ERROR / CLIENT_ERROR: the server may have read a
					// data block as commands. Nothing after this point
					// can be trusted.
					err := fmt.Errorf("memcache %s: %w", c.client.addr, res.Err())
					c.fail(err)
					p.failUnresolved(win, resolved, bare, err)
					p.failFrom(w+1, err)
					return err
				}
				bare = append(bare, res)
				continue
			}
			k := -1
			if res.Opaque != 0 {
				for j := pos; j < len(win); j++ {
					if uint32(win[j])+1 == res.Opaque {
						k = j
						break
					}
				}
			}
			if k < 0 || resolved[k] {
				err := c.fail(fmt.Errorf("memcache %s: %w: %s answer with O%d out of place",
					c.client.addr, ErrProtocol, res.Status, res.Opaque))
				p.failUnresolved(win, resolved, bare, err)
				p.failFrom(w+1, err)
				return err
			}
			if len(bare) > 0 {
				// Error lines before this answer belong to requests before
				// it: settle them now, exactly when possible.
				p.settle(win[pos:k], resolved[pos:k], bare, c.client.addr)
				bare = bare[:0]
			}
			resolved[k] = true
			pos = k + 1
			p.each(int(win[k]), &res, nil)
		}
		if len(bare) > 0 {
			p.settle(win[pos:], resolved[pos:], bare, c.client.addr)
		}
		start = end
	}
	return nil
}

// settle assigns error lines to the unresolved requests of a span of a
// window. When there are as many errors as candidates, each request gets
// its own (answers come in order); otherwise every candidate gets the
// first error marked ambiguous.
func (p *pipeline) settle(win []int32, resolved []bool, bare []Response, addr string) {
	var cand []int32
	for k, i := range win {
		if !resolved[k] {
			cand = append(cand, i)
			resolved[k] = true
		}
	}
	if len(cand) == len(bare) {
		for k, i := range cand {
			p.each(int(i), nil, fmt.Errorf("memcache %s: %w", addr, bare[k].Err()))
		}
		return
	}
	err := fmt.Errorf("memcache %s: %w (%w; %d error line(s) for %d request(s))",
		addr, bare[0].Err(), ErrAmbiguous, len(bare), len(cand))
	for _, i := range cand {
		p.each(int(i), nil, err)
	}
}

// failUnresolved reports err for the requests of the current window that
// have no answer yet: the window was not confirmed, so their fate is
// unknown.
func (p *pipeline) failUnresolved(win []int32, resolved []bool, bare []Response, err error) {
	if len(bare) > 0 {
		err = fmt.Errorf("%w (after %w)", err, bare[0].Err())
	}
	for k, i := range win {
		if !resolved[k] {
			p.each(int(i), nil, err)
		}
	}
}
