//go:build !race

package kura_test

const raceEnabled = false
