package demo

import (
	"strings"
	"testing"
	"time"
)

// TestLoginFasterWords: the login card calls a side faster only when the
// gap is 10% or more of one run; a run printed "the whole inventory as one
// value was faster (42.21ms vs 42.84ms for kura's Index)".
func TestLoginFasterWords(t *testing.T) {
	for _, c := range []struct {
		w, i time.Duration
		says string
	}{
		{42210 * time.Microsecond, 42840 * time.Microsecond, "too close to call"},
		{42840 * time.Microsecond, 42210 * time.Microsecond, "too close to call"},
		{6840 * time.Microsecond, 18150 * time.Microsecond, "the whole inventory as one value was faster"},
		{18 * time.Millisecond, 15 * time.Millisecond, "kura's Index was faster"},
	} {
		if got := loginFaster(c.w, c.i); !strings.Contains(got, c.says) {
			t.Errorf("loginFaster(%v, %v) = %q, want %q", c.w, c.i, got, c.says)
		}
	}
}
