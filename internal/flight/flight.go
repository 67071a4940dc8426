// Package flight runs one load per key at a time and shares its result
// with every caller that asks for the same key meanwhile (singleflight),
// with three differences from golang.org/x/sync/singleflight that a cache
// in front of a database needs:
//
//   - The load runs on its own goroutine under a context that keeps the
//     first caller's values but not its cancellation, bounded by a timeout
//     of its own. A caller whose context ends stops waiting and gets its
//     context's error; the load goes on for the others.
//   - A panic in the load never escapes on a goroutine nobody can recover
//     (x/sync re-panics with `go panic(e)`, which ends the process even
//     under net/http's per-request recover). The caller that started the
//     flight gets the panic again in its own goroutine, where its own
//     recover works; callers that joined get an error matching
//     ErrPanicked.
//   - Results are typed: no interface conversion of a nil value.
package flight

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// ErrPanicked is matched by the error callers that joined a flight get
// when its load panicked.
var ErrPanicked = errors.New("kura: loader panicked")

// PanicError is what the caller that started a flight panics with when the
// load panicked: the original value and the stack of the load's goroutine.
type PanicError struct {
	Value any
	Stack []byte
}

func (p *PanicError) Error() string {
	return fmt.Sprintf("kura: loader panicked: %v\n\n%s", p.Value, p.Stack)
}

// Unwrap lets errors.Is(p, ErrPanicked) hold, and reaches an error value
// the loader panicked with.
func (p *PanicError) Unwrap() []error {
	if err, ok := p.Value.(error); ok {
		return []error{ErrPanicked, err}
	}
	return []error{ErrPanicked}
}

// Call is the load of one key in flight.
type Call[V any] struct {
	key   string
	done  chan struct{}
	val   V
	err   error
	panic *PanicError
}

// Group runs loads keyed by string. The zero value is ready to use. A
// Group must not be copied after first use.
type Group[V any] struct {
	mu    sync.Mutex
	calls map[string]*Call[V]
	// ended counts loads that have finished, of any key.
	ended atomic.Uint64
}

// Ended returns how many loads of any key have finished so far. A caller
// that read the cache, then starts a load, need only look again if a
// load ended in between (it may have filled the key): compare two values.
func (g *Group[V]) Ended() uint64 { return g.ended.Load() }

// Result says how a Do call was served.
type Result uint8

const (
	// Led: this caller started the load.
	Led Result = iota
	// Joined: this caller waited for a load another caller started.
	Joined
)

// Claim returns the load of key in flight and false, or, when there is
// none, a new load that this caller leads (true) and must start with Run.
// With fresh, Claim always returns a new load: the one in flight, if any,
// is forgotten (see Forget) and keeps only the callers already waiting.
func (g *Group[V]) Claim(key string, fresh bool) (*Call[V], bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.calls[key]; ok && !fresh {
		return c, false
	}
	if g.calls == nil {
		g.calls = make(map[string]*Call[V])
	}
	c := &Call[V]{key: key, done: make(chan struct{})}
	g.calls[key] = c
	return c, true
}

// Run starts the loads of calls, which this caller leads (from Claim), as
// one: fn runs on a new goroutine with a context derived from ctx without
// its cancellation, bounded by timeout (no bound if timeout <= 0), and
// returns one value and one error per call, in order. If fn panics, every
// call of calls holds the panic.
func (g *Group[V]) Run(ctx context.Context, timeout time.Duration, calls []*Call[V], fn func(ctx context.Context) ([]V, []error)) {
	lctx := context.WithoutCancel(ctx)
	cancel := context.CancelFunc(func() {})
	if timeout > 0 {
		lctx, cancel = context.WithTimeout(lctx, timeout)
	}
	go g.run(calls, lctx, cancel, fn)
}

// Do returns the result of fn for key, running fn only if no load of key
// is in flight. fn runs on a new goroutine with a context derived from ctx
// without its cancellation, bounded by timeout (no bound if timeout <= 0).
// Do returns when fn does, or when ctx ends (with ctx's error; fn goes on
// for the others). onJoin, if not nil, is called at once when this caller
// joins a load already in flight (before it waits).
//
// If fn panics, the caller that started the flight panics with a
// *PanicError (if it is still waiting) and the callers that joined get an
// error matching ErrPanicked.
func (g *Group[V]) Do(ctx context.Context, key string, timeout time.Duration, fn func(ctx context.Context) (V, error), onJoin func()) (V, Result, error) {
	c, led := g.Claim(key, false)
	if led {
		g.Run(ctx, timeout, []*Call[V]{c}, func(ctx context.Context) ([]V, []error) {
			v, err := fn(ctx)
			return []V{v}, []error{err}
		})
	} else if onJoin != nil {
		onJoin()
	}
	res := Joined
	if led {
		res = Led
	}
	v, err := c.Wait(ctx, led)
	return v, res, err
}

// Wait returns c's result once its load is done, or ctx's error if ctx
// ends first; a ctx that ended before the call gets its error even if
// the load is done too (a select between two ready cases picks either,
// and a caller that gave up must hear so: Cache.Fetch's contract). If the
// load panicked, the caller that leads it (led) panics with a
// *PanicError, in its own goroutine where its recover works; any other
// caller gets an error matching ErrPanicked.
func (c *Call[V]) Wait(ctx context.Context, led bool) (V, error) {
	var zero V
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	if c.panic != nil {
		if led {
			panic(c.panic)
		}
		return zero, fmt.Errorf("%w (in a load shared with another caller): %v", ErrPanicked, c.panic.Value)
	}
	return c.val, c.err
}

func (g *Group[V]) run(calls []*Call[V], ctx context.Context, cancel context.CancelFunc, fn func(context.Context) ([]V, []error)) {
	defer func() {
		var pe *PanicError
		if r := recover(); r != nil {
			pe = &PanicError{Value: r, Stack: debug.Stack()}
		}
		cancel()
		g.mu.Lock()
		for _, c := range calls {
			c.panic = pe
			if g.calls[c.key] == c { // Forget may have let a newer load in
				delete(g.calls, c.key)
			}
		}
		g.ended.Add(1)
		g.mu.Unlock()
		for _, c := range calls {
			close(c.done)
		}
	}()
	vals, errs := fn(ctx)
	for i, c := range calls {
		c.val, c.err = vals[i], errs[i]
	}
}

// Lookup returns the load of key in flight, or nil if there is none.
func (g *Group[V]) Lookup(key string) *Call[V] {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[key]
}

// Join waits for the load of key in flight, if there is one, and returns
// its result with ok true; with none in flight it returns at once with ok
// false. onJoin, if not nil, is called at once when there is one to wait
// for (before waiting). A caller whose ctx ends gets ctx's error. A
// panicked load gives an error matching ErrPanicked, as to any caller
// that joined.
func (g *Group[V]) Join(ctx context.Context, key string, onJoin func()) (v V, ok bool, err error) {
	c := g.Lookup(key)
	if c == nil {
		return v, false, nil
	}
	if onJoin != nil {
		onJoin()
	}
	v, err = c.Wait(ctx, false)
	return v, true, err
}

// Forget makes the load of key in flight, if any, invisible to later
// callers: Do and Join after Forget start or find a newer load, while the
// callers already waiting get the old one's result. A cache calls it when
// the key is invalidated, so nobody who asks after the invalidation is
// handed what a load begun before it read.
func (g *Group[V]) Forget(key string) {
	g.mu.Lock()
	delete(g.calls, key)
	g.mu.Unlock()
}

// InFlight reports how many loads are running (for tests and leak checks).
func (g *Group[V]) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.calls)
}
