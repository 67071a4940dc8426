package cdc

import "time"

// InjectFaults breaks delivery on purpose so a checker can prove it
// catches the break: dropEvery skips the invalidations of every n-th batch
// (still reporting and confirming it); reportEarly reports and confirms a
// batch before sending its invalidations, which then wait that long.
func InjectFaults(o *Options, dropEvery int, reportEarly time.Duration) {
	o.faults = faults{dropEvery: dropEvery, reportEarly: reportEarly}
}
