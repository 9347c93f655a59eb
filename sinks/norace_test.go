//go:build !race

package sinks

// raceEnabled: see race_test.go.
const raceEnabled = false
