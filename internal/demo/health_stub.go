//go:build !kura_health

package demo

import (
	"context"

	"github.com/kuracache/kura/store"
)

// monitored is a store behind kura's per-node monitor.
type monitored struct {
	store.Store
	// falseDowns counts the times the monitor declared a node Down.
	downs func() int64
}

func newMonitored(context.Context, string) (*monitored, error) {
	return nil, errMonitorNotBuilt
}
