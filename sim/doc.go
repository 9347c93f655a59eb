// Package sim is the simulated world the engine runs in under simulate:
// one goroutine, a priority queue of events in simulated time, a seeded
// PRNG per subsystem split from the root seed, a disk model that separates
// written from synced bytes, an object-store model with per-key atomicity,
// LIST lag, multipart state and ambiguous outcomes, simulated sources and
// sinks, the oracles that check the guarantees, and a trace hash updated
// at every event. Same seed ⇒ same trace ⇒ same hash.
//
// Production code never imports sim.
package sim
