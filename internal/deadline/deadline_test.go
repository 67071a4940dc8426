package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/deadline"
)

// lateCtx is a caller context whose deadline has passed but whose timer
// has not marked it done yet (Err is nil), the moment a store that bounds
// its socket by the deadline reports it first.
type lateCtx struct{ context.Context }

func (lateCtx) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

func TestOurs(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	later, cancel3 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel3()
	wrapped := fmt.Errorf("redis 127.0.0.1:1: %w", context.DeadlineExceeded)
	for _, c := range []struct {
		name   string
		caller context.Context
		err    error
		want   bool
	}{
		{"a deadline error, caller without deadline", context.Background(), context.DeadlineExceeded, true},
		{"a wrapped deadline error", context.Background(), wrapped, true},
		{"a deadline error, caller's deadline an hour away", later, wrapped, true},
		{"the caller was cancelled", cancelled, wrapped, false},
		{"the caller's deadline ended it", expired, wrapped, false},
		{"the caller's deadline passed, its timer not yet fired", lateCtx{context.Background()}, wrapped, false},
		{"not a deadline error", context.Background(), io.ErrUnexpectedEOF, false},
		{"a cancellation", context.Background(), context.Canceled, false},
		{"no error", context.Background(), nil, false},
	} {
		if got := deadline.Ours(c.caller, c.err); got != c.want {
			t.Errorf("%s: Ours = %v, want %v", c.name, got, c.want)
		}
	}
	if !errors.Is(wrapped, context.DeadlineExceeded) {
		t.Fatal("test setup")
	}
}

func TestCallerEnded(t *testing.T) {
	if deadline.CallerEnded(context.Background()) {
		t.Error("Background ended")
	}
	if !deadline.CallerEnded(lateCtx{context.Background()}) {
		t.Error("a context whose deadline passed has not ended")
	}
}
