package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waitDone fails t unless ch closes within a minute: long enough for any
// loaded machine, so the tests assert what ends a context, never how fast.
func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s: not done after a minute", what)
	}
}

// TestCallCtxEndsWithItsCaller: a call bound for a caller whose context
// can end is ended by that end (the clock's poll closes its Done), with
// the caller's error and cause, long before its tick.
func TestCallCtxEndsWithItsCaller(t *testing.T) {
	var clk clock
	parent, cancel := context.WithCancelCause(context.Background())
	ctx, tc, cc := clk.bind(parent, time.Now(), time.Hour)
	if tc != nil || cc == nil {
		t.Fatalf("a cancellable caller got %T, want a watched *callCtx", ctx)
	}
	if err := ctx.Err(); err != nil {
		t.Fatalf("Err before the end = %v", err)
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Hour {
		t.Fatalf("Deadline = %v, %v; want the tick's, within the budget", dl, ok)
	}
	why := errors.New("client went away")
	cancel(why)
	waitDone(t, ctx.Done(), "a call whose caller canceled")
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err = %v, want context.Canceled", err)
	}
	if got := context.Cause(ctx); got != why {
		t.Fatalf("Cause = %v, want the caller's", got)
	}
	clk.release(tc, cc)
	if cc.recycle() {
		t.Fatal("a callCtx whose Done was closed would be reused")
	}
}

// TestCallCtxEndsWithItsTick: the budget ends a call whose caller never
// ends, with context.DeadlineExceeded, when its tick expires.
func TestCallCtxEndsWithItsTick(t *testing.T) {
	var clk clock
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx, tc, cc := clk.bind(parent, time.Now(), 20*time.Millisecond)
	waitDone(t, ctx.Done(), "a call whose tick expired")
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want context.DeadlineExceeded", err)
	}
	if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Cause = %v, want context.DeadlineExceeded", err)
	}
	if parent.Err() != nil {
		t.Fatal("the budget ended the caller's context")
	}
	clk.release(tc, cc)
}

// TestCallCtxErrBeforePoll: Err sees the caller's end before the clock's
// poll does, and then Done is already closed (the context contract: a
// non-nil Err means Done is closed).
func TestCallCtxErrBeforePoll(t *testing.T) {
	var clk clock
	parent, cancel := context.WithCancel(context.Background())
	ctx, tc, cc := clk.bind(parent, time.Now(), time.Hour)
	cancel()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err = %v, want context.Canceled", err)
	}
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Err returned an error while Done was open")
	}
	clk.release(tc, cc)
}

// TestCallCtxReused: a call that ended normally hands its context, Done
// channel included, to a later call; nothing of the first caller stays.
func TestCallCtxReused(t *testing.T) {
	cc := newCallCtx()
	var clk clock
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "first"))
	defer cancel()
	done := cc.done
	cc.parent, cc.t = parent, clk.at(time.Now(), time.Hour)
	stop := cc.AfterFunc(func() { t.Error("a stopped AfterFunc ran") })
	if !stop() {
		t.Fatal("stop of a registered AfterFunc = false")
	}
	cc.AfterFunc(func() { t.Error("an AfterFunc of the previous call ran") })
	if !cc.recycle() {
		t.Fatal("a callCtx that never ended was not reused")
	}
	if cc.done != done || cc.Value(ctxKey{}) != nil || cc.Err() != nil || len(cc.afters) != 0 {
		t.Fatalf("recycled callCtx keeps the previous call's state: %+v", cc)
	}
	other, cancelOther := context.WithCancel(context.Background())
	cc.parent, cc.t = other, clk.at(time.Now(), time.Hour)
	cancelOther()
	cc.check()
	waitDone(t, cc.Done(), "the recycled context")
}

type ctxKey struct{}

