//go:build !race

package readthrough

const raceEnabled = false
