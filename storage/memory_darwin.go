//go:build darwin

package storage

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// ReadMemory returns how much memory the process can use, in bytes: on
// macOS total RAM (sysctl hw.memsize). macOS has no MemAvailable; its
// compressor and swap make "free" misleading, so the design sizes the pool
// from total RAM (docs/DESIGN.md §10).
func ReadMemory() (int64, error) {
	v, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0, fmt.Errorf("%w: sysctl hw.memsize: %v", ErrMemoryUnknown, err)
	}
	if v == 0 || v > math.MaxInt64 {
		return 0, fmt.Errorf("%w: sysctl hw.memsize = %d", ErrMemoryUnknown, v)
	}
	return int64(v), nil
}
