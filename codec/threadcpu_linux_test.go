package codec

import (
	"syscall"
	"unsafe"
)

// threadCPU is the calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID):
// with the goroutine locked to its thread, the time a loop ran, without
// the time the machine's other processes held the core.
func threadCPU() int64 {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return ts.Nano()
}