// TestCallCtxAfterFunc: context.AfterFunc and contexts derived from a
// callCtx hear of its end through its AfterFunc method, and a function
// stopped in time never runs.
func TestCallCtxAfterFunc(t *testing.T) {
	var clk clock
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	ctx, tc, cc := clk.bind(parent, time.Now(), time.Hour)
	if ctx.Value(ctxKey{}) != "v" {
		t.Fatal("the caller's values are lost")
	}
	ran := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ran) })
	stopped := context.AfterFunc(ctx, func() { t.Error("a stopped AfterFunc ran") })
	if !stopped() {
		t.Fatal("stop = false before the end")
	}
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	cancel()
	waitDone(t, ran, "AfterFunc after the caller canceled")
	waitDone(t, child.Done(), "a context derived from the call's")
	if cc.AfterFunc(func() {})() {
		t.Fatal("stop of a function registered after the end = true")
	}
	clk.release(tc, cc)
}

// TestClockPollStopsWhenIdle: the poll timer runs only while a watched
// call is in flight: once the last one is released it stops re-arming,
// and the next call arms it again.
func TestClockPollStopsWhenIdle(t *testing.T) {
	var clk clock
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	for round := range 3 {
		_, tc, cc := clk.bind(parent, time.Now(), time.Hour)
		if !clk.polling.Load() {
			t.Fatalf("round %d: a watched call did not arm the poll", round)
		}
		clk.release(tc, cc)
		deadline := time.Now().Add(time.Minute)
		for clk.polling.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the poll still runs a minute after the last call", round)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestBindKinds: Background gets a tick's shared context, a context
// without a Done channel a pooled tickCtx (store.DeadlineBound), one with
// a Done channel a watched callCtx.
func TestBindKinds(t *testing.T) {
	var clk clock
	now := time.Now()
	if ctx, tc, cc := clk.bind(context.Background(), now, time.Hour); tc != nil || cc != nil {
		t.Fatalf("Background: %T pooled", ctx)
	}
	ctx, tc, cc := clk.bind(context.WithValue(context.Background(), ctxKey{}, 1), now, time.Hour)
	if _, ok := ctx.(interface{ DeadlineBound() }); !ok || tc == nil || cc != nil || ctx.Value(ctxKey{}) != 1 {
		t.Fatalf("WithValue: %T", ctx)
	}
	clk.release(tc, cc)
	parent, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	ctx, tc, cc = clk.bind(parent, now, time.Hour)
	if _, ok := ctx.(interface{ DeadlineBound() }); ok || cc == nil {
		t.Fatalf("WithTimeout: %T, deadline-bound", ctx)
	}
	clk.release(tc, cc)
}

// BenchmarkBind is what the budget costs the first store call of a read,
// per kind of caller context: bind and release, no store call.
func BenchmarkBind(b *testing.B) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, k := range []struct {
		name string
		ctx  context.Context
	}{
		{"background", context.Background()},
		{"with-value", context.WithValue(context.Background(), ctxKey{}, 1)},
		{"with-cancel", parent},
	} {
		b.Run(k.name, func(b *testing.B) {
			var clk clock
			b.ReportAllocs()
			for b.Loop() {
				ctx, tc, cc := clk.bind(k.ctx, time.Now(), time.Second)
				if ctx.Err() != nil {
					b.Fatal("ended")
				}
				clk.release(tc, cc)
			}
		})
	}
	b.Run("with-timeout", func(b *testing.B) { // what bind replaces
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancelT := context.WithTimeout(parent, time.Second)
			if ctx.Err() != nil {
				b.Fatal("ended")
			}
			cancelT()
		}
	})
}

// BenchmarkSweep is one poll of the clock with 64 calls in flight (the
// poll runs every cancelPoll while any is).
func BenchmarkSweep(b *testing.B) {
	var clk clock
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	ccs := make([]*callCtx, 64)
	for i := range ccs {
		_, _, ccs[i] = clk.bind(parent, time.Now(), time.Hour)
	}
	b.ReportAllocs()
	for b.Loop() {
		clk.sweep()
	}
	b.StopTimer()
	for _, cc := range ccs {
		clk.release(nil, cc)
	}
}
