package sim

import (
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Clock returns the engine.Clock of this world. Monotonic is simulated
// time itself, shared by every incarnation: the contract only requires
// that it never goes backwards within a process, and one timeline for the
// whole world lets oracles compare ages across crashes. WallUnixMs is the
// configured epoch plus simulated time, so object timestamps the store
// reports and the engine's own wall clock agree exactly.
func (s *Scheduler) Clock() engine.Clock { return simClock{s} }

// WallUnixMs returns the world's wall-clock time in Unix milliseconds.
func (s *Scheduler) WallUnixMs() int64 {
	return s.cfg.EpochUnixMs + int64(s.now/time.Millisecond)
}

type simClock struct{ s *Scheduler }

func (c simClock) Monotonic() time.Duration { return c.s.now }
func (c simClock) WallUnixMs() int64        { return c.s.WallUnixMs() }
