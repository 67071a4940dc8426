//go:build linux

// Package cputime measures the CPU time of the calling OS thread, for
// benchmarks on a shared machine: wall-clock ns/op also counts the time
// other processes held the CPU, CPU time does not.
package cputime

import (
	"runtime"
	"syscall"
	"time"
)

// Thread returns the CPU time (user + system) the calling OS thread has
// used. Call runtime.LockOSThread first so that the goroutine stays on
// that thread.
func Thread() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Measure runs loop with the goroutine locked to its thread and returns
// the thread CPU time it used.
func Measure(loop func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := Thread()
	loop()
	return Thread() - start
}

// Process returns the CPU time (user + system) of the whole process: for
// work spread over many goroutines, where Measure's one thread is not
// enough. It counts every goroutine, the runtime's own included.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
