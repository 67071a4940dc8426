//go:build race

package readthrough

// raceEnabled: the race detector changes allocation counts (sync.Pool
// drops items at random), so allocation assertions are skipped under it.
const raceEnabled = true
