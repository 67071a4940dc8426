// Package deadline holds the one rule for telling whose deadline ended a
// call: a deadline of ours (the read path's time budget, a console page's
// timeout) or the caller's own context. The read path counts a skipped
// write-back in Stats.BudgetSkips only when its budget ran out
// (internal/readthrough), and the console's key page says "the store did
// not answer within" only when its own timeout did (ui); both ask Ours.
//
// It is not a context package: it only reads contexts and errors.
package deadline

import (
	"context"
	"errors"
	"time"
)

// Ours reports whether err, from a call made under a context derived from
// caller with a deadline of ours, ended because that deadline of ours
// passed: err is a deadline error and the caller's own context has not
// ended (CallerEnded). A store may report a deadline before the context's
// timer marks the context done (rueidis and memcache bound their sockets
// by it), so err is asked, not the derived context alone; pass the derived
// context's Err() as err to ask whether it ended by our deadline.
func Ours(caller context.Context, err error) bool {
	return err != nil && errors.Is(err, context.DeadlineExceeded) && !CallerEnded(caller)
}

// CallerEnded reports whether ctx has ended, counting a deadline that has
// passed before ctx's timer marked it done.
func CallerEnded(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
