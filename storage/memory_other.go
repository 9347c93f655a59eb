//go:build !linux && !darwin

package storage

import (
	"fmt"
	"runtime"
)

// ReadMemory has no probe on this platform: it always fails with
// ErrMemoryUnknown, and SystemMemory answers its fallback
// (MemoryFallbackBytes in cmd/skipprd, the engine's own default hint).
// Linux and macOS are the platforms the design sizes memory on.
func ReadMemory() (int64, error) {
	return 0, fmt.Errorf("%w: no memory probe on %s", ErrMemoryUnknown, runtime.GOOS)
}
