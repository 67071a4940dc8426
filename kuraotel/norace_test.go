//go:build !race

package kuraotel_test

const raceEnabled = false
