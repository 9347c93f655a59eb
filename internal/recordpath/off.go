//go:build !recordpath

package recordpath

// Spine does nothing in a normal build.
func Spine() {}

// Answer returns done itself in a normal build.
func Answer[T any](done func(T)) func(T) { return done }

// Clear does nothing in a normal build.
func Clear() {}

// Write does nothing in a normal build.
func Write(string) error { return nil }
