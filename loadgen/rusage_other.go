//go:build !unix

package loadgen

// processCPU is not measured on this platform.
func processCPU() float64 { return 0 }
