//go:build linux

package storage

import (
	"fmt"
	"io"
	"os"
)

// meminfoPath is where Linux reports memory.
const meminfoPath = "/proc/meminfo"

// ReadMemory returns how much memory the process can use, in bytes: on
// Linux MemAvailable (free memory plus what the kernel can reclaim without
// swapping), lowered to the headroom of the process's container cgroup
// when it has a memory limit (memory_cgroup.go). An unreadable or
// malformed /proc/meminfo fails with ErrMemoryUnknown; it is never
// estimated.
func ReadMemory() (int64, error) {
	f, err := os.Open(meminfoPath)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrMemoryUnknown, err)
	}
	defer f.Close()
	available, err := ParseMemAvailable(f)
	if err != nil {
		return 0, err
	}
	if headroom, ok := readCgroupHeadroom(); ok {
		available = min(available, headroom)
	}
	return available, nil
}

// readCgroupHeadroom returns the first cgroup version's headroom that can
// be read and has a limit.
func readCgroupHeadroom() (int64, bool) {
	for _, v := range cgroupVersions {
		limit, err1 := readSmallFile(v.limit)
		usage, err2 := readSmallFile(v.usage)
		stat, err3 := readSmallFile(v.stat)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		headroom, limited, err := cgroupHeadroom(limit, usage, stat, v.inactiveFileKey)
		if err == nil && limited {
			return headroom, true
		}
	}
	return 0, false
}

// readSmallFile reads at most cgroupFileBytesMax bytes of name.
func readSmallFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, cgroupFileBytesMax))
}
