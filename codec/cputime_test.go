package codec

import (
	"syscall"
	"testing"
)

// cpuClock measures the process's CPU time across a benchmark loop.
type cpuClock int64

func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func startCPU() cpuClock { return cpuClock(processCPU()) }

// report adds the cpu-ns/op metric.
func (c cpuClock) report(b *testing.B) {
	if b.N > 0 {
		b.ReportMetric(float64(processCPU()-int64(c))/float64(b.N), "cpu-ns/op")
	}
}
