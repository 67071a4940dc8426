//go:build race

package kuraotel_test

// raceEnabled: the race detector changes allocation counts (sync.Pool
// drops items at random), so allocation assertions are checked by make
// test-allocs, which runs them without it.
const raceEnabled = true
