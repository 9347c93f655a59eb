package sinks

import "github.com/skipprd/skipprd/engine"

// Set maps sink_ref → Sink; it implements engine.Sinks. It is read-only
// once handed to the engine (the engine reads it on its loop).
type Set map[string]engine.Sink

var _ engine.Sinks = Set(nil)

// Sink implements engine.Sinks.
func (s Set) Sink(ref string) (engine.Sink, bool) {
	sink, ok := s[ref]
	return sink, ok && sink != nil
}
